"""Job control over Slurm: submit, state, follow, cancel, list.

What the tool asks Slurm goes through one seam, `Slurm` (the real one, `SlurmCommands`, runs
sbatch/squeue/scontrol/sacct/scancel/sinfo as argv lists; the unit tests put a fake in its
place with `using`). A job's state
comes from `scontrol show job` (finished jobs stay there for MinJobAge) and, once slurmctld
has forgotten the job, from `sacct` where accounting is enabled.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from hvd_container.launcher.report import Reporter

from hvd_container.core.errors import StepFailed, Terminated, UserError, source_checkout_hint
from hvd_container.core.files import open_regular
from hvd_container.core.text import ascii_digits

TERMINAL_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "REVOKED",
        "SPECIAL_EXIT",
        "TIMEOUT",
    }
)
# `scontrol show job -o`: KEY=VALUE pairs separated by spaces; values may contain spaces.
_PAIR = re.compile(r"(?:^|\s)([A-Za-z][\w:/]*)=(.*?)(?=\s[A-Za-z][\w:/]*=|\s*$)")


@dataclass(frozen=True)
class Job:
    """What hvd-container shows about one job."""

    job_id: str
    name: str
    state: str  # Slurm's JobState, e.g. PENDING, RUNNING, COMPLETED
    exit_status: int | None  # the batch script's exit status (ExitCode X:Y -> X)
    signal: int | None  # the signal that ended it (ExitCode X:Y -> Y)
    reason: str = ""
    nodes: str = ""
    user: str = ""
    elapsed: str = ""
    stdout: str | None = None
    stderr: str | None = None
    workdir: str | None = None

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL_STATES

    # what follow() read in the log of the finished job (failure()), where it read it
    failed: Failure | None = None

    @property
    def exit_code(self) -> int:
        """The job's result as a process exit code: 0 only for COMPLETED; a failed task's own
        code where the log shows the others were only ended for it (failure())."""
        if self.failed is not None:
            return self.failed.exit_code
        return self.slurm_exit_code

    @property
    def slurm_exit_code(self) -> int:
        """The job's result as Slurm records it, as a process exit code."""
        if self.state == "COMPLETED":
            return 0
        if self.exit_status:
            return self.exit_status
        if self.signal:
            return 128 + self.signal
        return 130 if self.state == "CANCELLED" else 1


def slurm_seconds(value: str) -> int:
    """A Slurm time in seconds, read as sbatch reads it: MINUTES, MINUTES:SECONDS,
    HOURS:MINUTES:SECONDS, DAYS-HOURS[:MINUTES[:SECONDS]]."""
    days, _, rest = value.rpartition("-") if "-" in value else ("0", "", value)
    parts = [int(p) for p in rest.split(":")]
    if days != "0" or "-" in value:
        parts += [0] * (3 - len(parts))  # D-HH, D-HH:MM
        h, m, sec = parts
    elif len(parts) == 1:
        h, m, sec = 0, parts[0], 0
    elif len(parts) == 2:
        h, m, sec = 0, parts[0], parts[1]
    else:
        h, m, sec = parts
    return ((int(days or 0) * 24 + h) * 60 + m) * 60 + sec


