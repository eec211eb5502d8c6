"""Noticing a job that makes no progress (`run --hang-after 10m [--cancel-on-hang]`).

Progress is output: a training prints its steps, and the launch sets PYTHONUNBUFFERED so that
each line leaves a rank when it is printed. When no line came for the given time while the
job runs, `run` says so, asks every Python process of the job for its stacks (the watcher of
launcher/programs/stack_watch.py, which the launch puts on the ranks' PYTHONPATH: it answers a
file touched in the working directory's .hvd-container/stacks/, no signal), shows what came
back, and with --cancel-on-hang ends the job and exits with HANG_EXIT.
"""

from __future__ import annotations

import os
import pwd
import re
import time
from collections.abc import Callable
from pathlib import Path

from hvd_container.launcher import runtimes, slurm
from hvd_container.launcher.report import Reporter
from hvd_container.launcher.runtimes import TOOL_FOLDER, tool_folder
from hvd_container.launcher.slurm import Job

from hvd_container.core.atomic import write_text
from hvd_container.core.errors import UserError
from hvd_container.core.files import private_folder, private_folder_refusal
from hvd_container.core.programs import program_text

WATCHER = program_text("hvd_container.launcher", "stack_watch.py")
STACKS_FOLDER = "stacks"  # in the working directory's .hvd-container
HEADER = "hvd-container stacks: "  # the first line of each process's stacks
GRACE = 20.0  # seconds the processes have to answer (they look once a second; the log lags)
HANG_EXIT = 124  # `run`'s exit code when it ended a hung job (timeout(1)'s)

_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_UNITS = (3600, 60, 1)


def parse_duration(text: str, flag: str = "--hang-after") -> int:
    """Seconds of `10m`, `90s`, `1h30m`: a unit is required (Slurm reads a bare 10 as
    minutes, sleep(1) as seconds)."""
    match = _DURATION.fullmatch(text.strip()) if text.isascii() else None
    if not text.strip() or match is None or not any(match.groups()):
        raise UserError(f"{flag}: {text!r} is not a duration (allowed: 90s, 10m, 1h, 1h30m)")
    seconds = sum(int(v) * unit for v, unit in zip(match.groups(), _UNITS, strict=True) if v)
    if seconds < 1:
        raise UserError(f"{flag}: {text!r} must be at least 1s")
    return seconds


def duration_text(seconds: float) -> str:
    whole = int(seconds)
    minutes, secs = divmod(whole, 60)
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def watcher_files(folder: Path) -> dict[str, str]:
    """The files a watched launch writes before its step: the watcher as sitecustomize."""
    return {str(folder / "sitecustomize.py"): WATCHER}


def watcher_env(folder: Path, env: dict[str, str], exported: str | None = None) -> dict[str, str]:
    """The variables that load the watcher in every Python process of the step, added to the
    launch's `env`: a PYTHONPATH given with -e, else the one `exported` in the user's shell
    (which the runtime hands the ranks when the launch sets none), stays after the watcher's
    folder."""
    given = env.get("PYTHONPATH") or exported
    added = {
        "HVD_CONTAINER_STACKS": str(folder),
        "PYTHONPATH": f"{folder}:{given}" if given else str(folder),
    }
    if "PYTHONUNBUFFERED" not in env:
        added["PYTHONUNBUFFERED"] = "1"  # each line leaves the rank when printed: progress
    return added


def ask_for_stacks(folder: Path, job_id: str | None) -> None:
    """Touch the file the job's watchers look at: `ask-<job id>`, or `ask` (which every
    watcher in the folder also looks at) when the job is not known here (salloc)."""
    why = private_folder_refusal(folder)
    if why is not None:
        raise UserError(
            f"--hang-after: {why}: the stacks are asked for through a folder of yours only "
            f"(remove {folder.parent} and launch again with --hang-after)"
        )
    path = folder / (f"ask-{job_id}" if job_id else "ask")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise UserError(f"{path}: cannot ask for the stacks: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w") as fh:
        fh.write(f"{time.time()}\n")


def watch_folder() -> Path:
    """Where the watcher is written: the working directory's .hvd-container/stacks."""
    return Path(runtimes.working_directory()) / TOOL_FOLDER / STACKS_FOLDER


def write_watcher() -> dict[str, str]:
    """Write the watcher (the tool folder made private as for every file there); its files."""
    purpose = "the stack watcher of --hang-after"
    folder = private_folder(tool_folder(purpose), STACKS_FOLDER, purpose)
    files = watcher_files(folder)
    try:
        for path, text in files.items():
            write_text(Path(path), text, mode=0o600)
    except OSError as exc:
        raise UserError(
            f"{folder}: cannot write the stack watcher: {exc.strerror or exc}"
        ) from None
    return files


