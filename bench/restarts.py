"""What a fault costs a run that restarts (`run --until-done`), on the local cluster.

For each fault, at each node count N (the cluster brought up with N + 1 nodes: N training, one
spare): the Horovod example (CPU, fixed seed) runs `--until-done --spare-nodes 1`, and once rank
0 said its second epoch the fault is made: `node`, the last rank's node crashed (every process
of it killed, slurmd too: `testbed/slurm.sh crash`) half an epoch later; `hang`, the last rank stopped inside its
checkpoint write of epoch 3 (the example's drill, once) and `--hang-after 20s`. Printed: the
seconds from the fault to the restarted step's start and to the first line of training after it
(its "resumed from" line, as the run's output shows it), and the work lost (from the last whole
checkpoint before the fault to the fault), with the run's own record (`jobs show --json`).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _cluster import ROOT, clean_env, default_image, hvd, image_or_exit, sh

EXAMPLE = ROOT / "examples" / "pytorch_synthetic.py"
TRAIN = ["--epochs", "6", "--samples", "8192", "--seed", "5"]
HANG_AFTER = "20s"

# the hang's drill, once: the example's pause in its checkpoint write (a rank that stops
# there holds the others in the next allreduce), on the first try only
HANG_ONCE = """\
import os, runpy, sys
marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hung-once")
if not os.path.exists(marker) and os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("SLURM_PROCID")) == "0":
    open(marker, "w").close()
    os.environ["HVD_EXAMPLE_PAUSE_IN_CHECKPOINT"] = "3"
sys.argv = [sys.argv[1], *sys.argv[2:]]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def one_fault(image: Path, nodes: int, fault: str, work: Path) -> dict[str, float | str]:
    """Run the example with `fault` made after rank 0's epoch 2; the figures of it."""
    work.mkdir(parents=True)
    for name in (EXAMPLE.name, "_synthetic.py"):  # beside the wrapper: the container sees them
        shutil.copy(EXAMPLE.parent / name, work / name)
    script = [EXAMPLE.name]
    extra: list[str] = []
    if fault == "hang":
        (work / "hang_once.py").write_text(HANG_ONCE)
        script = ["hang_once.py", EXAMPLE.name]
        extra = ["--hang-after", HANG_AFTER, "--controller", "mpi"]
    argv = [*hvd(), "run", "--site", "local", "--image", str(image), "-N", str(nodes),
            "--ntasks-per-node", "1", "--until-done", "--time", "30", "--spare-nodes", "1",
            *extra, *script, *TRAIN, "--checkpoint", str(work / "model.pt")]  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=work, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    seen: dict[str, float] = {}
    lines: list[str] = []
    hosts: dict[int, str] = {}

    def crash(node: str) -> None:
        sh("sh", str(ROOT / "testbed" / "slurm.sh"), "crash", node)
        seen["fault"] = time.time()

    def watch() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            found = re.match(r"\[rank (\d+)\] .*initialised: .* host (node\d+)", line)
            if found:
                hosts[int(found[1])] = found[2]
            if line.startswith("[rank 0] epoch 1 loss"):
                seen["epoch 1"] = time.time()
            if "fault" not in seen and line.startswith("[rank 0] epoch 2 loss"):
                if fault == "node":  # in the middle of epoch 3
                    half = (time.time() - seen.get("epoch 1", time.time())) / 2
                    threading.Timer(half, crash, args=(hosts[max(hosts)],)).start()
                    seen["fault"] = time.time() + half
                else:
                    seen["fault"] = time.time()
            if fault == "hang" and "hang" not in seen and "drill: checkpoint of epoch 3" in line:
                seen["hang"] = time.time()
            if "fault" in seen and "resumed" not in seen and "[rank 0] resumed from" in line:
                seen["resumed"] = time.time()

    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    proc.wait(timeout=1200)
    reader.join(timeout=30)
    said = "".join(lines)
    if proc.returncode != 0 or "resumed" not in seen:
        sys.exit(f"{fault} at {nodes} nodes: the run failed ({proc.returncode}):\n{said}")
    job = re.search(r"submitted batch job (\d+)", said)
    shown = subprocess.run(
        [*hvd(), "jobs", "show", job[1] if job else "0", "--json"],
        cwd=work, env=clean_env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    steps = json.loads(shown.stdout)["steps"]
    fault_at = seen.get("hang", seen["fault"])  # the hang: from the stop in the write
    restarted = next(s for s in steps[1:] if s["started"] >= fault_at - 1)
    before = steps[steps.index(restarted) - 1]
    checkpoint = _progress_at(work, before)
    return {
        "fault": fault,
        "nodes": nodes,
        "to_step": restarted["started"] - fault_at,
        "to_training": seen["resumed"] - fault_at,
        "work_lost": fault_at - checkpoint,
        "recorded_lost": before["lost_seconds"],
        "why": before["why"],
    }


def _progress_at(work: Path, step: dict) -> float:
    """When the step before the restart wrote its last checkpoint (its record's progress
    time), else its start."""
    for record in (work / ".hvd-container" / "runs").glob("*.json"):
        for s in json.loads(record.read_text())["steps"]:
            if s["started"] == step["started"]:
                return max(s["started"], s.get("progress_at") or 0.0)
    return float(step["started"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=default_image(), help="a SIF with Horovod")
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--faults", nargs="+", default=["node", "hang"], choices=["node", "hang"])
    args = parser.parse_args()
    image = image_or_exit(args.image, "restarts.py")
    sh("sh", str(ROOT / "testbed" / "charliecloud.sh"), "up")
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="hvd-bench-restarts-", dir=Path.home()) as tmp:
            for nodes in args.nodes:
                for fault in args.faults:
                    sh("sh", str(ROOT / "testbed" / "slurm.sh"), "up", "--nodes", str(nodes + 1))
                    rows.append(one_fault(image, nodes, fault, Path(tmp) / f"{fault}-{nodes}"))
                    print(rows[-1], flush=True)
    finally:
        sh("sh", str(ROOT / "testbed" / "slurm.sh"), "up")  # the 2-node cluster
    print(
        "| fault | nodes (+1 spare) | fault to restarted step (s) | fault to training again (s) | work lost (s) | recorded as lost (s) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['fault']} | {r['nodes']} | {r['to_step']:.1f} | {r['to_training']:.1f} | "
              f"{r['work_lost']:.1f} | {r['recorded_lost']:.1f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
