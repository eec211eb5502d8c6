"""Whether a step that ended goes on: the rules of a run that restarts (`--until-done`, or
`--max-restarts` inside an allocation), as pure functions over what the step left behind.

A step ends done (exit 0), at the time limit (Slurm's warning came: the job goes on in its next
segment, not here), hung (no output for --hang-after: the tool ended it), because a node went
down or broke (the screen of the nodes found it), or with the script's own error. A hang and a
lost node are the machine's fault: the step starts again from the last checkpoint. A script
error is tried again only where that can help: not an error that comes again whatever is tried
(a SyntaxError, a missing module or file, out of memory), not one the step made no progress
before (it wrote no $HVD_PROGRESS line: a script that does not keep that contract is never
restarted for its own errors), and not the same error twice with no progress between.
`--max-restarts` bounds them all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Why = Literal["done", "time", "hang", "node", "script"]

# the variable naming the file a rank writes a line to after each whole checkpoint (its
# path, its epoch): the run's proof of progress, and what the next step resumed from
PROGRESS = "HVD_PROGRESS"

# errors that come again however often the step starts: not worth a restart
_FOR_GOOD = re.compile(
    r"^\s*(?:\S+\.)?(SyntaxError|IndentationError|TabError|ImportError|ModuleNotFoundError|"
    r"FileNotFoundError|PermissionError|OutOfMemoryError|MemoryError)\b|CUDA out of memory",
    re.M,
)
# a Python error line as a traceback ends: `Name: text` or `pkg.Name: text`
_ERROR_LINE = re.compile(
    r"^(?:\[rank \d+\] )?(?:[\w.]+\.)?(\w*(?:Error|Exception|Interrupt))\b:?.*$"
)
_RANK_PREFIX = re.compile(r"^(?:\d+: |\[rank\d+\]: )")  # srun --label's, torch's own


@dataclass(frozen=True)
class StepEnd:
    """How one step of the run ended."""

    exit_code: int
    why: Why
    started: float  # epoch seconds
    ended: float
    nodes: tuple[str, ...] = ()  # the nodes it ran on, where known
    lost: tuple[str, ...] = ()  # why == node: the nodes the screen found down or broken
    detail: str = ""  # what the screen said of them, or the script's error line
    progress: tuple[str, ...] = ()  # the $HVD_PROGRESS lines the step wrote
    progress_at: float = 0.0  # when it wrote the last of them (0: none)
    last_lines: tuple[str, ...] = field(default=(), compare=False)

    @property
    def resumable_from(self) -> str | None:
        """The last checkpoint the step wrote, as it said it ($HVD_PROGRESS)."""
        return self.progress[-1] if self.progress else None

    def to_record(self) -> dict[str, object]:
        return {
            "exit_code": self.exit_code,
            "why": self.why,
            "started": self.started,
            "ended": self.ended,
            "nodes": list(self.nodes),
            "lost": list(self.lost),
            "detail": self.detail,
            "checkpoint": self.resumable_from,
            "progress_at": self.progress_at,
        }


@dataclass(frozen=True)
class Decision:
    restart: bool
    why: str


def error_line(lines: list[str] | tuple[str, ...]) -> str:
    """The last Python error line of the ranks' output ("ValueError: ..."), or the last line."""
    plain = [_RANK_PREFIX.sub("", line).rstrip() for line in lines]
    for line in reversed(plain):
        if _ERROR_LINE.match(line):
            return line.strip()
    return next((line.strip() for line in reversed(plain) if line.strip()), "")


def for_good(lines: list[str] | tuple[str, ...]) -> str | None:
    """The error line that says a restart cannot help, or None."""
    text = "\n".join(_RANK_PREFIX.sub("", line) for line in lines)
    found = _FOR_GOOD.search(text)
    if found is None:
        return None
    start = text.rfind("\n", 0, found.start()) + 1
    end = text.find("\n", found.end())
    return text[start : end if end != -1 else len(text)].strip()


def decide(ends: list[StepEnd], max_restarts: int) -> Decision:
    """Whether the run starts its step again after the last of `ends` (the run's steps so
    far, in order), and why, in words for the run's log."""
    last = ends[-1]
    restarts = len(ends) - 1
    if last.why == "done":
        return Decision(False, "the script exited 0")
    if last.why == "time":
        return Decision(False, "the time limit: the job goes on in its next segment")
    if last.why == "script":
        refused = _script_refusal(ends)
        if refused:
            return Decision(False, refused)
    if restarts >= max_restarts:
        return Decision(False, f"{restarts} restarts already (--max-restarts {max_restarts})")
    if last.why == "hang":
        return Decision(True, "it hung: the step starts again from the last checkpoint")
    if last.why == "node":
        return Decision(
            True, f"{', '.join(last.lost)} lost: the step starts again from the last checkpoint"
        )
    return Decision(True, f"{last.detail or 'exit ' + str(last.exit_code)}: it made progress, "
                          "so the step starts again from the last checkpoint")  # fmt: skip


def _script_refusal(ends: list[StepEnd]) -> str | None:
    last = ends[-1]
    quoted = last.detail or f"exit code {last.exit_code}"
    permanent = for_good(last.last_lines)
    if permanent:
        return f"not worth a retry: {permanent} comes again at every start"
    if not last.progress:
        return (
            f"not worth a retry: the script failed ({quoted}) before it wrote a checkpoint "
            f"(no line in ${PROGRESS})"
        )
    before = ends[-2] if len(ends) > 1 else None
    if before is not None and before.why == "script" and before.detail == last.detail:
        return f"not worth a retry: it failed the same way twice ({quoted})"
    return None


def step_lost(
    why: str, started: float, ended: float, progress_at: float, next_started: float
) -> float:
    """Seconds one restarted step cost: from its last checkpoint (its start where it wrote
    none; its end at the time limit, where the checkpoint is written last) to its end, and from
    its end to the next step's start."""
    since = ended if why == "time" else max(started, progress_at)
    return max(0.0, ended - since) + max(0.0, next_started - ended)


def lost_time(ends: list[StepEnd]) -> float:
    """Seconds the faults cost over the run's steps (step_lost of each but the last)."""
    return sum(
        step_lost(end.why, end.started, end.ended, end.progress_at, after.started)
        for end, after in zip(ends, ends[1:], strict=False)
    )
