"""Horovod 0.28.1 with GCC >= 13, here (`make test-heavy`): as released it does not compile
(horovod/common/group_table.h uses std::string without <string>, which GCC < 13's libstdc++
included on the way; with GCC 14 also the vendored flatbuffers' span::operator=, which assigns
a const member); the horovod block's gcc13 patch makes it build.

The compiler is Debian trixie's GCC 14 installed into the bookworm base (bookworm's Python 3.11
keeps the local torch 2.13 CPU wheel usable); CC and CXX name it, so CMake builds Horovod with
it. First the one file, unpatched and patched (seconds); then cpu-bookworm's recipe on that base,
built, verified and read back: the Horovod library says GCC 14 made it.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.e2e.build_fixtures import hvd, with_cpu_lock

pytestmark = [pytest.mark.e2e, pytest.mark.heavy]

GCC14_BASE = "hvd-e2e/debian-gcc14:bookworm"
GCC14_DOCKERFILE = """\
FROM hvd-base/debian:bookworm
RUN echo 'deb http://deb.debian.org/debian trixie main' > /etc/apt/sources.list.d/trixie.list \\
 && apt-get update && apt-get install -y --no-install-recommends -t trixie g++-14 \\
 && rm /etc/apt/sources.list.d/trixie.list && rm -rf /var/lib/apt/lists/*
ENV CC=gcc-14 CXX=g++-14
"""
RECIPE = """\
extends: cpu-bookworm
name: cpu-bookworm-gcc14
description: cpu-bookworm whose Horovod GCC 14 compiles
base:
  image: {base}
checks:
  - python -c 'import horovod.torch as hvd; assert hvd.mpi_built() and hvd.gloo_built()'
"""


def docker(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def gcc14_base(base_image: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    context = tmp_path_factory.mktemp("gcc14-base")
    (context / "Dockerfile").write_text(GCC14_DOCKERFILE)
    done = docker("build", "-q", "-t", GCC14_BASE, str(context))
    assert done.returncode == 0, done.stdout + done.stderr
    return GCC14_BASE


@pytest.fixture(scope="module")
def horovod_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Horovod's sdist of the version cpu-bookworm locks, unpacked."""
    from hvd_container.containers.recipe_loader import load_recipe

    version = load_recipe("cpu-bookworm").horovod.version  # type: ignore[union-attr]
    where = tmp_path_factory.mktemp("horovod")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
         "-d", str(where), f"horovod=={version}"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    with tarfile.open(next(where.glob("horovod-*.tar.gz"))) as sdist:
        sdist.extractall(where, filter="data")
    return where / f"horovod-{version}"


# group_table.h lacks <string> (GCC 13 and newer); message.cc includes the vendored
# flatbuffers, whose span::operator= assigns a const member (GCC 14 reads uninstantiated members)
FILES = ("horovod/common/group_table.cc", "horovod/common/message.cc")


def syntax_check(base: str, source: Path) -> subprocess.CompletedProcess[str]:
    compile_each = " && ".join(
        f"$CXX -std=c++17 -fsyntax-only -Ithird_party/flatbuffers/include {name}" for name in FILES
    )
    return docker(
        "run", "--rm", "-v", f"{source}:/src", "-w", "/src", base, "sh", "-c", compile_each
    )  # fmt: skip


def test_gcc14_needs_the_gcc13_patch_and_it_is_enough(
    gcc14_base: str, horovod_source: Path
) -> None:
    from hvd_container.containers.blocks import horovod_patches

    for name in FILES:
        one = docker(
            "run", "--rm", "-v", f"{horovod_source}:/src", "-w", "/src", gcc14_base, "sh", "-c",
            f"$CXX -std=c++17 -fsyntax-only -Ithird_party/flatbuffers/include {name}",
        )  # fmt: skip
        assert one.returncode != 0, name
    released = syntax_check(gcc14_base, horovod_source)
    assert "'string' in namespace 'std' does not name a type" in released.stderr, released.stderr

    assert "gcc13" in horovod_patches.needed(horovod_source.name.split("-", 1)[1])
    patch = " && ".join(horovod_patches.commands("gcc13"))
    subprocess.run(["sh", "-ec", patch], cwd=horovod_source, check=True)
    patched = syntax_check(gcc14_base, horovod_source)
    assert patched.returncode == 0, patched.stderr


def test_cpu_bookworm_builds_with_gcc14(gcc14_base: str, tmp_path: Path) -> None:
    recipe = with_cpu_lock(tmp_path / "cpu-bookworm-gcc14.yaml")
    recipe.write_text(RECIPE.format(base=gcc14_base))
    from hvd_container.containers.blocks import horovod_patches

    rendered = hvd("render", str(recipe))
    assert rendered.returncode == 0, rendered.stderr
    assert all(command in rendered.stdout for command in horovod_patches.commands("gcc13"))
    built = hvd("build", str(recipe), "--progress", "plain", timeout=3600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    # the compiler that made Horovod's PyTorch library, as the library records it
    comment = docker(
        "run", "--rm", "cpu-bookworm-gcc14:1", "sh", "-c",
        "readelf -p .comment /opt/venv/lib/python3.11/site-packages/horovod/torch/mpi_lib_v2*.so",
    )  # fmt: skip
    assert comment.returncode == 0, comment.stderr
    assert "GCC: (Debian 14." in comment.stdout, comment.stdout
