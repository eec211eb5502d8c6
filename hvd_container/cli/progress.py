"""How build progress is shown: rich on a terminal, plain lines otherwise, JSON lines for machines.

Every reporter is a callable report(kind, phase, text) (see containers.build.Reporter) plus
`failure(exc, phase)` to show any failure: the others print the last lines of a failed step's
output (the one-line error itself comes from the CLI, on stderr); the JSON reporter writes one
error record on stdout, so that a reader of the JSON lines learns about every failure.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from hvd_container.core.errors import exit_code_of, interrupt_text

MODES = ("auto", "rich", "plain", "json")


def format_plain(kind: str, phase: str, text: str) -> str:
    """One plain line: the phase in brackets, then the text; steps are marked with '=>'."""
    if kind == "step":
        return f"[{phase}] => {text}"
    if kind == "cached":
        return f"[{phase}]    (cached)" if phase != "done" else f"[cache] {text}"
    if kind == "done":
        return f"[done] {text}"
    if kind == "info":
        return f"[{phase}] -- {text}"
    return f"[{phase}]    {text}"


def format_json(kind: str, phase: str, text: str, elapsed: float) -> str:
    return json.dumps(
        {"event": kind, "phase": phase, "text": text, "elapsed": round(elapsed, 3)},
        ensure_ascii=False,
    )


class PlainReporter:
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout

    def __call__(self, kind: str, phase: str, text: str) -> None:
        print(format_plain(kind, phase, text), file=self.out, flush=True)

    def failure(self, exc: BaseException, phase: str | None = None) -> None:
        tail = getattr(exc, "tail", None)
        if tail:
            print(f"--- last {len(tail)} lines of the failing step ---", file=sys.stderr)
            for line in tail:
                print(f"    {line}", file=sys.stderr)

    def close(self) -> None:
        pass


# The phase of a failure before the first progress event: loading the recipe, reaching the
# engine, rendering the context.
SETUP_PHASE = "setup"


def error_record(exc: BaseException, phase: str, elapsed: float) -> dict[str, Any]:
    """The JSON error record of a failure: the CLI's one-line message and exit status."""
    code = exit_code_of(exc)
    text = interrupt_text(exc) if isinstance(exc, KeyboardInterrupt) else str(exc)
    return {
        "event": "error",
        "phase": phase,
        "text": text,
        "exit_code": code,
        "elapsed": round(elapsed, 3),
        "step": getattr(exc, "step", None),
        "instruction": getattr(exc, "instruction", None),
        "tail": getattr(exc, "tail", []),
    }


class JsonReporter:
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.start = time.monotonic()
        self.phase = SETUP_PHASE

    def __call__(self, kind: str, phase: str, text: str) -> None:
        self.phase = phase
        line = format_json(kind, phase, text, time.monotonic() - self.start)
        print(line, file=self.out, flush=True)

    def failure(self, exc: BaseException, phase: str | None = None) -> None:
        """One error record (phase: where it failed; default: the phase of the last event)."""
        record = error_record(exc, phase or self.phase, time.monotonic() - self.start)
        print(json.dumps(record, ensure_ascii=False), file=self.out, flush=True)

    def close(self) -> None:
        pass


class RichReporter:
    """Log lines scroll above a live status line naming the current phase and step."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(highlight=False)
        self.status = self.console.status("starting build")
        self.status.start()
        self.phase = ""

    def __call__(self, kind: str, phase: str, text: str) -> None:
        from rich.markup import escape

        if phase != self.phase and phase != "done":
            self.phase = phase
            self.console.rule(f"[bold]{escape(phase)}", align="left")
        if kind == "step":
            self.console.print(f"[bold cyan]=>[/] {escape(text)}")
            self.status.update(f"[bold]{escape(phase)}[/] {escape(text[:100])}")
        elif kind == "cached":
            if phase == "done":
                self.console.print(f"[green]cache hit:[/] {escape(text)}")
            else:
                self.console.print("   [dim](cached)[/]")
        elif kind == "done":
            self.console.print(f"[bold green]done:[/] {escape(text)}")
        elif kind == "info":
            self.console.print(f"[yellow]--[/] {escape(text)}")
        else:
            self.console.print(f"   [dim]{escape(text)}[/]")

    def failure(self, exc: BaseException, phase: str | None = None) -> None:
        from rich.markup import escape

        self.status.stop()
        tail = getattr(exc, "tail", None)
        if tail:
            self.console.rule(f"[red]last {len(tail)} lines of the failing step", align="left")
            for line in tail:
                self.console.print(f"   {escape(line)}")

    def close(self) -> None:
        self.status.stop()


def make_reporter(mode: str, json_output: bool = False) -> Any:
    """The reporter for --progress MODE (auto: rich on a TTY, plain otherwise) / --json."""
    if json_output or mode == "json":
        return JsonReporter()
    if mode == "plain" or (mode == "auto" and not sys.stdout.isatty()):
        return PlainReporter()
    return RichReporter()
