"""Helpers for the build e2e tests (imported by conftest.py and the test modules)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU_RECIPE = "cpu-bookworm"


def with_cpu_lock(recipe: Path) -> Path:
    """A recipe that extends the CPU recipe and installs the same packages gets its lock: the
    build then reuses the CPU image's layers (a recipe without a lock installs unlocked and
    rebuilds Horovod, minutes every run)."""
    shutil.copy(ROOT / "recipes" / f"{CPU_RECIPE}.lock", recipe.with_suffix(".lock"))
    return recipe


TF_RECIPE = "cpu-bookworm-tf-pt"
GPU_RECIPE = "gpu-bookworm"
TORCH_RECIPE = "cpu-bookworm-torch"  # the CPU twin of gpu-bookworm-torch: no Horovod
GPU_TORCH_RECIPE = "gpu-bookworm-torch"
REGISTRY = os.environ.get("HVD_REGISTRY_ADDR", "127.0.0.1:5000")


def testbed(script: str, *args: str) -> None:
    """Run a testbed script; its own one-line error is shown if it fails."""
    proc = subprocess.run(
        ["sh", str(ROOT / "testbed" / script), *args], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.fail(f"testbed/{script} {' '.join(args)} failed: {proc.stderr.strip()[-2000:]}")


def started(
    *args: str, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> subprocess.Popen[str]:
    """The real CLI started as a user would, outside any Slurm allocation, its output piped:
    for a test that does something to it (or to an engine) while it runs."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.Popen(
        [sys.executable, "-m", "hvd_container", *args],
        cwd=cwd, env={**base, "PYTHONPATH": str(ROOT), **(env or {})}, text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip


@contextlib.contextmanager
def reaped(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """A started CLI that a failed assertion must not leave running."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def hvd(
    *args: str, env: dict[str, str] | None = None, timeout: float = 3600, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "hvd_container", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def grace_hopper_half(api: Any, recipe: str, timeout: float) -> dict[str, str]:
    """The recipe's arm64 image (`build --arch arm64`, its own lock) built and verified under
    qemu (testbed/qemu.sh: 10 or newer), checked to be arm64 by Docker and by its label; its
    labels for the caller's own checks."""
    testbed("qemu.sh", "up")
    proc = hvd("build", recipe, "--arch", "arm64", "--progress", "plain", timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    image = api.inspect_image(f"{recipe}:1-arm64")
    assert image["Architecture"] == "arm64"
    labels: dict[str, str] = image["Config"]["Labels"]
    p = "org.hvd-container."
    assert labels[p + "verified"] == "true" and labels[p + "arch"] == "arm64"
    return labels
