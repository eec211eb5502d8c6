"""The GPU path on one machine with a GPU, in one call, with no network: one table.

What it does, each step timed and judged, none of them stopping the others:
- the machine: GPU, driver, torch, its CUDA and NCCL, the compilers;
- Horovod built from the locked sdist of `--recipe` (its hash checked against the recipe's
  lock) with the HOROVOD_* flags and the patches the horovod block renders (taken from
  containers/blocks/horovod.py, never retyped), then check-build and the GPU code it carries;
- both smoke payloads that `doctor --smoke` runs (torch.distributed, Horovod), judged by
  doctor's own judge;
- the DDP, FSDP and Horovod examples on `cuda` (DDP also on the CPU: the same losses), and the
  FSDP example again from its checkpoint (resume);
- Horovod's own test/parallel/test_torch.py at one rank;
- an Average probe over lengths and dtypes, through Horovod and torch.distributed, against
  what hvd_container/known_bad.py predicts for this NCCL.

One GPU means one rank (NCCL refuses two ranks on one GPU). Where the image's paths differ from
this machine's (CUDA_HOME, NCCL_HOME: the image's venv), this machine's are used; the table says
so. CMake 4 refuses gloo's cmake_minimum_required(2.8.12) without CMAKE_POLICY_VERSION_MINIMUM.

The carry folder (`--carry`, default .whl) holds what cannot be fetched there; make it on a
machine that reaches PyPI and GitHub with `python bench/gpu_device.py --prepare`:
horovod's sdist, the wheels of cffi, pycparser, mock, mpich (an MPI with mpicc and singleton
start), pydantic's (this project's recipe model) and tomli-w (the site model's EDF runtime),
and horovod's test_torch.py and test/utils/common.py of the same release. Usage, on the GPU
machine:
    python3 bench/gpu_device.py [--carry .whl] [--out DIR] [--budget 470]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = Path("/tmp/hvd-gpu-proof")
HOROVOD_TESTS = ("test/parallel/test_torch.py", "test/utils/common.py")
WHEELS = ("cffi", "pycparser", "mock", "wheel", "mpich", "pydantic", "pydantic-core", "annotated-types",
          "typing-inspection", "typing-extensions", "tomli-w")  # fmt: skip
LENGTHS = (1, 2, 3, 7, 1023, 4913, 65537, 1000003)
DTYPES = ("float16", "bfloat16", "float32", "float64")


def importable_project() -> None:
    """hvd_container from this checkout, installed or not: a link tree of the installed layout
    (the Makefile's mypy tree does the same), so no build backend is needed there."""
    try:
        import hvd_container.containers.blocks.horovod  # noqa: F401
    except ImportError:
        tree = WORK / "project" / "hvd_container"
        shutil.rmtree(tree.parent, ignore_errors=True)
        tree.mkdir(parents=True)
        for item in (ROOT / "hvd_container").iterdir():
            (tree / item.name).symlink_to(item)
        for folder in ("containers", "launcher", "recipes"):
            (tree / folder).symlink_to(ROOT / folder)
        sys.path.insert(0, str(tree.parent))


@dataclass
class Row:
    step: str
    status: str  # ok, FAIL, known-bad, skipped
    seconds: float
    detail: str


class Proof:
    def __init__(self, out: Path, budget: float) -> None:
        self.rows: list[Row] = []
        self.out = out
        self.log = (out / "gpu_device.log").open("w")
        self.deadline = time.monotonic() + budget
        self.env = dict(os.environ)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, step: str, argv: list[str], timeout: float, **kw) -> tuple[int, str, float]:
        """Run argv, its output into the log; (exit code, output, seconds); 124 on time-out."""
        timeout = max(1.0, min(timeout, self.left()))
        self.log.write(f"\n===== {step}: {' '.join(argv)}\n")
        self.log.flush()
        started = time.monotonic()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  env=kw.pop("env", self.env), **kw)  # fmt: skip
            code, text = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout or b""
            code, text = 124, (out.decode() if isinstance(out, bytes) else out) + "\n[timed out]"
        seconds = time.monotonic() - started
        self.log.write(text)
        self.log.write(f"\n===== {step}: exit {code} in {seconds:.1f} s\n")
        self.log.flush()
        return code, text, seconds

    def add(self, step: str, status: str, seconds: float, detail: str) -> None:
        self.rows.append(Row(step, status, seconds, detail))
        print(f"{step:22} {status:9} {seconds:6.1f} s  {detail}", flush=True)

    def table(self) -> str:
        lines = ["| step | result | seconds | detail |", "| --- | --- | ---: | --- |"]
        for r in self.rows:
            detail = r.detail.replace("|", "/")
            lines.append(f"| {r.step} | {r.status} | {r.seconds:.1f} | {detail} |")
        return "\n".join(lines) + "\n"


