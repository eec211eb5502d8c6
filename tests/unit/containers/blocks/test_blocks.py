"""Each building block's instructions, checked on its own as Dockerfile text."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from _recipe_helpers import CPU_RECIPE, GPU_RECIPE, WHEELS_RECIPE, merged, write
from hvd_container.containers.blocks import (
    BLOCKS,
    PHASES,
    base,
    checks,
    cuda,
    env_labels,
    extras,
    gpu_wheels,
    horovod,
    horovod_patches,
    lightning,
    mpi,
    mpi_wheel,
    nccl,
    pip_setup,
    python,
    pytorch,
    render_blocks,
    tensorflow,
)
from hvd_container.containers.instructions import Block
from hvd_container.containers.printers.dockerfile import MARKER_PREFIX, block_text
from hvd_container.containers.recipe import LockedRecipe, Recipe
from hvd_container.containers.recipe_loader import load_recipe, read_recipe
from hvd_container.containers.render import render_dockerfile


@pytest.fixture
def cpu(tmp_path: Path) -> Recipe:
    return load_recipe(write(tmp_path, CPU_RECIPE))


@pytest.fixture
def gpu(tmp_path: Path) -> Recipe:
    return load_recipe(write(tmp_path, GPU_RECIPE))


def recipe_of(tmp_path: Path, data: dict) -> LockedRecipe:  # type: ignore[type-arg]
    # a block on its own: the lock a build of the variant needs is not its business
    return LockedRecipe.of(read_recipe(write(tmp_path, data, "variant.yaml")), None)


def text_of(block: Block | None) -> str:
    """A block as Dockerfile text ("" for an absent component)."""
    return "" if block is None else block_text(block)


def blocks_text(recipe: Recipe) -> list[tuple[str, str]]:
    return [(name, block_text(block)) for name, block in render_blocks(recipe)]


def instructions(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith((" ", "#"))]


def test_every_block_starts_with_its_phase_marker(cpu: Recipe, gpu: Recipe) -> None:
    for recipe in (cpu, gpu):
        for name, text in blocks_text(recipe):
            first = text.splitlines()[0]
            assert first.startswith(MARKER_PREFIX), name
            assert first[len(MARKER_PREFIX) :] in PHASES


def test_phases_never_go_back(tmp_path: Path) -> None:
    recipe = recipe_of(tmp_path, merged(GPU_RECIPE, pip=["rich"], checks=["true"]))
    phases = [text.splitlines()[0][len(MARKER_PREFIX) :] for _, text in blocks_text(recipe)]
    assert phases == sorted(phases, key=PHASES.index)
    assert set(phases) == set(PHASES)


def test_block_order_is_the_layer_order() -> None:
    assert [name for name, _ in BLOCKS] == [
        "base",
        "python",
        "mpi",
        "cuda",
        "nccl",
        "pip_setup",
        "locked",
        "mpi_wheel",
        "gpu_wheels",
        "tensorflow",
        "pytorch",
        "lightning",
        "horovod",
        "extras",
        "env_labels",
        "checks",
    ]


def test_absent_components_render_nothing(cpu: Recipe) -> None:
    for block in (cuda, nccl, tensorflow, lightning, extras, checks):
        assert block.render(cpu) is None


def test_base_debootstrap(cpu: Recipe) -> None:
    assert instructions(text_of(base.render(cpu))) == [
        "FROM hvd-base/debian:bookworm",
        "ARG DEBIAN_FRONTEND=noninteractive",
    ]


def test_pip_wrapper_and_its_build_arg(cpu: Recipe) -> None:
    assert instructions(text_of(pip_setup.render(cpu))) == [
        "ARG HVD_PIP_CONFIG_URL=",
        "COPY hvd-pip /usr/local/bin/hvd-pip",
        "RUN chmod 0755 /usr/local/bin/hvd-pip",
    ]


def test_pip_config_arg_comes_after_the_system_layers(gpu: Recipe) -> None:
    text = render_dockerfile(gpu)
    arg = text.index("ARG HVD_PIP_CONFIG_URL=")
    for system_part in ("python3.10-venv", "openmpi-bin", "libnccl2="):
        assert text.index(system_part) < arg
    assert arg < text.index("hvd-pip install")


def test_base_docker_reference(gpu: Recipe) -> None:
    assert "FROM nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04\n" in text_of(base.render(gpu))


@pytest.mark.parametrize("arch", ["arm64", "ppc64le"])
def test_base_names_the_platform_of_other_arches(tmp_path: Path, arch: str) -> None:
    data = merged(CPU_RECIPE, arch=arch, base={"image": "debian:bookworm"})
    if arch == "ppc64le":  # no torch wheels on PyPI for ppc64le: the base image has it
        data["pytorch"] = {**data["pytorch"], "source": "image"}
    assert instructions(text_of(base.render(recipe_of(tmp_path, data))))[0] == (
        f"FROM --platform=linux/{arch} debian:bookworm"
    )


def test_base_amd64_is_a_plain_from(cpu: Recipe) -> None:
    assert "--platform" not in text_of(base.render(cpu))


def test_python_system_venv(cpu: Recipe) -> None:
    text = text_of(python.render(cpu))
    assert "apt-get install -y --no-install-recommends ca-certificates python3.11 " in text
    assert "python3.11-venv" in text and "python3.11-dev" in text
    assert "RUN python3.11 -m venv /opt/venv" in text
    assert "assert sys.version_info[:2] == (3, 11)" in text
    assert "ENV PATH=/opt/venv/bin:$PATH" in text.splitlines()


def test_python_from_image_only_checks(tmp_path: Path) -> None:
    recipe = recipe_of(tmp_path, merged(GPU_RECIPE, python={"version": "3.10", "source": "image"}))
    text = text_of(python.render(recipe))
    assert "apt-get" not in text and "venv" not in text
    assert "python3 -c 'import sys; assert sys.version_info[:2] == (3, 10)" in text


def test_mpi_openmpi_with_pmix_and_version_check(tmp_path: Path) -> None:
    data = merged(CPU_RECIPE, mpi={"flavor": "openmpi", "version": "4.1.4", "pmi": ["pmix"]})
    text = text_of(mpi.render(recipe_of(tmp_path, data)))
    assert "install -y --no-install-recommends openmpi-bin libopenmpi-dev libpmix-dev \\" in text
    assert "RUN mpirun --version | grep -F 4.1.4" in text


def test_mpi_mpich_with_pmi2(tmp_path: Path) -> None:
    data = merged(CPU_RECIPE, mpi={"flavor": "mpich", "pmi": ["pmi2"]})
    text = text_of(mpi.render(recipe_of(tmp_path, data)))
    # MPICH's PMI-1 client is built in: no Slurm PMI library to add
    assert "install -y --no-install-recommends mpich libmpich-dev \\\n" in text
    assert "openmpi" not in text and "pmi" not in text


def test_mpi_from_image_installs_nothing(tmp_path: Path) -> None:
    data = merged(CPU_RECIPE, mpi={"flavor": "openmpi", "source": "image"})
    assert instructions(text_of(mpi.render(recipe_of(tmp_path, data)))) == ["RUN mpirun --version"]


def test_cuda_checks_the_base_image_toolkit(gpu: Recipe) -> None:
    text = text_of(cuda.render(gpu))
    assert "ENV CUDA_HOME=/usr/local/cuda" in text
    assert "RUN test -d /usr/local/cuda-11.8 ||" in text


def test_nccl_pinned_to_cuda_build(gpu: Recipe) -> None:
    text = text_of(nccl.render(gpu))
    assert "libnccl2=2.15.5-1+cuda11.8 libnccl-dev=2.15.5-1+cuda11.8" in text
    assert "--allow-change-held-packages" in text


def test_nccl_full_debian_version_kept(tmp_path: Path) -> None:
    recipe = recipe_of(tmp_path, merged(GPU_RECIPE, nccl={"version": "2.15.5-1+cuda11.0"}))
    assert "libnccl2=2.15.5-1+cuda11.0 " in text_of(nccl.render(recipe))


def test_tensorflow_wheel(gpu: Recipe) -> None:
    assert instructions(text_of(tensorflow.render(gpu))) == [
        "RUN hvd-pip install --no-cache-dir tensorflow==2.10.1"
    ]


def test_pytorch_cuda_wheels_from_pytorch_index(gpu: Recipe) -> None:
    assert instructions(text_of(pytorch.render(gpu))) == [
        "RUN hvd-pip install --no-cache-dir --extra-index-url "
        "https://download.pytorch.org/whl/cu117 torch==1.13.1+cu117 torchvision==0.14.1+cu117"
    ]


def test_pytorch_cpu_wheel_from_pip_configuration(cpu: Recipe) -> None:
    assert instructions(text_of(pytorch.render(cpu))) == [
        "RUN hvd-pip install --no-cache-dir torch==2.13.0+cpu"
    ]


def test_lightning(tmp_path: Path) -> None:
    recipe = recipe_of(tmp_path, merged(GPU_RECIPE, lightning={"version": "2.0.2"}))
    assert instructions(text_of(lightning.render(recipe))) == [
        "RUN hvd-pip install --no-cache-dir lightning==2.0.2"
    ]


def test_horovod_flags_cpu(cpu: Recipe) -> None:
    assert horovod.build_env(cpu) == {
        "HOROVOD_WITHOUT_MXNET": "1",
        "HOROVOD_WITHOUT_TENSORFLOW": "1",
        "HOROVOD_WITH_GLOO": "1",
        "HOROVOD_WITH_MPI": "1",
        "HOROVOD_WITH_PYTORCH": "1",
    }


def test_horovod_flags_gpu_as_in_the_perlmutter_guide(gpu: Recipe) -> None:
    flags = horovod.build_env(gpu)
    assert flags["HOROVOD_GPU_OPERATIONS"] == "NCCL"
    assert flags["HOROVOD_NCCL_LINK"] == "SHARED"
    for name in ("TENSORFLOW", "PYTORCH", "MPI", "GLOO"):
        assert flags[f"HOROVOD_WITH_{name}"] == "1"


def test_horovod_gloo_only_without_mpi(tmp_path: Path) -> None:
    hvd = dict(CPU_RECIPE["horovod"], controllers=["gloo"])
    flags = horovod.build_env(recipe_of(tmp_path, merged(CPU_RECIPE, horovod=hvd, mpi=None)))
    assert flags["HOROVOD_WITHOUT_MPI"] == "1" and flags["HOROVOD_WITH_GLOO"] == "1"


def test_horovod_cxx17_patch_builds_from_patched_sdist(cpu: Recipe) -> None:
    text = text_of(horovod.render(cpu))
    build = text[text.index("hvd_src=$(mktemp -d)") :]
    steps = [s.strip() for s in build.split("&&")]
    assert steps[1] == (
        'hvd-pip download --no-deps --no-binary :all: -d "$hvd_src" horovod==0.28.1 \\'
    )
    assert steps[2].startswith('tar -xzf "$hvd_src/horovod-0.28.1.tar.gz"')
    sed = "sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "
    assert steps[4] == sed + "CMakeLists.txt horovod/torch/CMakeLists.txt \\"
    assert steps[5].startswith("! grep -n 'CMAKE_CXX_STANDARD 14'")
    install = next(s for s in steps if "hvd-pip install" in s)
    assert "hvd-pip install --no-cache-dir --no-build-isolation . \\" in install
    assert install.startswith("HOROVOD_WITHOUT_MXNET=1 ")
    assert steps.index(install) > steps.index(horovod_patches.commands("gcc13")[-1] + " \\")
    assert 'rm -rf "$hvd_src"' in build
    assert "ldconfig" not in text  # CPU: no CUDA stubs


def test_horovod_build_dependencies(cpu: Recipe) -> None:
    text = text_of(horovod.render(cpu))
    assert "install -y --no-install-recommends cmake g++ make python3.11-dev" in text
    assert "hvd-pip install --no-cache-dir setuptools wheel packaging" in text


def test_horovod_gpu_links_against_cuda_stubs(gpu: Recipe) -> None:
    text = text_of(horovod.render(gpu))
    assert "RUN ldconfig /usr/local/cuda/lib64/stubs \\" in text
    run = text[text.index("RUN ldconfig") :]
    assert run.index("--no-build-isolation .") < run.index("&& ldconfig \\")


def test_extras_apt_then_pip_quoted(tmp_path: Path) -> None:
    data = merged(CPU_RECIPE, apt=["vim"], pip=["rich>=13", "pandas"])
    text = text_of(extras.render(recipe_of(tmp_path, data)))
    assert text.index("apt-get install") < text.index("hvd-pip install")
    assert "RUN hvd-pip install --no-cache-dir 'rich>=13' pandas" in text


def test_env_and_labels_one_per_instruction(tmp_path: Path) -> None:
    data = merged(CPU_RECIPE, env={"A": "1", "B": "a\\b"}, labels={"maintainer": 'me "x"'})
    recipe = recipe_of(tmp_path, data)
    lines = instructions(text_of(env_labels.render(recipe)))
    assert lines[:3] == ['ENV A="1"', 'ENV B="a\\\\b"', 'LABEL maintainer="me \\"x\\""']
    assert f'LABEL org.hvd-container.recipe.digest="{recipe.digest()}"' in lines
    assert 'LABEL org.hvd-container.recipe.name="t"' in lines
    assert all(re.fullmatch(r'(ENV|LABEL) [^ =]+=".*"', line) for line in lines)


def test_checks_one_run_each(tmp_path: Path) -> None:
    data = merged(CPU_RECIPE, checks=["python -c 'import torch'", "mpirun --version"])
    assert instructions(text_of(checks.render(recipe_of(tmp_path, data)))) == [
        "RUN python -c 'import torch'",
        "RUN mpirun --version",
    ]


def test_pip_only_through_hvd_pip(cpu: Recipe, gpu: Recipe) -> None:
    for recipe in (cpu, gpu):
        for _, text in blocks_text(recipe):
            for match in re.finditer(r"\bpip\b", text):
                before = text[max(0, match.start() - 4) : match.start()]
                assert before.endswith(("hvd-", "-m ")) or "/" in before, text
            assert "python -m pip install" not in text and "pip3 install" not in text


def test_frameworks_from_the_image_are_version_checked(tmp_path: Path) -> None:
    data = merged(
        GPU_RECIPE,
        base={"image": "nvcr.io/nvidia/tensorflow:22.12-tf2-py3"},
        tensorflow={"version": "2.10.1", "source": "image"},
        pytorch={"version": "1.13.1", "source": "image"},
        nccl=None,
    )
    recipe = recipe_of(tmp_path, data)
    assert instructions(text_of(tensorflow.render(recipe))) == [
        "RUN python3 -c 'import tensorflow; v = tensorflow.__version__; "
        'assert v.startswith("2.10.1"), "tensorflow " + v + " is not 2.10.1"\''
    ]
    check = instructions(text_of(pytorch.render(recipe)))[0]
    assert check.startswith("RUN python3 -c 'import torch; v = torch.__version__; ")
    assert "hvd-pip" not in text_of(pytorch.render(recipe)) + text_of(tensorflow.render(recipe))
    code = check[len("RUN python3 -c '") : -1]
    fake = tmp_path / "torch.py"
    fake.write_text('__version__ = "1.13.1+cu117"\n')
    ok = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True)
    assert ok.returncode == 0
    fake.write_text('__version__ = "2.0.0"\n')
    bad = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert bad.returncode != 0 and "torch 2.0.0 is not 1.13.1" in bad.stderr


SITE = "/opt/venv/lib/python3.11/site-packages"


def test_gpu_wheels_are_locked_at_the_recipe_versions(tmp_path: Path) -> None:
    recipe = recipe_of(tmp_path, WHEELS_RECIPE)
    assert gpu_wheels.requirements(recipe) == [
        "cuda-toolkit[cccl,cudart,nvcc]==13.0.*",
        "nvidia-nccl-cu13==2.30.7",
    ]
    patch = merged(WHEELS_RECIPE, cuda={"version": "13.0.3", "source": "pip"})
    assert gpu_wheels.requirements(recipe_of(tmp_path, patch))[0].endswith("==13.0.3")


def test_gpu_wheels_give_the_toolkit_layout(tmp_path: Path) -> None:
    recipe = recipe_of(tmp_path, WHEELS_RECIPE)
    text = text_of(gpu_wheels.render(recipe))
    cu = f"{SITE}/nvidia/cu13"
    for step in (
        f"test -x {cu}/bin/nvcc",
        f"ln -s lib {cu}/lib64",
        f"ln -s libcudart.so.13 {cu}/lib/libcudart.so",
        f"ln -s {cu} /usr/local/cuda",
        f"ln -s libnccl.so.2 {SITE}/nvidia/nccl/lib/libnccl.so",
        "ldconfig",
    ):
        assert step in text
    assert "ENV PATH=/usr/local/cuda/bin:$PATH" in text
    # the apt/image blocks stand aside; the wheels come after the lock installed them
    assert cuda.render(recipe) is None and nccl.render(recipe) is None
    names = [name for name, _ in BLOCKS]
    assert names.index("locked") < names.index("gpu_wheels") < names.index("horovod")
    assert gpu_wheels.render(recipe_of(tmp_path, CPU_RECIPE)) is None


def test_cuda_12_wheels_get_the_unversioned_libcudart_on_the_loaders_path(tmp_path: Path) -> None:
    """CUDA 12's wheels bring the runtime only (nvidia/cuda_runtime/lib/libcudart.so.12, the
    layout of nvidia-cuda-runtime-cu12 12.8.90): the block links libcudart.so there and puts the
    folder on the loader's path, for a dynamically linked NCCL plugin (CSCS's Container Engine)."""
    text = text_of(gpu_wheels.render(load_recipe("gpu-bookworm-torch-cu12")))
    lib = f"{SITE}/nvidia/cuda_runtime/lib"
    assert f"test -f {lib}/libcudart.so.12" in text
    assert f"ln -s libcudart.so.12 {lib}/libcudart.so" in text
    assert f"printf '%s\\n' {lib} {SITE}/nvidia/nccl/lib > /etc/ld.so.conf.d/" in text
    assert "nvcc" not in text and "/usr/local/cuda" not in text


def test_horovod_builds_against_the_wheels_nccl_without_stubs(tmp_path: Path) -> None:
    recipe = recipe_of(tmp_path, WHEELS_RECIPE)
    flags = horovod.build_env(recipe)
    assert flags["HOROVOD_NCCL_HOME"] == f"{SITE}/nvidia/nccl"
    assert flags["HOROVOD_BUILD_CUDA_CC_LIST"] == "80,90"
    assert flags["HOROVOD_NCCL_LINK"] == "SHARED"
    assert "lib64/stubs" not in text_of(horovod.render(recipe))


@pytest.mark.parametrize("before", ["14", "17"])
def test_cxx20_patch_rewrites_horovods_cmake_files(tmp_path: Path, before: str) -> None:
    for name in horovod_patches.CXX_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"project(x)\nset(CMAKE_CXX_STANDARD {before})\n")
    script = " && ".join(horovod_patches.commands("cxx20"))
    subprocess.run(["sh", "-ec", script], cwd=tmp_path, check=True)
    for name in horovod_patches.CXX_FILES:
        assert "set(CMAKE_CXX_STANDARD 20)" in (tmp_path / name).read_text()


def test_cxx20_patch_fails_when_a_file_keeps_its_old_standard(tmp_path: Path) -> None:
    for name in horovod_patches.CXX_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        # spelled differently upstream: the sed misses it, the check must fail the build
        (tmp_path / name).write_text("set( CMAKE_CXX_STANDARD 14 )\nCMAKE_CXX_STANDARD 14\n")
    script = " && ".join(horovod_patches.commands("cxx20"))
    assert subprocess.run(["sh", "-ec", script], cwd=tmp_path).returncode != 0


def test_every_release_up_to_0_28_1_gets_the_gcc13_patch(tmp_path: Path) -> None:
    assert horovod_patches.needed("0.28.1") == ["gcc13"]
    assert horovod_patches.needed("0.27.0") == ["gcc13"]
    assert horovod_patches.needed("0.29.0") == []
    hvd = dict(CPU_RECIPE["horovod"], patches=["gcc13", "cxx17"])
    recipe = recipe_of(tmp_path, merged(CPU_RECIPE, horovod=hvd))
    assert horovod.patches(recipe) == ["gcc13", "cxx17"]  # listed once, in the recipe's order


# flatbuffers 2.0's span as Horovod vendors it: a const member that operator= assigns (GCC 14
# refuses it even where nothing instantiates the operator; here the use instantiates it)
SPAN = """\
template <class T> class span {
 public:
  typedef unsigned long size_type;
  span(T *p, size_type n) : data_(p), count_(n) {}
  span &operator=(const span &other) {
    data_ = other.data_;
    count_ = other.count_;
    return *this;
  }
 private:
  T *data_;
  const size_type count_;
};
int main() { int a[2]; span<int> x(a, 2), y(a, 1); x = y; }
"""


def gcc13_tree(root: Path, header: str) -> None:
    (root / "horovod" / "common").mkdir(parents=True)
    for name in horovod_patches.GCC13_FILES:
        (root / name).write_text(header)
    (root / horovod_patches.FLATBUFFERS_SPAN).parent.mkdir(parents=True)
    (root / horovod_patches.FLATBUFFERS_SPAN).write_text(SPAN)


def test_gcc13_patch_makes_horovods_headers_compile_alone(tmp_path: Path) -> None:
    """The headers as 0.28.1 ships them (std::string without <string>), compiled alone: the
    patch must give them what GCC 13's libstdc++ no longer includes transitively, and make the
    vendored span's assignment compile."""
    header = "#ifndef X\n#define X\n#include <vector>\nstd::string name;\nstd::uint8_t b;\n#endif\n"
    gcc13_tree(tmp_path, header)
    span = ["g++", "-std=c++17", "-fsyntax-only", "-x", "c++", horovod_patches.FLATBUFFERS_SPAN]
    assert subprocess.run(span, cwd=tmp_path, capture_output=True).returncode != 0
    script = " && ".join(horovod_patches.commands("gcc13"))
    subprocess.run(["sh", "-ec", script], cwd=tmp_path, check=True)
    for name in horovod_patches.GCC13_FILES:
        text = (tmp_path / name).read_text()
        assert text.index("#include <string>") < text.index("#include <vector>")
        assert text.count("#include <string>") == 1  # the first #include only
        compiled = subprocess.run(
            ["g++", "-std=c++17", "-fsyntax-only", "-x", "c++", name], cwd=tmp_path
        )
        assert compiled.returncode == 0
    assert subprocess.run(span, cwd=tmp_path).returncode == 0


def test_gcc13_patch_fails_when_a_file_has_no_include(tmp_path: Path) -> None:
    gcc13_tree(tmp_path, "// moved upstream\n")
    script = " && ".join(horovod_patches.commands("gcc13"))
    assert subprocess.run(["sh", "-ec", script], cwd=tmp_path).returncode != 0


def test_mpich_wheel_is_locked_and_made_findable(tmp_path: Path) -> None:
    data = merged(
        CPU_RECIPE, mpi={"flavor": "mpich", "version": "5.0.2", "source": "pip", "pmi": ["pmi2"]}
    )
    recipe = recipe_of(tmp_path, data)
    assert mpi_wheel.requirements(recipe) == ["mpich==5.0.2"]
    assert mpi.render(recipe) is None  # no apt packages, no check before the lock installed it
    text = text_of(mpi_wheel.render(recipe))
    assert "test -f /opt/venv/lib/libmpi.so.12" in text  # the MPICH ABI soname Cray MPICH replaces
    assert "echo /opt/venv/lib > /etc/ld.so.conf.d/hvd-mpi-wheel.conf" in text
    assert "mpicc -show" in text
    assert mpi_wheel.render(recipe_of(tmp_path, CPU_RECIPE)) is None
