"""cli/progress.py: how a command's failure reaches its reporter."""

from __future__ import annotations

import pytest

from hvd_container.cli.progress import reported
from hvd_container.core.errors import UserError


def test_a_commands_failure_is_reported_in_the_phase_it_came_in_and_the_reporter_closed() -> None:
    """build, push, convert and lock share one failure/close block (cli/progress.reported)."""

    class Seen:
        def __init__(self) -> None:
            self.said: list[tuple[str, str | None]] = []
            self.closed = 0

        def failure(self, exc: BaseException, phase: str | None = None) -> None:
            self.said.append((str(exc), phase))

        def close(self) -> None:
            self.closed += 1

    seen, phase = Seen(), "build"
    with pytest.raises(UserError), reported(seen, lambda: phase):
        phase = "push"
        raise UserError("registry refused")
    assert seen.said == [("registry refused", "push")] and seen.closed == 1
    with pytest.raises(KeyboardInterrupt), reported(seen, "lock"):
        raise KeyboardInterrupt
    assert seen.said[-1] == ("", "lock") and seen.closed == 2
    with reported(seen, "convert"):
        pass
    assert len(seen.said) == 2 and seen.closed == 3
    with pytest.raises(ValueError), reported(seen, "convert"):
        raise ValueError("a bug")  # not the user's: a traceback, no error record
    assert len(seen.said) == 2 and seen.closed == 4
