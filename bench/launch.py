"""Launch overhead of `hvd-container run` on the local 2-node Slurm cluster.

Prints, for the same 2-rank Horovod job (examples/pytorch_synthetic.py, one rank per node), and
for the same 2-rank torch.distributed DDP job (examples/ddp_synthetic.py, `--controller torch`):
  - the training step time in the container (`hvd-container run`, ch-run from the SIF)
    against the same script on the host, like with like: the host virtualenv is the image's
    /opt/venv copied onto the host (the same torch build and the BLAS inside it, the host's
    python being the same Debian build), the host run is composed by the same launcher with
    `--runtime none` (the same srun options), gets the image's environment, and both sides get
    the same thread settings (one torch thread per rank) and the same Open MPI settings (the
    host's Open MPI reads the image's openmpi-mca-params.conf). Each node's slurmd, and so its
    ranks, runs on a CPU of its own, as real nodes do. A first round, not counted, runs each
    side alone and shows that the two are alike: a rank of each side as /proc shows it (shared
    objects and their files, MPI transport, threads, CPUs allowed, steering variables).
    Then each counted round runs the two sides at once on the same nodes, taking turns of
    TURN_STEPS steps (the examples' HVD_EXAMPLE_TURNS): while one trains the other waits, so
    turn k of the container and turn k of the host meet the machine in the same state, a
    fraction of a second apart, where separate runs a minute apart met it slower or faster by a
    fifth. A round's ratio is the median of its turns' ratios (rank 0's median step time, and
    its CPU time per step, all threads); the figure is the median over the rounds, printed
    with the rounds and their spread; target: container/host <= 1.05;
  - the time from starting `hvd-container run` to the first rank's first output line, inside
    an allocation (srun directly) and outside one (sbatch, then following the job).

Needs the CPU image as a SIF (`make sif`). Usage:
    python bench/launch.py [--image out/demo/cpu-bookworm_1.sif] [--repeat 9] [--max-ratio 1.05]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from _cluster import (  # bench/: the script's folder, on sys.path
    ROOT,
    clean_env,
    default_image,
    hvd,
    image_or_exit,
    sh,
)
from _ranks import RankView, RankWatch, compare  # bench/, beside it

EXAMPLE = ROOT / "examples" / "pytorch_synthetic.py"
DDP_EXAMPLE = ROOT / "examples" / "ddp_synthetic.py"
CHECKPOINT = "checkpoint.pt"  # the example's default, in the run's directory
# a step of about 15 ms here (a few ms made the runs scatter by half their median)
TRAIN_ARGS = ["--epochs", "3", "--samples", "16384", "--features", "256", "--hidden", "2048"]
STEP = re.compile(
    r"^\[rank 0\] done: (\d+) steps, median step time ([0-9.]+) ms, "
    r"CPU time per step ([0-9.]+) ms",
    re.M,
)
MIN_STEPS = 20
TURN = re.compile(
    r"^\[rank 0\] turn (\d+): (\d+) steps, median step time ([0-9.]+) ms, "
    r"CPU time per step ([0-9.]+) ms",
    re.M,
)
TURN_STEPS = 16  # steps a turn: about 150 ms of training
TURNS_READY = 180.0  # seconds both sides may take to reach their first turn
# The same on both sides, and one thread per rank: the local nodes share this machine's CPUs,
# and two ranks of two spinning threads each on two cores made step times scatter by 2-3x
# between runs of the same side (the examples take OMP_NUM_THREADS when it is set).
THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def host_venv(image: Path) -> Path:
    """The image's /opt/venv copied to the host (cached next to the unpacked image)."""
    sys.path.insert(0, str(ROOT))
    from hvd_container.launcher.runtimes.charliecloud import cache_dir, prepare_image

    prepared = prepare_image(str(image))
    assert prepared is not None  # a SIF
    venv = cache_dir() / f"{prepared.root.name}.host-venv"
    if not venv.is_dir():
        partial = venv.with_name(venv.name + ".part")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(prepared.root / "opt" / "venv", partial, symlinks=True)
        os.replace(partial, venv)
    # Horovod's MPI ops link against Debian's Open MPI, as in the image
    apt_install("libopenmpi3")
    return venv