def tail(text: str, n: int = 2) -> str:
    return " / ".join(line.strip() for line in text.strip().splitlines()[-n:])[:300]


# ----------------------------------------------------------------------------- the steps


def machine(proof: Proof) -> dict[str, str]:
    code = (
        "import torch; p = torch.cuda.get_device_properties(0); "
        "print(torch.cuda.get_device_name(0), '|', torch.__version__, '|', torch.version.cuda, "
        "'|', '.'.join(map(str, torch.cuda.nccl.version())), '|', f'sm_{p.major}{p.minor}')"
    )
    rc, text, sec = proof.run("machine", [sys.executable, "-c", code], 120)
    facts: dict[str, str] = {}
    if rc == 0:
        gpu, torch_v, cuda, nccl, sm = (x.strip() for x in text.strip().splitlines()[-1].split("|"))
        facts = {"gpu": gpu, "torch": torch_v, "cuda": cuda, "nccl": nccl, "sm": sm}
    for name, argv in {
        "driver": ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
        "gcc": ["gcc", "-dumpfullversion"],
        "nvcc": ["nvcc", "--version"],
        "cmake": ["cmake", "--version"],
    }.items():
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        found = re.findall(r"\d+\.\d+(?:\.\d+)?", out)
        facts[name] = found[-1] if name == "nvcc" and found else found[0] if found else "?"
    status = "ok" if rc == 0 else "FAIL"
    detail = ", ".join(f"{k} {v}" for k, v in facts.items()) or tail(text)
    proof.add("machine", status, sec, detail)
    return facts


def install_carried(proof: Proof, carry: Path) -> tuple[Path, Path] | None:
    """The carried wheels into a folder of their own; MPICH under a prefix (bin, include, lib)."""
    site, mpi = WORK / "site", WORK / "mpi"
    shutil.rmtree(site, ignore_errors=True)
    shutil.rmtree(mpi, ignore_errors=True)
    wheels = sorted(str(w) for w in carry.glob("*.whl") if not w.name.startswith("mpich-"))
    mpich = sorted(str(w) for w in carry.glob("mpich-*.whl"))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
           "--no-compile", "--disable-pip-version-check"]  # fmt: skip
    rc1, t1, s1 = proof.run("wheels", [*pip, "--target", str(site), *wheels], 120)
    rc2, t2, s2 = (
        proof.run("mpich", [*pip, "--prefix", str(mpi), *mpich], 120)
        if mpich
        else (1, "no mpich wheel", 0.0)
    )
    ok = rc1 == 0 and rc2 == 0 and (mpi / "bin" / "mpicxx").exists()
    names = ", ".join(Path(w).name.split("-")[0] for w in wheels + mpich)
    proof.add("carried wheels", "ok" if ok else "FAIL", s1 + s2, names if ok else tail(t1 + t2))
    if not ok:
        return None
    proof.env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(site), proof.env.get("PYTHONPATH")])
    )
    proof.env["PATH"] = f"{mpi / 'bin'}{os.pathsep}{proof.env['PATH']}"
    proof.env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(mpi / "lib"), proof.env.get("LD_LIBRARY_PATH")]))  # fmt: skip
    return site, mpi


def cuda_home() -> Path | None:
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").exists():
            return Path(home)
    nvcc = shutil.which("nvcc")
    return Path(nvcc).resolve().parents[1] if nvcc else None


def nccl_home() -> Path | None:
    """This machine's NCCL (torch's nvidia-nccl wheel) laid out as FindNCCL looks for it."""
    try:
        import nvidia.nccl  # type: ignore[import-not-found]
    except ImportError:
        return None
    base = Path(list(nvidia.nccl.__path__)[0])
    home = WORK / "nccl"
    shutil.rmtree(home, ignore_errors=True)
    (home / "lib").mkdir(parents=True)
    (home / "include").symlink_to(base / "include", target_is_directory=True)
    for lib in (base / "lib").glob("libnccl.so*"):
        (home / "lib" / lib.name).symlink_to(lib)
    if not (home / "lib" / "libnccl.so").exists():
        (home / "lib" / "libnccl.so").symlink_to(base / "lib" / "libnccl.so.2")
    return home


