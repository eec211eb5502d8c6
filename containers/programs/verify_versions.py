# Run by `verify` inside the image: prints the package versions the image really has, as one
# JSON line after HVD-VERSIONS (containers/verify.py reads it).
import contextlib
import glob
import hashlib
import json
import platform
import subprocess
from importlib import metadata

out = {"python": platform.python_version(), "glibc": platform.libc_ver()[1]}
for key, dist in (
    ("torch", "torch"),
    ("tensorflow", "tensorflow"),
    ("tensorflow", "tensorflow-cpu"),
    ("horovod", "horovod"),
    ("lightning", "lightning"),
    ("lightning", "pytorch-lightning"),
):
    with contextlib.suppress(metadata.PackageNotFoundError):
        out.setdefault(key, metadata.version(dist))
try:
    import torch

    out["cuda"] = torch.version.cuda or ""
    if torch.version.cuda:
        # compiled-in flags: known without a GPU (get_arch_list() is empty without one)
        with contextlib.suppress(Exception):
            out["torch.cuda_archs"] = ",".join(torch._C._cuda_getArchFlags().split())
        with contextlib.suppress(Exception):
            out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    import torch.distributed as dist

    if dist.is_available():
        found = (
            ("gloo", dist.is_gloo_available()),
            ("nccl", dist.is_nccl_available()),
            ("mpi", dist.is_mpi_available()),
        )
        out["torch.distributed"] = ",".join(name for name, there in found if there)
except Exception:
    pass
try:
    text = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
    # Open MPI: "mpirun (Open MPI) 4.1.4"; MPICH's hydra: "HYDRA build details:", then
    # "    Version:   4.0.2"
    lines = [line.strip() for line in text.splitlines() if any(c.isdigit() for c in line)]
    out["mpi"] = lines[0] if lines else ""
except OSError:
    out["mpi"] = ""
# the Horovod wheel its own build stage compiled (containers/blocks/horovod_wheel.py), by digest
for wheel in sorted(glob.glob("/opt/hvd/wheels/horovod-*.whl"))[:1]:
    with open(wheel, "rb") as built:
        out["horovod.wheel"] = "sha256:" + hashlib.sha256(built.read()).hexdigest()
print("HVD-VERSIONS " + json.dumps(out))
