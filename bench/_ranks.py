"""What a running rank really has, read from /proc while it runs: the shared objects it mapped
(each with its size and a digest of its first 64 KiB, the ELF headers with the build ID, read
through /proc/PID/root so that a container's own files are read), its thread count, the CPUs it
may run on, and the environment variables that steer MPI, threads and the frameworks. The launch
benchmark compares the container's rank with the host's, so that "like with like" is shown
rather than assumed."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

# variables that change what a rank does (the per-job PMIx ones differ by rank and job: left out)
STEERING = re.compile(
    r"(OMPI_|OMP_|MKL_|OPENBLAS_|GOMP_|KMP_|HOROVOD_|UCX_|FI_|NCCL_|GLOO_|TORCH_|LD_)"
)
HEAD = 64 * 1024


@dataclass
class RankView:
    """One rank as /proc showed it for the longest stretch of its run (the training): the shared
    objects it had mapped then. Open MPI opens components it does not select and closes them
    after MPI_Init, and closes the rest at MPI_Finalize: neither moment is the one that counts."""

    libraries: dict[str, str] = field(default_factory=dict)  # file name -> "size:digest"
    paths: dict[str, str] = field(default_factory=dict)  # file name -> path the rank sees
    seen: dict[str, str] = field(default_factory=dict)  # every fingerprint taken (a cache)
    _current: tuple[frozenset[str], int] = (frozenset(), 0)  # the set now, reads it has lasted
    _longest: int = 0
    threads: int = 0
    cpus: str = ""
    env: dict[str, str] = field(default_factory=dict)


def fingerprint(path: Path) -> str:
    """Size and the digest of the first 64 KiB (headers and build ID) of a mapped file."""
    with path.open("rb") as f:
        head = f.read(HEAD)
        size = os.fstat(f.fileno()).st_size
    return f"{size}:{hashlib.sha256(head).hexdigest()[:16]}"


def mapped_objects(maps_text: str) -> dict[str, str]:
    """File name -> path of every shared object in a /proc/PID/maps text."""
    found: dict[str, str] = {}
    for line in maps_text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/"):
            path = parts[5].removesuffix(" (deleted)")
            name = path.rsplit("/", 1)[1]
            if re.search(r"\.so(\.\d+)*$", name):  # not /etc/ld.so.cache
                found.setdefault(name, path)
    return found


def status_field(status_text: str, name: str) -> str:
    match = re.search(rf"^{name}:\s*(\S+)", status_text, re.M)
    return match.group(1) if match else ""


def steering_env(environ: bytes) -> dict[str, str]:
    pairs = (item.split("=", 1) for item in environ.decode(errors="replace").split("\0"))
    return {p[0]: p[1] for p in pairs if len(p) == 2 and STEERING.match(p[0])}


def keep_longest(view: RankView, objects: dict[str, str]) -> None:
    """One read's mapped objects (already fingerprinted in view.seen): the view keeps the set
    that lasted the most reads in a row."""
    names = frozenset(objects)
    lasted = view._current[1] + 1 if names == view._current[0] else 1
    view._current = (names, lasted)
    if lasted > view._longest:
        view._longest = lasted
        view.libraries = {name: view.seen[name] for name in objects}
        view.paths = dict(objects)


def read_view(pid: int, view: RankView) -> None:
    """Update `view` from /proc/PID, fingerprinting only the objects it has not seen yet."""
    proc = Path(f"/proc/{pid}")
    objects = mapped_objects((proc / "maps").read_text())
    status = (proc / "status").read_text()
    for name, path in objects.items():
        if name not in view.seen:
            try:
                view.seen[name] = fingerprint(proc / "root" / path.lstrip("/"))
            except OSError:
                view.seen[name] = "unreadable"
    keep_longest(view, objects)
    view.threads = max(view.threads, int(status_field(status, "Threads") or 0))
    view.cpus = status_field(status, "Cpus_allowed_list")
    view.env = steering_env((proc / "environ").read_bytes())


def is_rank(cmdline: bytes, script: str) -> bool:
    """A Python process running `script` (not srun, ch-run or hvd-container that name it)."""
    argv = cmdline.split(b"\0")
    program = argv[0].rsplit(b"/", 1)[-1]
    return program.startswith(b"python") and any(a.endswith(script.encode()) for a in argv[1:3])


class RankWatch:
    """Watches, while a `with` block runs, the first process on this machine that runs
    `script`: the local cluster's nodes are this machine's namespaces, so its ranks are here."""

    def __init__(self, script: str) -> None:
        self.script = script
        self.view = RankView()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._pid: int | None = None

    def __enter__(self) -> RankWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _find(self) -> int | None:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                try:
                    if is_rank((entry / "cmdline").read_bytes(), self.script):
                        return int(entry.name)
                except OSError:
                    continue
        return None

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._pid = self._pid or self._find()
            if self._pid is not None:
                # when it has ended, the view keeps what it last saw
                with contextlib.suppress(OSError, ValueError):
                    read_view(self._pid, self.view)
            time.sleep(0.5)


def mpi_components(view: RankView) -> list[str]:
    """The Open MPI transport components the rank loaded (pml, btl, mtl), e.g. 'pml ob1'."""
    found = (re.match(r"mca_(pml|btl|mtl)_(\w+)\.so$", name) for name in view.libraries)
    return sorted(f"{m.group(1)} {m.group(2)}" for m in found if m)


def compare(
    container: RankView, host: RankView, *, same_by: frozenset[str] = frozenset()
) -> list[str]:
    """Lines that say where the two ranks differ, or that they do not (empty views: says so).
    `same_by`: variables that one side sets to get what the other has by default (not
    differences: the caller says what they do)."""
    if not container.libraries or not host.libraries:
        return ["could not read a rank of each side from /proc: nothing compared"]
    lines = []
    shared = sorted(set(container.libraries) & set(host.libraries))
    only_c = sorted(set(container.libraries) - set(host.libraries))
    only_h = sorted(set(host.libraries) - set(container.libraries))
    differ = [n for n in shared if container.libraries[n] != host.libraries[n]]
    lines.append(
        f"shared objects: container {len(container.libraries)}, host {len(host.libraries)}; "
        f"{len(shared) - len(differ)} the same file (size and first 64 KiB), "
        f"{len(differ)} of the same name differ, {len(only_c)} only in the container, "
        f"{len(only_h)} only on the host"
    )
    for label, names in (("differ", differ), ("container only", only_c), ("host only", only_h)):
        if names:
            lines.append(f"  {label}: {', '.join(names)}")
    lines.append(
        f"Open MPI transport components in use: container "
        f"{', '.join(mpi_components(container)) or 'none'}; "
        f"host {', '.join(mpi_components(host)) or 'none'}"
    )
    lines.append(
        f"threads: container {container.threads}, host {host.threads}; CPUs allowed: "
        f"container {container.cpus}, host {host.cpus}"
    )
    keys = sorted((set(container.env) | set(host.env)) - same_by)
    env_diff = [k for k in keys if container.env.get(k) != host.env.get(k)]
    same = [f"{k}={container.env[k]}" for k in keys if k not in env_diff]
    lines.append(f"steering environment, the same: {' '.join(same) or 'none'}")
    for k in env_diff:
        lines.append(
            f"  differs: {k}: container {container.env.get(k)!r}, host {host.env.get(k)!r}"
        )
    return lines
