"""The errors users see (one line each, no traceback) and how they map to exit codes."""

from __future__ import annotations

import re

from hvd_container.core.text import ascii_digits


class UserError(Exception):
    """Bad input or a failed step the user can fix; the CLI prints it as one line, exit 2."""

    exit_code = 2

    @property
    def problems(self) -> list[str]:
        """Each problem as one line (one, unless the error gathers several of a file)."""
        return [str(self)]


class Problems(UserError):
    """Every problem found in one file, each a line `FILE:LINE: key: ...`, sorted by line: one
    run shows all the mistakes of a recipe or profile, not the first alone."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self._problems = list(problems)

    @property
    def problems(self) -> list[str]:
        return list(self._problems)


def _line_key(problem: str) -> tuple[str, int]:
    """(file, line) of a `FILE:LINE: ...` problem, for sorting; a line-less one goes first."""
    head = problem.split(": ", 1)[0]
    source, _, line = head.rpartition(":")
    return (source, int(line)) if ascii_digits(line) else (head, 0)


_PROBLEM = re.compile(
    r"^(?P<file>[^\n]+?):(?P<line>[0-9]+): (?:(?P<key>[A-Za-z0-9_.\[\]-]+): )?(?P<message>.*)$",
    re.S,
)


def problem_record(problem: str) -> dict[str, str | int | None]:
    """A `FILE:LINE: key.path: message` problem as fields for a script: file, line, key,
    message (None where the line names no file, line or key) and the text as printed."""
    found = _PROBLEM.match(problem)
    if found is None:
        return {"file": None, "line": None, "key": None, "message": problem, "text": problem}
    return {
        "file": found["file"],
        "line": int(found["line"]),
        "key": found["key"],
        "message": found["message"],
        "text": problem,
    }


def sort_by_line(problems: list[str]) -> list[str]:
    """Problems in the order of the lines they point at, each once (file by file)."""
    return sorted(dict.fromkeys(problems), key=_line_key)


def raise_problems(problems: list[str]) -> None:
    """Raise nothing for no problem, a plain UserError for one, Problems for several."""
    if len(problems) == 1:
        raise UserError(problems[0])
    if problems:
        raise Problems(problems)


class StepFailed(UserError):
    """An external step (build, push, conversion, job) failed; exit 1."""

    exit_code = 1


def source_checkout_hint(script: str) -> str:
    """Where the project's own install script is: only a source checkout has testbed/ (a pip
    user is told what to install first)."""
    return f"in a source checkout of hvd-container, `testbed/{script}` does it"


BUILD_EXTRA = "pip install 'hvd-container[build]'"


def missing_build_extra(what: str) -> UserError:
    """The one line for a build-side command on a launch-only install (no docker, requests or
    spython: `pip install hvd-container` brings only what launching needs)."""
    return UserError(f"{what} is not installed (the build extra): {BUILD_EXTRA}")


def brief(text: str, limit: int) -> str:
    """text on one line, cut to limit characters with "...": a command or instruction quoted in
    a message."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


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
