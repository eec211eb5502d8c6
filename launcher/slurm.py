"""Job control over the real Slurm commands: submit, state, follow, cancel, list.

Everything goes through sbatch/squeue/scontrol/sacct/scancel as argv lists. A job's state
comes from `scontrol show job` (finished jobs stay there for MinJobAge) and, once slurmctld
has forgotten the job, from `sacct` where accounting is enabled.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from hvd_container.core.errors import StepFailed, UserError, warn

if TYPE_CHECKING:
    from hvd_container.launcher.compose import LaunchRequest
    from hvd_container.launcher.sites import Site

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

    @property
    def exit_code(self) -> int:
        """The job's result as a process exit code: 0 only for COMPLETED."""
        if self.state == "COMPLETED":
            return 0
        if self.exit_status:
            return self.exit_status
        if self.signal:
            return 128 + self.signal
        return 130 if self.state == "CANCELLED" else 1


def require_slurm(command: str = "sbatch") -> str:
    path = shutil.which(command)
    if path is None:
        raise UserError(
            f"{command} not found: run this on a Slurm login node "
            "(on this machine: `testbed/slurm.sh up` starts a local cluster)"
        )
    return path


def _sigint_blocked() -> bool:
    if not hasattr(signal, "pthread_sigmask"):
        return False
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])


def _child_setup(umask: int | None) -> Callable[[], None] | None:
    """What the child must do before exec: the umask, and take Ctrl-C again if we hold it
    back (a blocked signal stays blocked across exec, and sbatch must stay interruptible)."""
    unblock = _sigint_blocked()
    if umask is None and not unblock:
        return None

    def setup() -> None:
        if umask is not None:
            os.umask(umask)
        if unblock:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    return setup


def _run(
    argv: list[str], *, input_text: str | None = None, check: bool = True, umask: int | None = None
) -> str:
    require_slurm(argv[0])
    proc = subprocess.run(
        argv,
        input=input_text,
        capture_output=True,
        text=True,
        preexec_fn=_child_setup(umask),  # noqa: PLW1509
    )
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise StepFailed(f"{argv[0]} failed: {detail[-1] if detail else f'exit {proc.returncode}'}")
    return proc.stdout


def submit(
    script: str, *, workdir: str | os.PathLike[str] | None = None, private: bool = False
) -> str:
    """Submit a batch script (text) with `sbatch --parsable`; return the job id.

    `private`: the job's output files are readable by the user only (Slurm applies the
    submitting process's umask), for output that carries secrets such as a Jupyter token.
    """
    argv = ["sbatch", "--parsable"]
    if workdir is not None:
        argv.append(f"--chdir={os.fspath(workdir)}")
    out = _run(argv, input_text=script, umask=0o077 if private else None).strip()
    job_id = out.split(";", 1)[0]  # "ID" or "ID;CLUSTER"
    if not job_id.isdigit():
        raise StepFailed(f"sbatch printed {out!r}, not a job id")
    return job_id


