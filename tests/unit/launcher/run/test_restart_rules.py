"""The rules of a run that restarts (launcher/run/restarts.py): what a step's end leads to."""

from __future__ import annotations

from typing import Any

import pytest
from hvd_container.launcher.run.restarts import StepEnd, decide, error_line, for_good, lost_time

TRACEBACK = (
    "0: Traceback (most recent call last):",
    '0:   File "train.py", line 9, in <module>',
    "0: RuntimeError: planned failure at epoch 3",
)


def end(why: str, *, progress: tuple[str, ...] = ("ck.pt epoch 1",), **more: Any) -> StepEnd:
    values: dict[str, Any] = {"exit_code": 0 if why == "done" else 1, "started": 0.0, "ended": 10.0}
    return StepEnd(why=why, progress=progress, **{**values, **more})  # type: ignore[arg-type]


def test_done_and_the_time_limit_end_the_loop() -> None:
    assert not decide([end("done")], 5).restart
    warned = decide([end("time")], 5)
    assert not warned.restart and "next segment" in warned.why


def test_a_hang_and_a_lost_node_restart_until_max_restarts() -> None:
    assert decide([end("hang")], 1).restart
    lost = decide([end("node", lost=("node3",))], 1)
    assert lost.restart and "node3 lost" in lost.why
    stopped = decide([end("hang"), end("node", lost=("node3",))], 1)
    assert not stopped.restart and "1 restarts already (--max-restarts 1)" in stopped.why


def test_a_script_error_after_progress_restarts_and_a_new_one_again() -> None:
    first = end("script", detail="RuntimeError: planned failure at epoch 3", last_lines=TRACEBACK)
    assert decide([first], 5).restart
    second = end("script", detail="RuntimeError: planned failure at epoch 6")
    assert decide([first, second], 5).restart
    assert not decide([first, second], 1).restart  # --max-restarts bounds them


@pytest.mark.parametrize(
    ("lines", "said"),
    [
        (('  File "t.py", line 1', "SyntaxError: invalid syntax"), "SyntaxError: invalid syntax"),
        (("1: ModuleNotFoundError: No module named 'x'",), "ModuleNotFoundError"),
        (("[rank1]: ImportError: libcuda.so.1: cannot open",), "ImportError: libcuda.so.1"),
        (("torch.OutOfMemoryError: CUDA out of memory. Tried",), "OutOfMemoryError"),
        (("FileNotFoundError: [Errno 2] data.npy",), "FileNotFoundError"),
    ],
)
def test_an_error_that_comes_again_at_every_start_is_not_retried(
    lines: tuple[str, ...], said: str
) -> None:
    ended = end("script", detail=error_line(lines), last_lines=lines)
    decision = decide([ended], 5)
    assert not decision.restart and said in decision.why and "not worth a retry" in decision.why


def test_a_script_error_before_any_checkpoint_is_not_retried() -> None:
    ended = end("script", progress=(), detail="RuntimeError: x", last_lines=TRACEBACK)
    decision = decide([ended], 5)
    assert not decision.restart and "before it wrote a checkpoint" in decision.why


def test_the_same_error_twice_is_not_retried() -> None:
    one = end("script", detail="RuntimeError: the same")
    decision = decide([one, one], 5)
    assert not decision.restart and "the same way twice" in decision.why
    # after a hang between them, the error is new again
    assert decide([one, end("hang"), one], 5).restart


def test_a_hang_or_a_lost_node_restarts_without_progress_too() -> None:
    assert decide([end("hang", progress=())], 3).restart
    assert decide([end("node", progress=(), lost=("n2",))], 3).restart


def test_the_error_line_is_the_last_python_error_of_the_ranks() -> None:
    assert error_line(TRACEBACK) == "RuntimeError: planned failure at epoch 3"
    assert error_line(("[rank 1] ValueError: bad",)) == "[rank 1] ValueError: bad"
    assert error_line(("srun: error: node2: task 1: Exited with exit code 1", "")) == (
        "srun: error: node2: task 1: Exited with exit code 1"
    )
    assert error_line(()) == ""
    assert for_good(TRACEBACK) is None


def test_the_time_lost_runs_from_the_last_checkpoint_to_the_next_step() -> None:
    ends = [
        end("hang", started=0.0, ended=100.0, progress_at=70.0),  # 30 s after its checkpoint
        end("node", started=110.0, ended=200.0, progress=(), progress_at=0.0),  # all 90 s
        end("done", started=215.0, ended=300.0),
    ]
    # 30 + 10 (to the second step) + 90 + 15 (to the third)
    assert lost_time(ends) == pytest.approx(145.0)
    assert lost_time([end("done")]) == 0.0