def build_horovod(proof: Proof, recipe_name: str, carry: Path, cpus: int) -> Path | None:
    from hvd_container.containers.blocks import horovod, horovod_patches
    from hvd_container.containers.lockfile import without
    from hvd_container.containers.recipe_loader import load_recipe

    recipe = load_recipe(recipe_name)
    assert recipe.horovod is not None and recipe.lock is not None
    version = recipe.horovod.version
    sdist = carry / f"horovod-{version}.tar.gz"
    entry = without(recipe.lock, "horovod")[1]
    locked = set(re.findall(r"sha256:([0-9a-f]{64})", entry))
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest() if sdist.exists() else "missing"
    if digest not in locked:
        proof.add(
            "horovod build", "FAIL", 0.0, f"{sdist.name}: sha256 {digest[:12]} is not the lock's"
        )
        return None
    src = WORK / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(src, filter="data")
    tree = src / f"horovod-{version}"
    patches = horovod.patches(recipe)
    script = " && ".join(c for name in patches for c in horovod_patches.commands(name))
    rc, text, sec_p = proof.run("patches", ["sh", "-ec", script or "true"], 60, cwd=tree)
    if rc != 0:
        proof.add("horovod build", "FAIL", sec_p, f"patches {', '.join(patches)}: {tail(text)}")
        return None
    flags = horovod.build_env(recipe)
    here: dict[str, str] = {}
    cuda = cuda_home()
    if "HOROVOD_CUDA_HOME" in flags and cuda is not None:
        here["HOROVOD_CUDA_HOME"] = str(cuda)
    if "HOROVOD_NCCL_HOME" in flags:
        home = nccl_home()
        if home is not None:
            here["HOROVOD_NCCL_HOME"] = str(home)
            proof.env["LD_LIBRARY_PATH"] += os.pathsep + str(home / "lib")
    env = {**proof.env, **flags, **here, "CMAKE_POLICY_VERSION_MINIMUM": "3.5",
           "MAKEFLAGS": f"-j{cpus}"}  # fmt: skip
    target = WORK / "horovod"
    shutil.rmtree(target, ignore_errors=True)
    argv = [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps",
            "--no-build-isolation", "--no-compile", "--target", str(target), "."]  # fmt: skip
    rc, text, sec = proof.run("horovod build", argv, 330, cwd=tree, env=env)
    shown = " ".join(f"{k}={v}" for k, v in flags.items() if k not in here)
    moved = ", ".join(f"{k} here {v}" for k, v in here.items())
    detail = f"horovod {version}, patches {', '.join(patches)}; {shown}; {moved}"
    if rc != 0:
        errors = [ln for ln in text.splitlines() if "error" in ln.lower()][:2]
        proof.add(
            "horovod build", "FAIL", sec_p + sec, f"{detail}: {' / '.join(errors) or tail(text)}"
        )
        return None
    proof.add("horovod build", "ok", sec_p + sec, detail)
    proof.env["PYTHONPATH"] = f"{target}{os.pathsep}{proof.env['PYTHONPATH']}"
    return target