class HangWatch:
    """Follows a job's output and acts when it stops: `seen` is called after every poll with
    the output that came since the last one."""

    def __init__(
        self,
        after: float,
        *,
        cancel: bool,
        folder: Path,
        reporter: Reporter,
        end: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
        grace: float | None = None,
        ending: str = "--cancel-on-hang",
    ) -> None:
        self.after, self.cancel, self.folder = after, cancel, folder
        self.ending = ending  # why the watch ends the job, in the line that says so
        self.reporter, self.end, self.clock = reporter, end, clock
        self.grace = GRACE if grace is None else grace
        self.last = clock()
        self.asked_at: float | None = None
        self.stacks = 0
        self.cancelled = False

    def seen(self, text: str, *, running: bool, job_id: str | None) -> None:
        now = self.clock()
        if text:
            self.last = now
            if self.asked_at is not None:
                self.stacks += text.count(HEADER)
        if not running:
            self.last = now  # time in the queue is not silence
            return
        if self.cancelled:
            return
        if self.asked_at is None:
            if now - self.last >= self.after:
                self._ask(job_id, now)
        elif now - self.asked_at >= self.grace:
            self._answered(job_id)

    @classmethod
    def for_launch(
        cls,
        after: int,
        cancel: bool,
        reporter: Reporter,
        end: Callable[[], None],
        ending: str = "--cancel-on-hang",
    ) -> HangWatch:
        """The watch of a launch made here: its watcher lies in this working directory."""
        return cls(
            after, cancel=cancel, folder=watch_folder(), reporter=reporter, end=end, ending=ending
        )

    def on_poll(self, job: Job, text: str) -> None:
        """slurm.follow's hook: a batch job's output, each poll."""
        self.seen(text, running=job.state == "RUNNING", job_id=job.job_id)

    def _ask(self, job_id: str | None, now: float) -> None:
        self.asked_at, self.stacks = now, 0
        who = f"job {job_id}" if job_id else "the step"
        self.reporter.status(
            f"{who}: no output for {duration_text(now - self.last)} (--hang-after "
            f"{duration_text(self.after)}): its ranks look stuck; asking each Python process "
            "of it for its stacks (faulthandler, through the watcher the launch loaded)"
        )
        if not (self.folder / "sitecustomize.py").is_file():
            self.reporter.warn(
                [f"no stack watcher in {self.folder}: the job was not started with --hang-after"]
            )
            return
        try:
            ask_for_stacks(self.folder, job_id)
        except OSError as exc:
            self.reporter.warn([f"cannot ask for the stacks: {self.folder}: {exc.strerror}"])

    def _answered(self, job_id: str | None) -> None:
        if self.stacks:
            self.reporter.status(f"{self.stacks} Python processes wrote their stacks (above)")
        else:
            self.reporter.warn(
                [
                    f"no stacks came back within {duration_text(self.grace)}: the stuck "
                    "processes may not be Python, the image may set its own PYTHONPATH (which "
                    f"hides the watcher in {self.folder}), or the job's output may not reach "
                    "this log; py-spy dump --pid PID on the node shows a Python stack"
                ]
            )
        who = f"job {job_id}" if job_id else "the step"
        if self.cancel:
            self.reporter.status(f"ending {who} ({self.ending})")
            self.cancelled = True
            self.end()
            return
        self.reporter.status(
            f"{who} goes on (end it with --cancel-on-hang next time"
            + (f", or now with `scancel {job_id}`)" if job_id else ", or now with Ctrl-C)")
        )
        self.asked_at = None
        self.last = self.clock()


def job_id_here() -> str | None:
    """The allocation's job id, inside one (the step of `run` there)."""
    value = os.environ.get("SLURM_JOB_ID", "")
    return value if value.isdigit() else None


def follow_job(
    job_id: str, reporter: Reporter, *, after: int | None, cancel: bool, poll: float = 0.5
) -> int:
    """`logs -f`: follow a submitted job to its end (Ctrl-C offers scancel); with `after`, as
    `run --hang-after` watches its own job. The job's exit code, or HANG_EXIT."""
    job = slurm.job_info(job_id)
    if job is None:
        raise UserError(
            f"job {job_id}: Slurm does not know this job (allowed: ids from `hvd-container jobs`)"
        )
    watch = None
    if after is not None:
        me = pwd.getpwuid(os.getuid()).pw_name
        if job.user and job.user != me:
            raise UserError(
                f"job {job_id} belongs to {job.user}: --hang-after asks only your own jobs for "
                "their stacks (follow it without --hang-after)"
            )
        folder = Path(job.workdir or runtimes.working_directory()) / TOOL_FOLDER / STACKS_FOLDER
        watch = HangWatch(
            after, cancel=cancel, folder=folder, reporter=reporter,
            end=lambda: slurm.cancel(job_id),
        )  # fmt: skip
    with slurm.cancel_on_interrupt(job_id, reporter):
        job = slurm.follow(job_id, reporter, poll=poll, on_poll=watch.on_poll if watch else None)
    return HANG_EXIT if watch is not None and watch.cancelled else job.exit_code
