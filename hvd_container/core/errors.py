"""The one error type users see: a single line, no traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


class UserError(Exception):
    """Bad input or a failed step the user can fix; the CLI prints it as one line, exit 2."""

    exit_code = 2


class StepFailed(UserError):
    """An external step (build, push, conversion, job) failed; exit 1."""

    exit_code = 1


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every cleanup path (temp files, srun) runs."""


def exit_code_of(exc: BaseException) -> int:
    """The exit status the CLI gives for exc (130 Ctrl-C, 143 SIGTERM, else its exit_code)."""
    if isinstance(exc, KeyboardInterrupt):
        return 143 if isinstance(exc, Terminated) else 130
    return int(getattr(exc, "exit_code", 1))


def interrupt_text(exc: KeyboardInterrupt) -> str:
    """What the CLI says for an interrupt: 'terminated' for SIGTERM, else 'interrupted'."""
    return "terminated" if isinstance(exc, Terminated) else "interrupted"


class Interrupted(Exception):
    """Ctrl-C/SIGTERM carried past typer, which would turn it into a silent `Exit(130)`."""

    def __init__(self, interrupt: KeyboardInterrupt) -> None:
        super().__init__(interrupt_text(interrupt))
        self.exit_code = exit_code_of(interrupt)


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated


def guarded(call: Callable[[], int]) -> int:
    """call(), with SIGTERM raised like Ctrl-C and user errors and interrupts as one line."""
    import signal
    import threading

    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main_thread else None
    try:
        return call()
    except UserError as exc:
        _say(f"error: {exc}")
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
    print(f"hvd-container: {message}", file=sys.stderr, flush=True)