def check_build(proof: Proof, target: Path) -> None:
    code = "import sys; sys.argv = ['horovodrun', '--check-build']; from horovod.runner.launch import run_commandline; run_commandline()"
    rc, text, sec = proof.run("check-build", [sys.executable, "-c", code], 120)
    have = re.findall(r"\[X\] (\S+)", text)
    want = {"PyTorch", "MPI", "Gloo", "NCCL"}
    ok = rc == 0 and want <= set(have)
    proof.add("check-build", "ok" if ok else "FAIL", sec, ", ".join(have) or tail(text))
    libs = sorted(target.glob("horovod/torch/mpi_lib_v2*.so"))
    if not libs or not shutil.which("cuobjdump"):
        proof.add("gpu code", "skipped", 0.0, "no mpi_lib_v2 library or no cuobjdump: not judged")
        return
    rc, text, sec = proof.run(
        "gpu code", ["cuobjdump", "--list-elf", "--list-ptx", str(libs[0])], 60
    )
    archs = sorted(set(re.findall(r"sm_\d+a?", text)))
    ptx = "with PTX" if ".ptx" in text else "no PTX"
    proof.add(
        "gpu code",
        "ok" if archs else "FAIL",
        sec,
        f"{libs[0].name}: {', '.join(archs) or 'none'} ({ptx})",
    )


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def one_rank_env(proof: Proof) -> dict[str, str]:
    return {**proof.env, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": free_port()}  # fmt: skip


def smoke(proof: Proof, name: str, payload: str, controller: str, known_bad: bool) -> None:
    from hvd_container.launcher.run.doctor import Report, judge_smoke

    path = WORK / f"smoke-{name}.py"
    path.write_text(payload)
    rc, text, sec = proof.run(
        f"smoke {name}", [sys.executable, str(path)], 120, env=one_rank_env(proof)
    )
    report = Report(checks=[])
    judge_smoke(controller, 1, rc, text, report)
    failed = [r.check for r in report.smoke if r.status == "fail"]
    worst = "FAIL" if failed else "ok"
    if failed and known_bad and all(c.startswith("average-") for c in failed):
        worst = "known-bad"  # doctor's own fail, for the NCCL that known_bad.py names
    detail = "; ".join(f"{r.check} {r.status}: {r.message}" for r in report.smoke)
    proof.add(f"smoke {name}", worst, sec, detail[:600])


def losses(text: str) -> list[str]:
    return re.findall(r"\[rank 0\] epoch \d+ loss ([0-9.]+)", text)


def step_ms(text: str) -> str:
    found = re.findall(r"median step time ([0-9.]+) ms", text)
    return found[-1] if found else "?"


def example(proof: Proof, step: str, script: str, extra: list[str], checkpoint: Path,
            keep: bool = False) -> list[str] | None:  # fmt: skip
    if not keep:
        checkpoint.unlink(missing_ok=True)
    argv = [sys.executable, str(ROOT / "examples" / script), "--epochs", "3",
            "--checkpoint", str(checkpoint), *extra]  # fmt: skip
    rc, text, sec = proof.run(step, argv, 120, env=one_rank_env(proof))
    found = losses(text)
    device = re.search(r"device (\S+)", text)
    resumed = "resumed" if "resumed from" in text else ""
    ok = rc == 0 and (found or resumed)
    detail = f"device {device.group(1) if device else '?'}, losses {' '.join(found) or 'none'}, median step {step_ms(text)} ms {resumed}"
    proof.add(step, "ok" if ok else "FAIL", sec, detail if ok else f"exit {rc}: {tail(text)}")
    return found if ok else None


def examples(proof: Proof, horovod_built: bool) -> None:
    ck = WORK / "checkpoints"
    ck.mkdir(exist_ok=True)
    gpu = example(proof, "example ddp cuda", "ddp_synthetic.py", [], ck / "ddp.pt")
    cpu = example(proof, "example ddp cpu", "ddp_synthetic.py", ["--no-cuda"], ck / "ddp-cpu.pt")
    if gpu and cpu:
        same = all(abs(float(a) - float(b)) < 2e-3 for a, b in zip(gpu, cpu, strict=False))
        proof.add(
            "ddp cuda = cpu",
            "ok" if same else "FAIL",
            0.0,
            f"cuda {' '.join(gpu)} / cpu {' '.join(cpu)}",
        )
    example(proof, "example fsdp cuda", "fsdp_synthetic.py", [], ck / "fsdp.pt")
    # the same command again with --epochs 5: it resumes after epoch 3
    ckpt = ck / "fsdp.pt"
    argv = [sys.executable, str(ROOT / "examples" / "fsdp_synthetic.py"), "--epochs", "5",
            "--checkpoint", str(ckpt)]  # fmt: skip
    rc, text, sec = proof.run("fsdp resume", argv, 120, env=one_rank_env(proof))
    ok = rc == 0 and "after epoch 3" in text and losses(text)[:1] and "epoch 4" in text
    proof.add("example fsdp resume", "ok" if ok else "FAIL", sec,
              f"resumed after epoch 3, losses {' '.join(losses(text))}" if ok else tail(text))  # fmt: skip
    if horovod_built:
        example(proof, "example horovod cuda", "pytorch_synthetic.py", [], ck / "hvd.pt")


def horovod_tests(proof: Proof, carry: Path) -> None:
    tests = WORK / "hvdtests"
    shutil.rmtree(tests, ignore_errors=True)
    found = [carry / Path(name).name for name in HOROVOD_TESTS]
    if not all(f.exists() for f in found):
        proof.add(
            "horovod test_torch",
            "skipped",
            0.0,
            f"not carried: {', '.join(HOROVOD_TESTS)}: not judged",
        )
        return
    (tests / "parallel").mkdir(parents=True)
    (tests / "utils").mkdir()
    shutil.copy(found[0], tests / "parallel")
    shutil.copy(found[1], tests / "utils")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
            "--timeout", "60", "test_torch.py"]  # fmt: skip
    budget = min(200.0, proof.left() - 60)
    rc, text, sec = proof.run(
        "horovod test_torch", argv, budget, env=one_rank_env(proof), cwd=tests / "parallel"
    )
    counts = re.findall(r"(\d+) (passed|failed|skipped|error|errors)", text)
    failed = re.findall(r"^FAILED \S+::(\S+)", text, re.M)
    summary = ", ".join(f"{n} {w}" for n, w in counts[-4:]) or tail(text)
    averages = sorted({f for f in failed if "average" in f})
    detail = summary + (f"; failed: {', '.join(sorted(set(failed)))}" if failed else "")
    if averages:
        detail += f" ({', '.join(averages)}: the Average of 17^3 values, see average horovod)"
    status = "ok" if rc == 0 else "FAIL"
    proof.add("horovod test_torch", status, sec, detail[:900])


