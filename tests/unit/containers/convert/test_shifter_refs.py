"""One Shifter image reference for `convert --to shifter` (shifterimg pull) and the launcher
(`shifter --image=`): no docker.io/ prefix (`shifterimg pull docker.io/...` fails), explicit tag."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hvd_container.launcher import runtimes

from hvd_container.core.image_refs import shifter_image_ref


@pytest.mark.parametrize(
    ("image", "ref"),
    [
        ("docker.io/library/ubuntu", "docker:ubuntu:latest"),
        ("docker.io/me/cpu:1", "docker:me/cpu:1"),
        ("index.docker.io/me/cpu:1", "docker:me/cpu:1"),
        ("docker://docker.io/me/cpu:1", "docker:me/cpu:1"),
        ("docker://me/cpu", "docker:me/cpu:latest"),
        ("registry.nersc.gov/proj/cpu:1", "docker:registry.nersc.gov/proj/cpu:1"),
        ("127.0.0.1:5000/cpu", "docker:127.0.0.1:5000/cpu:latest"),
        ("docker:me/x:2", "docker:me/x:2"),
        ("me/x@sha256:" + "0" * 64, "docker:me/x@sha256:" + "0" * 64),
    ],
)
def test_convert_and_launcher_write_the_same_reference(image: str, ref: str) -> None:
    assert shifter_image_ref(image) == ref
    assert runtimes.runtime(runtimes.default_profile("shifter")).image_ref(image) == ref


def test_the_launch_path_stays_light() -> None:
    code = (
        "import sys\n"
        "import hvd_container.launcher.runtimes.shifter\n"
        "print(sorted(m for m in ('docker', 'requests', 'spython') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
