"""What the command line shows on the terminal: errors, warnings, job states, job output.

`guarded` turns user errors and interrupts into one line and an exit code; the launch
reporter is what the CLI hands to launcher code, which never prints itself.
"""

from __future__ import annotations

import re
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from hvd_container.core.errors import Terminated, UserError, exit_code_of, interrupt_text
from hvd_container.core.text import TERMINAL_CONTROLS
from hvd_container.launcher.report import Reporter


class Interrupted(Exception):
    """Ctrl-C/SIGTERM carried past typer, which would turn it into a silent `Exit(130)`."""

    def __init__(self, interrupt: KeyboardInterrupt) -> None:
        super().__init__(interrupt_text(interrupt))
        self.exit_code = exit_code_of(interrupt)


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated


def guarded(call: Callable[[], int]) -> int:
    """call(), with SIGTERM raised like Ctrl-C and user errors and interrupts as one line."""

    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main_thread else None
    try:
        return call()
    except UserError as exc:
        for problem in exc.problems:
            _say(f"error: {problem}")
        return exc.exit_code
    except Interrupted as exc:
        _say(str(exc))
        return exc.exit_code
    except KeyboardInterrupt as exc:  # outside any command, e.g. while parsing
        _say(interrupt_text(exc))
        return exit_code_of(exc)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def warn(messages: list[str]) -> None:
    """Print each warning once, in order, as `hvd-container: warning: ...` on stderr."""
    for message in dict.fromkeys(messages):
        _say(f"warning: {message}")


def _say(message: str) -> None:
    print(f"hvd-container: {safe_text(message)}", file=sys.stderr, flush=True)


class TerminalReporter(Reporter):
    """The launch reporter of the CLI: warnings and states on stderr (each warning once),
    a job's output on stdout/stderr, questions asked only on a terminal."""

    def warn(self, messages: list[str]) -> None:
        fresh = [m for m in dict.fromkeys(messages) if m not in self.warnings]
        super().warn(fresh)
        warn(fresh)

    def note(self, messages: list[str]) -> None:
        fresh = [m for m in dict.fromkeys(messages) if m not in self.notes]
        super().note(fresh)
        for message in fresh:
            _say(f"note: {message}")

    def status(self, line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    def job_output(self, text: str, *, stderr: bool) -> None:
        stream = sys.stderr if stderr else sys.stdout
        stream.write(text)
        stream.flush()

    def confirm(self, question: str) -> bool | None:
        if not sys.stdin.isatty():
            return None
        try:
            answer = input(f"\n{question} [Y/n] ").strip().lower()
        except (KeyboardInterrupt, EOFError):
            return True
        return answer in ("", "y", "yes")


# what a terminal acts on, and newline and tab too: a value shown in a message stays on its line
_UNSAFE = re.compile(f"[\t\n{TERMINAL_CONTROLS}]")


def safe_text(text: str) -> str:
    """text with every character a terminal would act on written as a visible escape (\\x1b,
    \\u202e): for values from files others made (SIF labels, descriptor names)."""
    return _UNSAFE.sub(
        lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text
    )