_MEM_UNITS = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def slurm_megabytes(value: str) -> int:
    """A Slurm memory size in megabytes, read as sbatch reads it (str_to_mbytes): a number of
    megabytes, or one with K, M, G or T; kilobytes are rounded up."""
    number, unit = (value[:-1], value[-1].upper()) if value[-1:].isalpha() else (value, "")
    return -int(-int(number) * _MEM_UNITS[unit] // 1)


def _which(command: str = "sbatch") -> str:
    path = shutil.which(command)
    if path is None:
        raise UserError(
            f"{command} not found: run this on a Slurm login node "
            f"(to try it on one machine, a local cluster: {source_checkout_hint('slurm.sh up')})"
        )
    return path


def _child_setup(umask: int | None) -> Callable[[], None] | None:
    """What the child must do before exec: the umask."""
    if umask is None:
        return None

    def setup() -> None:
        os.umask(umask)

    return setup


def _run(
    argv: list[str], *, input_text: str | None = None, check: bool = True, umask: int | None = None
) -> str:
    _which(argv[0])
    proc = subprocess.run(
        argv,
        input=input_text,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        preexec_fn=_child_setup(umask),  # noqa: PLW1509
    )
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise StepFailed(f"{argv[0]} failed: {detail[-1] if detail else f'exit {proc.returncode}'}")
    return proc.stdout


def sbatch_argv(workdir: str | os.PathLike[str] | None = None) -> list[str]:
    """How a batch script is submitted: `sbatch --parsable [--chdir=DIR]`, the script on its
    standard input (what a dry run shows and `run` executes)."""
    return ["sbatch", "--parsable", *([f"--chdir={os.fspath(workdir)}"] if workdir else [])]


def _submit(script: str, argv: list[str], *, private: bool = False) -> str:
    """Submit a batch script (text) on the standard input of `argv` (sbatch_argv); return the
    job id.

    `private`: the job's output files are readable by the user only (Slurm applies the
    submitting process's umask), for output that carries secrets such as a Jupyter token.
    """
    out = _run(argv, input_text=script, umask=0o077 if private else None).strip()
    job_id = out.split(";", 1)[0]  # "ID" or "ID;CLUSTER"
    if not ascii_digits(job_id):
        raise StepFailed(f"sbatch printed {out!r}, not a job id")
    return job_id


# A job name may hold anything, " x=y" included, which would read as another key: scontrol
# prints it between JobId and UserId, so it is taken whole from there.
_JOB_NAME = re.compile(r"(?:^|\s)JobName=(.*?) UserId=")


def parse_scontrol(line: str) -> dict[str, str]:
    """One `scontrol show job -o` line -> {key: value}."""
    line = line.strip()
    named = _JOB_NAME.search(line)
    if named is None:
        return {m.group(1): m.group(2) for m in _PAIR.finditer(line)}
    rest = line[: named.start()] + line[named.end() - len(" UserId=") :]
    fields = {m.group(1): m.group(2) for m in _PAIR.finditer(rest)}
    fields["JobName"] = named.group(1)
    return fields


def _exit_pair(value: str) -> tuple[int | None, int | None]:
    status, _, sig = value.partition(":")
    try:
        return int(status), int(sig or 0)
    except ValueError:
        return None, None


def _none_if_null(value: str | None) -> str | None:
    return None if value in (None, "", "(null)") else value


def job_from_scontrol(fields: dict[str, str]) -> Job:
    status, sig = _exit_pair(fields.get("ExitCode", ""))
    user = fields.get("UserId", "").split("(", 1)[0]
    return Job(
        job_id=fields.get("JobId", ""),
        name=fields.get("JobName", ""),
        state=fields.get("JobState", "UNKNOWN"),
        exit_status=status,
        signal=sig,
        reason=fields.get("Reason", ""),
        nodes=_none_if_null(fields.get("NodeList")) or "",
        user=user,
        elapsed=fields.get("RunTime", ""),
        stdout=_none_if_null(fields.get("StdOut")),
        stderr=_none_if_null(fields.get("StdErr")),
        workdir=_none_if_null(fields.get("WorkDir")),
    )


def _job_from_sacct(job_id: str) -> Job | None:
    if shutil.which("sacct") is None:
        return None
    # the job name last: it may hold the | that separates the fields (-P)
    fields = "JobID,State,ExitCode,NodeList,User,Elapsed,WorkDir,JobName"
    proc = _text_of(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", fields])
    if proc.returncode != 0:
        return None
    for line in proc.stdout.splitlines():
        parts = line.split("|", 7)
        if len(parts) == 8 and parts[0] == job_id:
            status, sig = _exit_pair(parts[2])
            return Job(
                job_id=job_id,
                name=parts[7],
                state=parts[1].split()[0],  # "CANCELLED by 0" -> CANCELLED
                exit_status=status,
                signal=sig,
                nodes=parts[3],
                user=parts[4],
                elapsed=parts[5],
                workdir=parts[6] or None,
            )
    return None


def _text_of(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a Slurm query; its output read as UTF-8 whatever the locale (job names may be)."""
    return subprocess.run(argv, capture_output=True, text=True, encoding="utf-8", errors="replace")


def _job_info(job_id: str) -> Job | None:
    """The job's current record, or None when Slurm no longer knows it."""
    _which("scontrol")
    # scontrol, not squeue --json: it gives the output files with %x, %j... filled in
    proc = _text_of(["scontrol", "show", "job", "-o", job_id])
    if proc.returncode == 0 and proc.stdout.strip():
        return job_from_scontrol(parse_scontrol(proc.stdout.splitlines()[0]))
    return _job_from_sacct(job_id)


def _cancel(job_id: str) -> None:
    _run(["scancel", job_id])


def _list_jobs(user: str | None = None, *, finished: bool = True) -> list[Job]:
    """The user's jobs (default: the current user), including recently finished ones: from
    `squeue --json` where this Slurm has it, else from squeue's text with the name last."""
    _which("squeue")
    user = user or current_user()
    jobs = _jobs_from_json(user)
    if jobs is None:
        return _jobs_from_text(user, finished)
    return [j for j in jobs if finished or not j.finished]


def _number(value: object) -> int | None:
    """A number of squeue's JSON: plain (22.05) or {"set", "infinite", "number"} (23.02 on)."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def elapsed_text(seconds: int) -> str:
    """A duration as squeue's %M prints it: M:SS, H:MM:SS or D-HH:MM:SS."""
    days, rest = divmod(max(seconds, 0), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def job_from_json(record: dict[str, object], now: float) -> Job:
    """One job of `squeue --json` (22.05's shape and the newer one)."""
    state = record.get("job_state")
    if isinstance(state, list):  # 23.02 on: a list of flags, the base state first
        state = state[0] if state else "UNKNOWN"
    state = str(state or "UNKNOWN")
    pending = state == "PENDING"
    start, end = _number(record.get("start_time")), _number(record.get("end_time"))
    elapsed = "0:00"
    if start and not pending:
        stop = end if end and state in TERMINAL_STATES else now
        elapsed = elapsed_text(int(stop - start))
    return Job(
        job_id=str(_number(record.get("job_id")) or ""),
        name=str(record.get("name") or ""),
        state=state,
        exit_status=None,  # as squeue's text gives it: the listing shows no exit codes
        signal=None,
        reason=str(record.get("state_reason") or "") if pending else "",
        nodes="" if pending else str(record.get("nodes") or ""),
        user=str(record.get("user_name") or ""),
        elapsed=elapsed,
    )


def _jobs_from_json(user: str) -> list[Job] | None:
    """The user's jobs from `squeue --json`, or None where this squeue has no JSON. (Slurm
    22.05 ignores -u and -t with --json: the filtering is done here.)"""

    proc = _text_of(["squeue", "--json"])
    if proc.returncode != 0:
        return None
    try:
        data = json.loads(proc.stdout)
        records = data["jobs"]
        assert isinstance(records, list)
    except (ValueError, KeyError, TypeError, AssertionError):
        return None
    now = time.time()
    jobs = [job_from_json(r, now) for r in records if isinstance(r, dict)]
    return [j for j in jobs if j.user == user]


def _jobs_from_text(user: str, finished: bool) -> list[Job]:
    # the job name last: it may hold the | that separates the fields
    argv = ["squeue", "-h", "-u", user, "-o", "%i|%T|%M|%D|%R|%u|%j"]
    if finished:
        argv += ["-t", "all"]
    jobs = []
    for line in _run(argv).splitlines():
        parts = line.split("|", 6)
        if len(parts) < 7:
            continue
        job_id, state, elapsed, _count, where, owner, name = parts
        pending = state == "PENDING" or where.startswith("(")
        jobs.append(
            Job(
                job_id=job_id,
                name=name,
                state=state,
                exit_status=None,
                signal=None,
                reason=where.strip("()") if pending else "",
                nodes="" if pending else where,
                user=owner,
                elapsed=elapsed,
            )
        )
    return jobs


def current_user() -> str:

    return os.environ.get("USER") or pwd.getpwuid(os.getuid()).pw_name


def _absolute(name: str | None, job: Job) -> Path | None:
    if not name:
        return None
    path = Path(name)
    if not path.is_absolute() and job.workdir:
        path = Path(job.workdir) / path
    return path


def output_path(job: Job) -> Path | None:
    """The job's stdout file, made absolute against its working directory."""
    return _absolute(job.stdout, job)


# what an --until-done job's script says when it hands over to a job of its own
# (launcher/script/batch.py, segment_lines)
_NEXT_SEGMENT = re.compile(
    r"^hvd-container: segment \d+ ended (?:at the time limit|with nodes lost \([^)\n]*\)): "
    r"segment \d+ is job (\d+),",
    re.M,
)
_TAIL_BYTES = 1 << 16


def next_segment(job: Job) -> str | None:
    """The job an --until-done job handed over to, as its log's last lines say; None."""
    for path in reversed(log_paths(job)):
        try:
            with open(path, "rb") as fh:
                fh.seek(max(0, fh.seek(0, os.SEEK_END) - _TAIL_BYTES))
                text = fh.read().decode(errors="replace")
        except OSError:
            continue
        found = _NEXT_SEGMENT.findall(text)
        if found:
            return str(found[-1])
    return None


def log_paths(job: Job) -> list[Path]:
    """The job's stdout file, then its stderr file when that is another file."""
    paths = [_absolute(job.stdout, job), _absolute(job.stderr, job)]
    return list(dict.fromkeys(p for p in paths if p is not None))


def _unreadable(path: Path, exc: OSError) -> UserError:
    return UserError(f"cannot read the job's log {path}: {exc.strerror or exc}")


class _Tail:
    """Reads what was appended to a file since the last call (the file may appear later)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def read_new(self) -> str:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return ""
        except OSError as exc:
            raise _unreadable(self.path, exc) from None
        self.offset += len(data)
        return data.decode(errors="replace")


def _describe(job: Job) -> str:
    if job.state == "PENDING":
        reason = job.reason if job.reason not in ("", "None") else "waiting"
        return f"job {job.job_id} PENDING ({reason})"
    if job.state == "RUNNING":
        return f"job {job.job_id} RUNNING on {job.nodes}"
    if job.finished:
        detail = f"exit code {job.exit_status}" if job.exit_status is not None else ""
        if job.signal:
            detail += f", signal {job.signal}"
        if job.exit_code != job.slurm_exit_code:  # srun's 143 was its SIGTERM to the others
            detail = f"exit code {job.exit_code}"
        return f"job {job.job_id} {job.state}" + (f" ({detail})" if detail else "")
    return f"job {job.job_id} {job.state}"


def follow(
    job_id: str,
    reporter: Reporter,
    *,
    poll: float = 0.5,
    show_output: bool = True,
    on_poll: Callable[[Job, str], None] | None = None,
) -> Job:
    """Follow a job until it ends: state changes to `reporter.status`, its stdout and stderr
    files to `reporter.job_output` (both as stdout when Slurm writes them to one file);
    `on_poll` gets the record and the output that came since the last poll, each poll.

    Returns the final record. Raises StepFailed if Slurm forgets the job before it ends.
    """
    tails: dict[Path, tuple[_Tail, bool]] = {}
    last_state = None
    missing = 0

    def copy_new() -> str:
        came = []
        for tail, stderr in tails.values():
            text = tail.read_new()
            if text:
                reporter.job_output(text, stderr=stderr)
                came.append(text)
        return "".join(came)

    while True:
        job = job_info(job_id)
        if job is None:
            missing += 1
            if missing > 5:
                raise StepFailed(f"job {job_id}: Slurm no longer knows this job")
            time.sleep(poll)
            continue
        if job.finished:
            # slurmd may flush the last lines just after the state changes; the log read once,
            # for the line below and for run and jobs
            time.sleep(min(poll, 0.3))
            job = replace(job, failed=failure(job))
        if job.state != last_state:
            reporter.status(_describe(job))
            last_state = job.state
        if show_output:
            # the stdout file first: one file for both streams stays on stdout
            for path, stderr in (
                (_absolute(job.stdout, job), False),
                (_absolute(job.stderr, job), True),
            ):
                if path is not None and path not in tails:
                    tails[path] = (_Tail(path), stderr)
        came = copy_new() if show_output else ""
        if job.finished:
            return job
        if on_poll is not None:
            on_poll(job, came)
        time.sleep(poll)


# srun's line for each task that failed: "srun: error: node2: task 1: Exited with exit code 3",
# "srun: error: node1: tasks 0-3: Killed", "... task 5: Segmentation fault (core dumped)"
_TASK_FAILED = re.compile(r"^srun: error: ([^\s:]+): (tasks? [0-9,-]+): (.+)$", re.MULTILINE)


# srun's line when a node of the step stops answering: "srun: error: Node failure on node2"
_NODE_FAILED = re.compile(r"^srun: error: Node failure on ([^\s]+)$", re.MULTILINE)


def failed_nodes(text: str) -> list[str]:
    """The nodes srun said failed, in its order, once each."""
    return list(dict.fromkeys(m[1] for m in _NODE_FAILED.finditer(text)))


def _down_nodes(nodes: str) -> list[str]:
    """Which of `nodes` (a Slurm hostlist) Slurm now counts as down, failed or not answering;
    [] where sinfo cannot tell."""
    if not nodes or nodes in ("(null)", "None"):
        return []
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-N", "-n", nodes, "-t", "down,fail,no_respond", "-o", "%N"],
            capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    if proc.returncode != 0:
        return []
    return list(dict.fromkeys(line.strip() for line in proc.stdout.splitlines() if line.strip()))


def _hostnames(nodelist: str) -> list[str]:
    """The node names of a Slurm hostlist (node[1-3] -> node1 node2 node3); [] where scontrol
    cannot tell."""
    try:
        proc = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist],
            capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    return proc.stdout.split() if proc.returncode == 0 else []


# --- the seam: what the tool asks Slurm --------------------------------------------------


class Slurm(Protocol):
    """What the tool asks Slurm: where its commands are, submit, a job's record, cancel, the
    user's jobs, which nodes are down, a hostlist's names. `SlurmCommands` asks the real one;
    the unit tests put a fake in its place with `using` (tests/unit/_fake_slurm.py)."""

    def which(self, command: str = "sbatch") -> str: ...

    def submit(self, script: str, argv: list[str], *, private: bool = False) -> str: ...

    def job(self, job_id: str) -> Job | None: ...

    def cancel(self, job_id: str) -> None: ...

    def jobs(self, user: str | None, *, finished: bool) -> list[Job]: ...

    def down_nodes(self, nodes: str) -> list[str]: ...

    def hostnames(self, nodelist: str) -> list[str]: ...


class SlurmCommands:
    """The real Slurm: its commands on this machine (sbatch, scontrol, sacct, scancel, squeue,
    sinfo), run as argv lists."""

    def which(self, command: str = "sbatch") -> str:
        return _which(command)

    def submit(self, script: str, argv: list[str], *, private: bool = False) -> str:
        return _submit(script, argv, private=private)

    def job(self, job_id: str) -> Job | None:
        return _job_info(job_id)

    def cancel(self, job_id: str) -> None:
        _cancel(job_id)

    def jobs(self, user: str | None, *, finished: bool) -> list[Job]:
        return _list_jobs(user, finished=finished)

    def down_nodes(self, nodes: str) -> list[str]:
        return _down_nodes(nodes)

    def hostnames(self, nodelist: str) -> list[str]:
        return _hostnames(nodelist)


_IN_USE: list[Slurm] = [SlurmCommands()]


def current() -> Slurm:
    """The Slurm the tool asks now: the real one, unless `using` put another in its place."""
    return _IN_USE[-1]


@contextlib.contextmanager
def using(seam: Slurm) -> Iterator[Slurm]:
    """Ask `seam` instead of the real Slurm while the block runs (the unit tests' fake)."""
    _IN_USE.append(seam)
    try:
        yield seam
    finally:
        _IN_USE.remove(seam)


def require_slurm(command: str = "sbatch") -> str:
    """The path of a Slurm command; UserError where it is not on this machine."""
    return current().which(command)


def submit(script: str, argv: list[str], *, private: bool = False) -> str:
    """Submit a batch script (text) on the standard input of `argv` (sbatch_argv); the job id.
    `private`: the job's output files are the user's alone (secrets such as a Jupyter token)."""
    return current().submit(script, argv, private=private)


def job_info(job_id: str) -> Job | None:
    """The job's current record, or None when Slurm no longer knows it."""
    return current().job(job_id)


def cancel(job_id: str) -> None:
    current().cancel(job_id)


def list_jobs(user: str | None = None, *, finished: bool = True) -> list[Job]:
    """The user's jobs (default: the current user), recently finished ones too unless not."""
    return current().jobs(user, finished=finished)


def down_nodes(nodes: str) -> list[str]:
    """Which of `nodes` (a hostlist) Slurm counts as down, failed or not answering."""
    return current().down_nodes(nodes)


def hostnames(nodelist: str) -> list[str]:
    """The node names of a Slurm hostlist; [] where Slurm cannot tell."""
    return current().hostnames(nodelist)


def failed_tasks(text: str) -> list[str]:
    """What srun said of each failed task in a job's stderr: "task 1 on node2: Exited with
    exit code 3", in its order, once each."""
    found = (f"{m[2]} on {m[1]}: {m[3].strip()}" for m in _TASK_FAILED.finditer(text))
    return list(dict.fromkeys(found))


# srun's lines on failed tasks come last: a training log of gigabytes is not read again
FAILURE_TAIL = 64 * 1024


def _last_bytes(path: Path, count: int) -> str:
    fh, size = open_regular(path, "a job log")  # a pipe in its place is not waited on
    with fh:
        fh.seek(max(0, size - count))
        return fh.read().decode(errors="replace")


@dataclass(frozen=True)
class Failure:
    """What `run` says of a finished job: the one line naming what failed (None where nothing
    failed, or the log and Slurm name nothing), and the exit code it returns."""

    summary: str | None
    exit_code: int


# a failed task's own exit code, from srun's words for it
_TASK_CODE = {"Killed": 128 + signal.SIGKILL, "Segmentation fault": 128 + signal.SIGSEGV}


def _task_code(said: str) -> int | None:
    """The exit code behind srun's "task 1 on node2: Exited with exit code 3" (or Killed, ...)."""
    words = said.split(": ", 1)[-1]
    found = re.fullmatch(r"Exited with exit code (\d+)", words)
    if found:
        return int(found[1])
    return next((code for w, code in _TASK_CODE.items() if words.startswith(w)), None)


def failure(job: Job) -> Failure:
    """The nodes that went down (NODE_FAIL), then the failed tasks and their nodes (from
    srun's lines in the job's stderr). The exit code is the job's, except where
    --kill-on-bad-exit's SIGTERM to the other tasks (143) is all srun returned: then it is the
    first failed task's own (rank 0's `exit 3` gives 3, whichever task srun saw end last)."""
    if job.slurm_exit_code == 0:
        return Failure(None, 0)
    nodes: list[str] = []
    tasks: list[str] = []
    for path in log_paths(job):
        with contextlib.suppress(OSError, UserError):
            text = _last_bytes(path, FAILURE_TAIL)
            nodes += failed_nodes(text)
            tasks += failed_tasks(text)
    if job.state == "NODE_FAIL" and not nodes:
        # the batch host itself went down: nobody was left to write srun's line
        nodes = down_nodes(job.nodes)
    parts = [f"node {n} went down" for n in dict.fromkeys(nodes)]
    causes = [t for t in tasks if not t.endswith(": Terminated")]
    code = job.slurm_exit_code
    if nodes:
        tasks = causes  # the tasks the node failure took with it say nothing more
    elif code == 128 + signal.SIGTERM and causes and len(causes) < len(tasks):
        code = _task_code(causes[0]) or code
    parts += list(dict.fromkeys(tasks))
    if not parts:
        return Failure(None, code)
    more = f" (and {len(parts) - 3} more)" if len(parts) > 3 else ""
    return Failure(f"job {job.job_id} {job.state}: " + "; ".join(parts[:3]) + more, code)


def print_log(job_id: str, reporter: Reporter) -> Job:
    """The job's output as it is now, to `reporter.job_output`: its stdout file, then its
    stderr file (both as stdout: a snapshot reads as one text)."""
    job = job_info(job_id)
    if job is None:
        raise UserError(
            f"job {job_id}: Slurm does not know this job (allowed: ids from `hvd-container jobs`)"
        )
    paths = log_paths(job)
    if not paths:
        raise UserError(f"job {job_id}: Slurm reports no output file for it")
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except FileNotFoundError:
            continue  # not written yet (pending job) or on a node-local disk
        except OSError as exc:
            raise _unreadable(path, exc) from None
        reporter.job_output(text, stderr=False)
    return job


@contextlib.contextmanager
def cancel_on_interrupt(job_id: str, reporter: Reporter, *, ask: bool = True) -> Iterator[None]:
    """On Ctrl-C while following: offer scancel where the reporter can ask (and `ask`), else
    cancel the job."""
    try:
        yield
    except KeyboardInterrupt as exc:
        # SIGTERM (a batch system or a session ending) has nobody to answer a question
        asking = ask and not isinstance(exc, Terminated)
        answer = reporter.confirm(f"cancel job {job_id} with scancel?") if asking else None
        if answer is False:
            reporter.status(
                f"job {job_id} keeps running; follow it with `hvd-container logs -f {job_id}`"
            )
        else:
            cancel(job_id)
            reporter.status(f"job {job_id} cancelled")
        raise


@contextlib.contextmanager
def _interrupts_held() -> Iterator[Callable[[], None]]:
    """Hold Ctrl-C (SIGINT) back here; the yielded function lets it through (also on exit).

    A Ctrl-C that lands between sbatch printing the job id and the caller guarding that job
    is not lost: it arrives on release, inside the guard, which cancels the job. Held by a
    handler that notes it, not by blocking the signal: a process with more than one thread
    may take a signal on any thread that does not block it, and Python runs its handlers
    on the main thread whichever took it. (sbatch takes Ctrl-C as ever: a caught signal is
    the default again in a child after exec.)
    """
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None  # only the main thread may set handlers: nothing is held
        return
    came: list[int] = []
    old = signal.signal(signal.SIGINT, lambda signum, _frame: came.append(signum))
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            signal.signal(signal.SIGINT, old)
            if came:
                signal.raise_signal(signal.SIGINT)  # the held one, to the handler it was for

    try:
        yield release
    finally:
        release()


@contextlib.contextmanager
def submitted(
    script: str,
    argv: list[str],
    reporter: Reporter,
    *,
    private: bool = False,
    ask: bool = True,
) -> Iterator[str]:
    """Submit a batch script with `argv` (sbatch_argv); a Ctrl-C from sbatch's start to the
    end of the block cancels the job (`ask`: offer it first, as cancel_on_interrupt does).
    Yields the job id."""
    require_slurm("sbatch")
    with _interrupts_held() as release:
        job_id = submit(script, argv, private=private)
        with cancel_on_interrupt(job_id, reporter, ask=ask):
            release()  # a Ctrl-C held back during sbatch arrives here, inside the guard
            yield job_id