def parse_scontrol(line: str) -> dict[str, str]:
    """One `scontrol show job -o` line -> {key: value}."""
    return {m.group(1): m.group(2) for m in _PAIR.finditer(line.strip())}


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
    proc = subprocess.run(
        [
            "sacct",
            "-X",
            "-n",
            "-P",
            "-j",
            job_id,
            "-o",
            "JobID,JobName,State,ExitCode,NodeList,User,Elapsed,WorkDir",
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return None
    for line in proc.stdout.splitlines():
        parts = line.split("|")
        if len(parts) >= 8 and parts[0] == job_id:
            status, sig = _exit_pair(parts[3])
            return Job(
                job_id=job_id,
                name=parts[1],
                state=parts[2].split()[0],  # "CANCELLED by 0" -> CANCELLED
                exit_status=status,
                signal=sig,
                nodes=parts[4],
                user=parts[5],
                elapsed=parts[6],
                workdir=parts[7] or None,
            )
    return None


def job_info(job_id: str) -> Job | None:
    """The job's current record, or None when Slurm no longer knows it."""
    require_slurm("scontrol")
    proc = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True)
    if proc.returncode == 0 and proc.stdout.strip():
        return job_from_scontrol(parse_scontrol(proc.stdout.splitlines()[0]))
    return _job_from_sacct(job_id)


def cancel(job_id: str) -> None:
    _run(["scancel", job_id])


def list_jobs(user: str | None = None, *, finished: bool = True) -> list[Job]:
    """The user's jobs (default: the current user), including recently finished ones."""
    require_slurm("squeue")
    user = user or current_user()
    argv = ["squeue", "-h", "-u", user, "-o", "%i|%j|%T|%M|%D|%R|%u"]
    if finished:
        argv += ["-t", "all"]
    jobs = []
    for line in _run(argv).splitlines():
        parts = line.split("|")
        if len(parts) < 7:
            continue
        job_id, name, state, elapsed, _count, where, owner = parts[:7]
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
    import pwd

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
        return f"job {job.job_id} {job.state}" + (f" ({detail})" if detail else "")
    return f"job {job.job_id} {job.state}"


def follow(
    job_id: str,
    *,
    out: TextIO | None = None,
    err: TextIO | None = None,
    status: Callable[[str], None] | None = None,
    poll: float = 0.5,
    show_output: bool = True,
) -> Job:
    """Follow a job until it ends: state changes to `status`, its stdout file to `out`, its
    stderr file to `err` (both to `out` when Slurm writes them to one file).

    Returns the final record. Raises StepFailed if Slurm forgets the job before it ends.
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    status = status or (lambda line: print(line, file=sys.stderr, flush=True))
    tails: dict[Path, tuple[_Tail, TextIO]] = {}
    last_state = None
    missing = 0

    def copy_new() -> None:
        for tail, stream in tails.values():
            text = tail.read_new()
            if text:
                stream.write(text)
                stream.flush()

    while True:
        job = job_info(job_id)
        if job is None:
            missing += 1
            if missing > 5:
                raise StepFailed(f"job {job_id}: Slurm no longer knows this job")
            time.sleep(poll)
            continue
        if job.state != last_state:
            status(_describe(job))
            last_state = job.state
        if show_output:
            # the stdout file first: one file for both streams stays on stdout
            for path, stream in (
                (_absolute(job.stdout, job), out),
                (_absolute(job.stderr, job), err),
            ):
                if path is not None and path not in tails:
                    tails[path] = (_Tail(path), stream)
            copy_new()
        if job.finished:
            # slurmd may flush the last lines just after the state changes
            time.sleep(min(poll, 0.3))
            copy_new()
            return job
        time.sleep(poll)


def print_log(job_id: str, *, out: TextIO | None = None) -> Job:
    """Print the job's output as it is now: its stdout file, then its stderr file."""
    job = job_info(job_id)
    if job is None:
        raise UserError(
            f"job {job_id}: Slurm does not know this job (allowed: ids from `hvd-container jobs`)"
        )
    paths = log_paths(job)
    if not paths:
        raise UserError(f"job {job_id}: Slurm reports no output file for it")
    out = out if out is not None else sys.stdout
    for path in paths:
        try:
            text = path.read_text(errors="replace")
        except FileNotFoundError:
            continue  # not written yet (pending job) or on a node-local disk
        except OSError as exc:
            raise _unreadable(path, exc) from None
        out.write(text)
    out.flush()
    return job


@contextlib.contextmanager
def cancel_on_interrupt(job_id: str, *, ask: bool | None = None) -> Iterator[None]:
    """On Ctrl-C while following: offer scancel on a terminal, do it otherwise."""
    try:
        yield
    except KeyboardInterrupt:
        interactive = sys.stdin.isatty() if ask is None else ask
        cancel_it = True
        if interactive:
            try:
                answer = input(f"\ncancel job {job_id} with scancel? [Y/n] ").strip().lower()
                cancel_it = answer in ("", "y", "yes")
            except (KeyboardInterrupt, EOFError):
                cancel_it = True
        if cancel_it:
            cancel(job_id)
            print(f"job {job_id} cancelled", file=sys.stderr)
        else:
            print(
                f"job {job_id} keeps running; follow it with `hvd-container logs -f {job_id}`",
                file=sys.stderr,
            )
        raise


@contextlib.contextmanager
def _interrupts_held() -> Iterator[Callable[[], None]]:
    """Hold Ctrl-C (SIGINT) back here; the yielded function lets it through (also on exit).

    A Ctrl-C that lands between sbatch printing the job id and the caller guarding that job
    is not lost: it arrives on release, inside the guard, which cancels the job. (sbatch
    itself still takes Ctrl-C: `_run` unblocks it in the child.)
    """
    usable = (
        hasattr(signal, "pthread_sigmask") and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield lambda: None
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    try:
        yield release
    finally:
        release()


# ---------------------------------------------------------------------------------------------
# Running a launch for real


def _run_foreground(argv: list[str], env: dict[str, str]) -> int:
    """Run srun/salloc with its output streaming through; Ctrl-C ends the step."""
    proc = subprocess.Popen(argv, env={**os.environ, **env})
    try:
        return proc.wait()
    except KeyboardInterrupt:
        # srun ends the step on SIGTERM (a lone SIGINT only prints the tasks' state)
        proc.terminate()
        with contextlib.suppress(KeyboardInterrupt):
            proc.wait(timeout=30)
        raise


def salloc_argv(site: Site, request: LaunchRequest) -> tuple[list[str], dict[str, str], list[str]]:
    """`salloc <the #SBATCH options> srun ...`: an interactive allocation running the step."""
    from hvd_container.launcher.batch import render_batch_plan
    from hvd_container.launcher.compose import plan_launch

    text, warnings = render_batch_plan(site, request)
    skip = ("--output=", "--error=", "--open-mode=", "--parsable")
    options = [
        line.split(None, 1)[1]
        for line in text.splitlines()
        if line.startswith("#SBATCH ") and not line.split(None, 1)[1].startswith(skip)
    ]
    plan = plan_launch(site, replace(request, inside_allocation=True))
    return ["salloc", *options, *plan.argv], plan.env, warnings


def submit_request(
    site: Site, request: LaunchRequest, *, private: bool = False
) -> tuple[str, list[str]]:
    """Submit a prepared launch as a batch job from the current directory; (job id, warnings)."""
    from hvd_container.launcher.batch import render_batch_plan
    from hvd_container.launcher.prepare import working_directory

    text, warnings = render_batch_plan(site, replace(request, inside_allocation=False))
    return submit(text, workdir=working_directory(), private=private), warnings


@contextlib.contextmanager
def submitted_job(
    site: Site, request: LaunchRequest, *, private: bool = False, ask: bool | None = None
) -> Iterator[tuple[str, list[str]]]:
    """Submit a prepared launch; a Ctrl-C from sbatch's start to the end of the block
    cancels the job (`ask`: offer it first, as cancel_on_interrupt does). Yields (job id,
    warnings)."""
    require_slurm("sbatch")
    with _interrupts_held() as release:
        job_id, warnings = submit_request(site, request, private=private)
        with cancel_on_interrupt(job_id, ask=ask):
            release()  # a Ctrl-C held back during sbatch arrives here, inside the guard
            yield job_id, warnings


def submit_launch(site: Site, request: LaunchRequest, *, private: bool = False) -> str:
    """Preflight, prepare and submit a launch as a batch job; print warnings; the job id."""
    from hvd_container.launcher.prepare import prepare_launch

    prepared = prepare_launch(site, request, "launch")
    with submitted_job(prepared.site, prepared.request, private=private) as (job_id, more):
        warn([*prepared.warnings, *more])
    return job_id


def execute(
    site: Site,
    request: LaunchRequest,
    *,
    detach: bool = False,
    salloc: bool = False,
    batch: bool = False,
    poll: float = 0.5,
) -> int:
    """Run a launch for real and return its exit code.

    Inside an allocation ($SLURM_JOB_ID set) the composed srun line runs here, its output
    streaming through. Outside one the launch is submitted as a batch job and followed to its
    end (`detach`: return once submitted), or with `salloc` run in an interactive allocation.
    `batch` submits even from inside an allocation (`hvd-container batch --submit`).
    """
    from hvd_container.launcher.compose import plan_launch
    from hvd_container.launcher.prepare import prepare_launch

    inside = bool(os.environ.get("SLURM_JOB_ID")) and not salloc and not batch
    if detach and salloc:
        raise UserError("--detach and --salloc exclude each other: --salloc runs interactively")
    if detach and inside:
        raise UserError(
            f"--detach: inside an allocation (job {os.environ['SLURM_JOB_ID']}) the step runs "
            "here and cannot detach; run from a login shell, or use `hvd-container batch --submit --detach`"
        )
    prepared = prepare_launch(site, request, "launch")
    site, request, warnings = prepared.site, prepared.request, prepared.warnings
    if inside:
        launch = plan_launch(site, replace(request, inside_allocation=True))
        warn([*warnings, *launch.warnings])
        require_slurm("srun")
        return _run_foreground(launch.argv, launch.env)
    if salloc:
        argv, env, more = salloc_argv(site, request)
        warn([*warnings, *more])
        require_slurm("salloc")
        return _run_foreground(argv, env)
    with submitted_job(site, request) as (job_id, more):
        warn([*warnings, *more])
        print(f"submitted batch job {job_id}", file=sys.stderr, flush=True)
        if detach:
            print(
                f"follow it with `hvd-container logs -f {job_id}`, cancel with `scancel {job_id}`",
                file=sys.stderr,
            )
            return 0
        job = follow(job_id, poll=poll)
    path = output_path(job)
    if path is not None:
        print(f"job {job_id} output: {path}", file=sys.stderr)
    return job.exit_code