def apt_install(*packages: str) -> None:
    """Install Debian packages through the testbed's helper (apt-get update first on a fresh
    machine, waits on the dpkg lock, installs only what is missing)."""
    lib = ROOT / "testbed" / "_lib.sh"
    sh("sh", "-c", '. "$1"; shift; tb_apt_install "$@"', "apt_install", str(lib), *packages)


def step_ms(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Rank 0's median step time and its CPU time per step in one run (ms)."""
    (cwd / CHECKPOINT).unlink(missing_ok=True)  # the example would resume from it, not train
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    match = STEP.search(done.stdout)
    if done.returncode != 0 or not match:
        sys.exit(f"launch failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    if int(match.group(1)) < MIN_STEPS:
        sys.exit(f"only {match.group(1)} steps in a run: at least {MIN_STEPS} are needed")
    return float(match.group(2)), float(match.group(3))


Turns = list[tuple[float, float]]  # a side's turns: (median step time, CPU time per step), ms


def in_turns(sides: list[tuple[list[str], dict[str, str]]], first: int, cwd: Path) -> list[Turns]:
    """Run the two sides (argv up to the script's arguments, environment) at once on the same
    nodes, taking turns, side `first` beginning; each side's turns, the first (a warm-up: the
    allocator's first blocks, DDP's buckets) left out."""
    turns = cwd / "turns"
    for old in cwd.glob("turns*"):
        old.unlink()
    procs = []
    for k, (argv, env) in enumerate(sides):
        spec = f"HVD_EXAMPLE_TURNS={turns.name},{(k - first) % 2},{TURN_STEPS}"
        full = [*argv[:-1], "-e", spec, argv[-1], *TRAIN_ARGS, "--checkpoint", f"side{k}.pt"]
        (cwd / f"side{k}.pt").unlink(missing_ok=True)  # the example would resume from it
        procs.append(subprocess.Popen(
            full, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ))  # fmt: skip
    deadline = time.monotonic() + TURNS_READY
    while len(list(cwd.glob(f"{turns.name}.ready-*"))) < 2 * len(sides):
        if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
            for p in procs:
                p.kill()
            said = "\n".join(p.communicate()[0] for p in procs)
            sys.exit(f"the sides did not both reach their first turn:\n{said}")
        time.sleep(0.05)
    (cwd / "turns.tmp").write_text("0")
    os.replace(cwd / "turns.tmp", turns)
    found: list[Turns] = []
    for p in procs:
        out, _ = p.communicate(timeout=900)
        rows = [(float(m[2]), float(m[3])) for m in TURN.findall(out) if int(m[0]) > 0]
        if p.returncode != 0 or len(rows) < 2:
            sys.exit(f"launch failed ({p.returncode}):\n{out}")
        found.append(rows)
    if len(found[0]) != len(found[1]):
        sys.exit(f"the sides trained {len(found[0])} and {len(found[1])} turns: the same was meant")
    return found


def image_root(image: Path) -> Path:
    """The image's unpacked root, as ch-run runs it."""
    from hvd_container.launcher.runtimes.charliecloud import prepare_image

    prepared = prepare_image(str(image))
    assert prepared is not None  # a SIF
    return prepared.root


def image_env(image: Path) -> dict[str, str]:
    """The environment ch-run gives the container (the image's env file), for the host run,
    and the image's Open MPI settings: without them the host's Open MPI (Debian's, without the
    openmpi-common that ships them) took UCX and libfabric's shared memory where the image's
    takes ob1 over TCP."""
    from hvd_container.launcher.runtimes.charliecloud import prepare_image

    prepared = prepare_image(str(image))
    assert prepared is not None  # a SIF
    env_file = prepared.env_file
    pairs = (line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    env = {k: v for k, v in pairs if k not in ("PATH", "VIRTUAL_ENV", "HOME", "USER")}
    params = prepared.root / "etc" / "openmpi" / "openmpi-mca-params.conf"
    if params.is_file():
        env["OMPI_MCA_mca_base_param_files"] = str(params)
    return env


def first_line_seconds(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    (cwd / CHECKPOINT).unlink(missing_ok=True)
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    elapsed = None
    for line in proc.stdout:
        if elapsed is None and line.startswith("[rank"):
            elapsed = time.perf_counter() - start
    proc.wait()
    if elapsed is None or proc.returncode != 0:
        sys.exit(f"launch failed ({proc.returncode}): {shlex_join(argv)}")
    return elapsed


def spread(runs: list[float]) -> str:
    """The runs and how far apart they are: (max - min) / median."""
    middle = statistics.median(runs)
    width = (max(runs) - min(runs)) / middle if middle else 0.0
    return f"{', '.join(f'{x:.2f}' for x in runs)} (spread {100 * width:.0f}%)"


def report(label: str, how: str, rounds: list[tuple[Turns, Turns]], max_ratio: float) -> float:
    """Print one job's step times and CPU times per step, container against host, from rounds
    in turns: each side's median (over the rounds of the median over the turns) with the
    rounds and their spread, then the ratio, the median of the rounds' ratios, each of which
    is the median of its turns' ratios (turn k of each side, a fraction of a second apart);
    return the step time's."""
    ratio = 1.0
    for i, what in enumerate(("step time", "CPU time per step")):
        c_runs = [statistics.median(t[i] for t in c) for c, _ in rounds]
        h_runs = [statistics.median(t[i] for t in h) for _, h in rounds]
        ratios = [
            statistics.median(a[i] / b[i] for a, b in zip(c, h, strict=True)) for c, h in rounds
        ]
        turns = sum(len(c) for c, _ in rounds)
        paired = statistics.median(ratios)
        c, h = statistics.median(c_runs), statistics.median(h_runs)
        print(f"{label}{what}, container ({how}): {c:.3f} ms (median of {len(c_runs)} rounds)")
        print(f"{label}{what}, host virtualenv (--runtime none): {h:.3f} ms")
        print(f"  rounds, container: {spread(c_runs)} ms")
        print(f"  rounds, host:      {spread(h_runs)} ms")
        print(f"  rounds' ratios:    {spread(ratios)} ({turns} turns of {TURN_STEPS} steps a side)")
        line = f"{label}container/host, {what}: {paired:.3f} (ratio of the medians {c / h:.3f})"
        if i == 0:
            ratio = paired
            line += f" (target <= {max_ratio}) {'ok' if ratio <= max_ratio else 'OVER TARGET'}"
        print(line)
    return ratio


@contextlib.contextmanager
def node_per_core() -> Iterator[None]:
    """Each local node's slurmd (and so its steps and ranks) on a CPU of its own while the block
    runs, as real nodes have their own; unchanged where there are fewer CPUs than nodes."""
    pids = sorted(Path("/run/hvd-testbed/slurm").glob("slurmd-node*.pid"))
    cpus = sorted(os.sched_getaffinity(0))
    if len(pids) > len(cpus):
        yield
        return
    held = [(int(p.read_text().split()[0]), cpus[i]) for i, p in enumerate(pids)]
    for pid, cpu in held:
        subprocess.run(["taskset", "-a", "-p", "-c", str(cpu), str(pid)], check=True,
                       capture_output=True)  # fmt: skip
    try:
        print(
            f"each node on its own CPU: {', '.join(f'{p.stem[7:]} CPU {c}' for p, (_, c) in zip(pids, held, strict=True))}"
        )
        yield
    finally:
        every = ",".join(map(str, cpus))
        for pid, _ in held:
            subprocess.run(["taskset", "-a", "-p", "-c", every, str(pid)], check=False,
                           capture_output=True)  # fmt: skip


PARAM_FILES = "OMPI_MCA_mca_base_param_files"


def dpkg_owners(root: Path) -> dict[str, str]:
    """File name -> 'package version' of the Debian packages installed under `root`."""
    versions: dict[str, str] = {}
    status = root / "var" / "lib" / "dpkg" / "status"
    for block in status.read_text(errors="replace").split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if ": " in line and line[0] != " "
        )
        if "Package" in fields and "Version" in fields:
            versions[fields["Package"]] = fields["Version"]
    owners: dict[str, str] = {}
    for listing in (root / "var" / "lib" / "dpkg" / "info").glob("*.list"):
        package = listing.stem.split(":", 1)[0]
        for line in listing.read_text(errors="replace").splitlines():
            owners.setdefault(line.rsplit("/", 1)[-1], f"{package} {versions.get(package, '?')}")
    return owners


def alike(label: str, views: tuple[RankView, RankView], image_root: Path) -> None:
    """Print where a rank of each side differs from the other's (the first, uncounted round), and for shared
    objects that differ, the Debian packages they come from on each side."""
    print(f"{label}a rank of each side, as /proc showed it:")
    for line in compare(*views, same_by=frozenset({PARAM_FILES})):
        print(f"  {line}")
    print(
        f"  Open MPI settings: the image's openmpi-mca-params.conf on both sides (the host's by {PARAM_FILES})"
    )
    container, host = views
    differ = [
        n
        for n in container.libraries
        if host.libraries.get(n, container.libraries[n]) != container.libraries[n]
    ]
    if differ:
        image, here = dpkg_owners(image_root), dpkg_owners(Path("/"))
        packages = sorted({(image.get(n, "?"), here.get(n, "?")) for n in differ})
        for in_image, on_host in packages:
            print(f"  from the packages: image {in_image}, host {on_host}")


def shlex_join(argv: list[str]) -> str:
    import shlex

    return shlex.join(argv)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=default_image())
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--max-ratio", type=float, default=1.05)
    opts = parser.parse_args()
    image = image_or_exit(opts.image, "bench/launch.py")
    sh("sh", str(ROOT / "testbed" / "slurm.sh"), "up")
    sh("sh", str(ROOT / "testbed" / "charliecloud.sh"), "up")
    venv = host_venv(image)
    env = {**clean_env(), **THREADS}
    host_env = {
        **env,
        **image_env(image),
        "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv),
    }
    alloc = ["salloc", "-N", "2", "--ntasks-per-node=1", "--quiet"]
    launch = [*hvd(), "run", "--site", "local", "-N", "2", "--ntasks-per-node", "1"]
    run = [*launch, "--image", str(image)]
    bare = [*launch, "--runtime", "none"]  # the same srun line, python from the host venv
    with tempfile.TemporaryDirectory(prefix="hvd-bench-") as tmp, node_per_core():
        cwd = Path(tmp)
        ddp = ["--controller", "torch"]
        sides = [
            ("horovod", run, env, EXAMPLE),
            ("horovod", bare, host_env, EXAMPLE),
            ("ddp", [*run, *ddp], env, DDP_EXAMPLE),
            ("ddp", [*bare, *ddp], host_env, DDP_EXAMPLE),
        ]
        views: list[RankView] = []
        # round 0, each side alone: warms the caches and shows the ranks; not counted
        for _, argv, side_env, script in sides:
            with RankWatch(script.name) as watch:
                step_ms([*alloc, *argv, str(script), *TRAIN_ARGS], side_env, cwd)
            views.append(watch.view)
        # then rounds in turns, container and host at once; who begins alternates
        rounds: list[list[tuple[Turns, Turns]]] = [[], []]
        for i in range(opts.repeat):
            for job in (0, 1):
                pair = [([*alloc, *argv, str(script)], side_env)
                        for _, argv, side_env, script in sides[2 * job : 2 * job + 2]]  # fmt: skip
                container, host = in_turns(pair, i % 2, cwd)
                rounds[job].append((container, host))
        short = [str(EXAMPLE), "--epochs", "1", "--samples", "256"]
        inside = [first_line_seconds([*alloc, *run, *short], env, cwd) for _ in range(opts.repeat)]
        outside = [first_line_seconds([*run, *short], env, cwd) for _ in range(opts.repeat)]
    root = image_root(image)
    alike("", (views[0], views[1]), root)
    ratio = report("", "hvd-container run, ch-run", rounds[0], opts.max_ratio)
    alike("DDP ", (views[2], views[3]), root)
    ddp_ratio = report("DDP ", "--controller torch, ch-run", rounds[1], opts.max_ratio)
    print(
        f"run -> first rank's first line, inside an allocation: {statistics.median(inside):.2f} s"
    )
    print(
        f"run -> first rank's first line, submitted with sbatch: {statistics.median(outside):.2f} s"
    )
    return 0 if max(ratio, ddp_ratio) <= opts.max_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
