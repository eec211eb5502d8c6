"""How build, convert and push progress is shown: rich on a terminal, plain lines otherwise,
JSON lines for machines.

Every reporter is a callable report(kind, phase, text) (see containers.build.Reporter) plus
`transfer(t)` for the bytes of a long copy (containers.transfer.Transfer: rate and ETA are
worked out here) and `failure(exc, phase)` to show any failure: the others print the last lines of a failed step's
output (the one-line error itself comes from the CLI, on stderr); the JSON reporter writes one
error record on stdout, so that a reader of the JSON lines learns about every failure.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from hvd_container.cli.json_output import error_record
from hvd_container.core.errors import UserError

if TYPE_CHECKING:
    from hvd_container.containers.transfer import Transfer

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


def size_text(n: float) -> str:
    """Bytes in decimal units, as docker and rich show them: 512 B, 1.5 MB, 2.10 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}" if unit == "GB" else f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


class Meter:
    """Rate and ETA of each transfer (phase and item), and when it is due to be shown again."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.started: dict[tuple[str, str], tuple[float, int]] = {}
        self.shown: dict[tuple[str, str], float] = {}

    def due(self, t: Transfer, now: float) -> tuple[float, float | None] | None:
        """(rate, ETA) when t is to be shown (at most every `every` seconds a transfer, and
        its end), else None."""
        measured = self.measure(t, now)
        key = (t.phase, t.item)
        finished = t.total is not None and t.done >= t.total
        if now - self.shown.get(key, -self.every) < self.every and not finished:
            return None
        self.shown[key] = now
        return measured

    def measure(self, t: Transfer, now: float) -> tuple[float, float | None]:
        """(bytes per second, seconds left or None when the total is unknown)."""
        if t.seconds:  # the library timed it from its start
            rate = t.done / t.seconds
        else:
            first_time, first_done = self.started.setdefault((t.phase, t.item), (now, t.done))
            elapsed = now - first_time
            rate = (t.done - first_done) / elapsed if elapsed > 0 else 0.0
        if t.total is None or rate <= 0:
            return rate, None
        return rate, max(t.total - t.done, 0) / rate


def transfer_text(t: Transfer, rate: float, eta: float | None) -> str:
    """One line: `1.20 GB of 2.10 GB (57%), 45.1 MB/s, 600.0 MB written, ETA 20 s`."""
    parts = [size_text(t.done)]
    if t.total:
        parts = [f"{size_text(t.done)} of {size_text(t.total)} ({min(t.done / t.total, 1):.0%})"]
    parts.append(f"{size_text(rate)}/s")
    if t.written is not None:
        parts.append(f"{size_text(t.written)} written")
    if eta is not None:
        parts.append(f"ETA {eta:.0f} s")
    return (f"{t.item}: " if t.item else "") + ", ".join(parts)


class PlainReporter:
    # a line a transfer at most this often (and its last): a log, not an animation
    EVERY = 5.0

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.meter = Meter(self.EVERY)

    def __call__(self, kind: str, phase: str, text: str) -> None:
        print(format_plain(kind, phase, text), file=self.out, flush=True)

    def transfer(self, t: Transfer) -> None:
        shown = self.meter.due(t, time.monotonic())
        if shown is not None:
            print(f"[{t.phase}]    {transfer_text(t, *shown)}", file=self.out, flush=True)

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


class JsonReporter:
    EVERY = 1.0  # a progress record a transfer at most once a second (and its last)

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.start = time.monotonic()
        self.phase = SETUP_PHASE
        self.meter = Meter(self.EVERY)

    def __call__(self, kind: str, phase: str, text: str) -> None:
        self.phase = phase
        line = format_json(kind, phase, text, time.monotonic() - self.start)
        print(line, file=self.out, flush=True)

    def transfer(self, t: Transfer) -> None:
        now = time.monotonic()
        shown = self.meter.due(t, now)
        if shown is None:
            return
        rate, eta = shown
        self.phase = t.phase
        record: dict[str, Any] = {
            "event": "progress",
            "phase": t.phase,
            "text": transfer_text(t, rate, eta),
            "elapsed": round(now - self.start, 3),
            "done": t.done,
            "total": t.total,
            "rate": round(rate, 1),
            "eta": None if eta is None else round(eta, 1),
        }
        if t.item:
            record["layer"] = t.item
        if t.written is not None:
            record["written"] = t.written
        print(json.dumps(record), file=self.out, flush=True)

    def failure(self, exc: BaseException, phase: str | None = None) -> None:
        """One error record (phase: where it failed; default: the phase of the last event)."""
        record = error_record(exc, phase or self.phase, time.monotonic() - self.start)
        print(json.dumps(record, ensure_ascii=False), file=self.out, flush=True)

    def close(self) -> None:
        pass


class RichReporter:
    """Log lines scroll above a live status line naming the current phase and step."""

    def __init__(self, starting: str = "starting build", console: Any = None) -> None:

        # rich's Console honours NO_COLOR (styles stay, colours go)
        self.console = console or Console(highlight=False)
        self.status = self.console.status(starting)
        self.status.start()
        self.phase = ""
        self.bars: Any = None  # rich.progress.Progress, from the first transfer on
        self.tasks: dict[tuple[str, str], Any] = {}

    def transfer(self, t: Transfer) -> None:
        """A bar a transfer (the export, each pushed layer): bytes, rate, ETA."""

        if self.bars is None:
            self.status.stop()  # rich shows one live display at a time
            self.bars = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[written]}"),
                console=self.console,
            )
            self.bars.start()
        key = (t.phase, t.item)
        written = f"{size_text(t.written)} written" if t.written is not None else ""
        if key not in self.tasks:
            label = escape(f"{t.phase} {t.item}".strip())
            self.tasks[key] = self.bars.add_task(label, total=t.total, written=written)
        self.bars.update(self.tasks[key], completed=t.done, total=t.total, written=written)

    def __call__(self, kind: str, phase: str, text: str) -> None:

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

        self.close()
        tail = getattr(exc, "tail", None)
        if tail:
            self.console.rule(f"[red]last {len(tail)} lines of the failing step", align="left")
            for line in tail:
                self.console.print(f"   {escape(line)}")

    def close(self) -> None:
        self.status.stop()
        if self.bars is not None:
            self.bars.stop()


def make_reporter(mode: str, json_output: bool = False, starting: str = "starting build") -> Any:
    """The reporter for --progress MODE (auto: rich on a TTY, plain otherwise) / --json."""
    if json_output or mode == "json":
        return JsonReporter()
    if mode == "plain" or (mode == "auto" and not sys.stdout.isatty()):
        return PlainReporter()
    return RichReporter(starting)


@contextlib.contextmanager
def reported(reporter: Any, phase: str | Callable[[], str | None] | None = None) -> Iterator[None]:
    """A command's work under its reporter: a failure or Ctrl-C is reported (in `phase`, or the
    phase it names when it is asked) and raised on; the reporter is closed either way."""
    try:
        yield
    except (UserError, KeyboardInterrupt) as exc:
        reporter.failure(exc, phase() if callable(phase) else phase)
        raise
    finally:
        reporter.close()