# Each input is made on the CPU and copied over, and a block of the same size full of a sentinel
# is freed just before the call: the caching allocator hands that block to Horovod's output, so
# a tail NCCL leaves unwritten shows as the sentinel, not as a freed copy of the right values.
# torch.distributed reduces in place: at one rank an unwritten tail keeps the input, which is
# the right answer there, so only Horovod's out-of-place Average can show the bug on one GPU.
AVERAGE_PROBE = r"""
import sys, torch, torch.distributed as dist
which = sys.argv[1]
lengths = [int(x) for x in sys.argv[2].split(",")]
dtypes = sys.argv[3].split(",")
torch.cuda.set_device(0)
if which == "horovod":
    import horovod.torch as hvd
    hvd.init()
    average = lambda t, name: hvd.allreduce(t, op=hvd.Average, name=name)
else:
    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    def average(t, name):
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        return t
for dtype in dtypes:
    kind = getattr(torch, dtype)
    for n in lengths:
        want = (torch.arange(n, dtype=torch.float64) % 97 + 1).to(kind)
        t = want.cuda()
        torch.full((n,), -7.0, dtype=kind, device="cuda")  # freed at once: the sentinel block
        try:
            got = average(t, f"{dtype}.{n}")
        except ValueError as exc:  # a dtype this library does not reduce
            print(f"AVG {which} {dtype} {n} unsupported", flush=True)
            break
        torch.cuda.synchronize()
        bad = (got.cpu().double() - want.double()).abs().gt(1e-6).nonzero().flatten()
        first = int(bad[0]) if len(bad) else -1
        print(f"AVG {which} {dtype} {n} wrong {len(bad)} first {first}", flush=True)
"""


def average_probe(proof: Proof, nccl: str, horovod_built: bool) -> None:
    """Horovod's Average against what known_bad.py predicts for this NCCL; torch's in-place
    AVG is shown beside it (it cannot show the bug at one rank)."""
    from hvd_container import known_bad

    path = WORK / "average_probe.py"
    path.write_text(AVERAGE_PROBE)
    predicted = bool(known_bad.problems({"nccl": nccl}))
    for which in ("torch", "horovod") if horovod_built else ("torch",):
        argv = [sys.executable, str(path), which, ",".join(map(str, LENGTHS)), ",".join(DTYPES)]
        rc, text, sec = proof.run(f"average {which}", argv, 120, env=one_rank_env(proof))
        rows = re.findall(r"^AVG \S+ (\S+) (\d+) wrong (\d+) first (-?\d+)$", text, re.M)
        unsupported = re.findall(r"^AVG \S+ (\S+) \d+ unsupported$", text, re.M)
        wrong = [(d, n, w, f) for d, n, w, f in rows if w != "0"]
        cases = (len(DTYPES) - len(unsupported)) * len(LENGTHS)
        shown = "; ".join(f"{d} n={n}: {w} wrong from index {f}" for d, n, w, f in wrong[:6])
        skipped = f", {'/'.join(unsupported)} not supported" if unsupported else ""
        if rc != 0 or len(rows) != cases:
            proof.add(
                f"average {which}",
                "FAIL",
                sec,
                f"exit {rc}, {len(rows)} of {cases} cases: {tail(text)}",
            )
            continue
        if which == "torch":
            proof.add("average torch", "ok" if not wrong else "FAIL", sec,
                      f"{cases - len(wrong)} of {cases} cases right (in place: one rank cannot show a dropped tail){skipped}")  # fmt: skip
            continue
        if wrong:
            status, said = ("known-bad", "predicted") if predicted else ("FAIL", "NOT predicted")
            detail = f"{len(wrong)} of {cases} cases wrong, {said} by known_bad.py for NCCL {nccl}{skipped}: {shown}"
        else:
            status = "ok" if not predicted else "FAIL"
            said = (
                "as known_bad.py says"
                if not predicted
                else "though known_bad.py predicts wrong ones"
            )
            detail = f"{cases} cases right, {said} for NCCL {nccl}{skipped}"
        proof.add("average horovod", status, sec, detail)


