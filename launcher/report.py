"""How launch code tells its caller what happens, without printing or prompting itself.

The CLI hands in a reporter that writes to the terminal (hvd_container/cli/terminal.py); a
library caller gets this base, which keeps the warnings and says nothing.
"""

from __future__ import annotations


class Reporter:
    """Warnings, job state lines, a job's output and yes/no questions of one launch."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.notes: list[str] = []

    def warn(self, messages: list[str]) -> None:
        """Things the user should know but that do not stop the launch."""
        self.warnings += [m for m in messages if m not in self.warnings]

    def note(self, messages: list[str]) -> None:
        """What the tool chose on the user's behalf, as it should (nothing to fix)."""
        self.notes += [m for m in messages if m not in self.notes]

    def status(self, line: str) -> None:
        """A state change: submitted, pending, running, finished, cancelled."""

    def job_output(self, text: str, *, stderr: bool) -> None:
        """Text a job wrote to its stdout file (stderr=False) or stderr file."""

    def confirm(self, question: str) -> bool | None:
        """The user's yes/no, or None when nobody can be asked (no terminal)."""
        return None