# ----------------------------------------------------------------------------- prepare


def prepare(carry: Path, version: str) -> int:
    """Fill the carry folder where PyPI and GitHub are reachable."""
    carry.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(carry)]
    subprocess.run([*pip, "--no-binary", ":all:", f"horovod=={version}"], check=True)
    target = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
              "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
              "--platform", "manylinux2014_x86_64"]  # fmt: skip
    subprocess.run([*pip, *target, *WHEELS], check=True)
    import requests  # the build extra's

    for name in HOROVOD_TESTS:
        url = f"https://raw.githubusercontent.com/horovod/horovod/v{version}/{name}"
        try:
            reply = requests.get(url, timeout=60)
            reply.raise_for_status()
        except requests.RequestException as error:
            print(f"{url}: {error.__class__.__name__}; copy it from a clone of horovod/horovod: "
                  f"git show v{version}:{name} > {carry / Path(name).name}")  # fmt: skip
            return 1
        (carry / Path(name).name).write_bytes(reply.content)
    print(f"{carry}: {', '.join(sorted(p.name for p in carry.iterdir()))}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--carry", type=Path, default=ROOT / ".whl")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or WORK / "out"))
    p.add_argument("--recipe", default="gpu-bookworm")
    p.add_argument("--budget", type=float, default=470.0, help="seconds for all the steps")
    p.add_argument("--prepare", action="store_true", help="fill --carry (needs PyPI and GitHub)")
    args = p.parse_args()
    if args.prepare:
        importable_project()
        from hvd_container.containers.recipe_loader import load_recipe

        hvd = load_recipe(args.recipe).horovod
        assert hvd is not None
        return prepare(args.carry, hvd.version)
    WORK.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    proof = Proof(args.out, args.budget)
    started = time.monotonic()
    facts = machine(proof)
    carried = install_carried(proof, args.carry)
    if carried is not None:
        sys.path.insert(0, str(carried[0]))  # pydantic, for the recipe model below
    importable_project()
    target = build_horovod(proof, args.recipe, args.carry, os.cpu_count() or 4) if carried else None
    if target is not None:
        check_build(proof, target)
    from hvd_container.launcher.controllers import _horovod, _torch

    from hvd_container import known_bad

    bad_nccl = bool(known_bad.problems({"nccl": facts.get("nccl", "")}))
    smoke(proof, "torch", _torch.SMOKE, "torch", bad_nccl)
    if target is not None:
        smoke(proof, "horovod", _horovod.SMOKE, "mpi", bad_nccl)
    average_probe(proof, facts.get("nccl", "?"), target is not None)
    examples(proof, target is not None)
    if target is not None:
        horovod_tests(proof, args.carry)
    total = time.monotonic() - started
    head = f"{facts.get('gpu', '?')}, driver {facts.get('driver', '?')}, torch {facts.get('torch', '?')} (CUDA {facts.get('cuda', '?')}, NCCL {facts.get('nccl', '?')}), GCC {facts.get('gcc', '?')}, {os.cpu_count()} CPUs: {total:.0f} s in all"
    text = f"{head}\n\n{proof.table()}"
    (args.out / "gpu_device.md").write_text(text)
    print("\n" + text)
    return 0 if all(r.status != "FAIL" for r in proof.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
