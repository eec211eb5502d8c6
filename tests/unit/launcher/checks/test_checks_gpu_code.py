"""The image's GPU code against the partition's GPUs, and known-bad library versions: what a
job would otherwise find only at its first kernel, after the queue wait."""

from __future__ import annotations

import pytest
from hvd_container.containers.recipe_loader import read_recipe
from hvd_container.launcher.checks.registry import CUDA_12_RECIPE, runs_on
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.sites.loader import load_site

from hvd_container.facts import (
    HOROVOD_CUDA_CC,
    TORCH_CUDA_ARCHS,
    VERSIONS,
    ImageFacts,
    facts_from_labels,
    verified_labels,
)

NEURON = {"comment": "field=ai;appl=pytorch", "nodes": 1}


def verdict(facts: ImageFacts, partition: str, check: str = "gpu-arch") -> tuple[str, str]:
    request = LaunchRequest(
        script="t.py", image="x.sif", partition=partition, facts=facts, **NEURON
    )  # type: ignore[arg-type]
    from hvd_container.launcher.plan.planner import plan

    launch = plan(load_site("neuron"), request, dry_run=True, keep_going=True)
    found = {r.check: r for r in launch.results}[check]
    return found.status, found.message


def image(**facts: object) -> ImageFacts:
    return ImageFacts(source="image x.sif", arch="amd64", gpu=True, **facts)  # type: ignore[arg-type]


def test_a_cuda_13_image_on_v100_fails_with_the_fix() -> None:
    status, message = verdict(image(cuda="13.0"), "cas_v100_4")
    assert status == "fail"
    assert "CUDA 13.0, which dropped GPUs below compute capability 7.5" in message
    assert "V100 (7.0)" in message and "use an image with CUDA 12 (the built-in recipe " in message
    # the recipe named is a built-in of CUDA 12 whose torch has Volta's kernels
    assert "--recipe gpu-bookworm-torch-cu12, kernels from sm_70" in message
    twin = read_recipe(CUDA_12_RECIPE)
    assert twin.cuda is not None and twin.cuda.version.startswith("12.")
    assert any("sm_70" in check for check in twin.checks)
    assert verdict(image(cuda="12.4"), "cas_v100_4")[0] != "fail"
    assert verdict(image(cuda="13.0"), "amd_a100_4")[0] != "fail"


@pytest.mark.parametrize(
    ("cuda_cc", "partition", "status"),
    [
        (("80", "90"), "amd_a100_4", "pass"),
        (("90",), "amd_a100_4", "fail"),  # sm_90 and compute_90 PTX: nothing for an A100
        (("80",), "amd_h100_2", "pass"),  # compute_80 PTX, compiled by the driver for sm_90
        (("70",), "amd_h100_2", "pass"),
    ],
)
def test_horovods_compute_capabilities_against_the_partition(
    cuda_cc: tuple[str, ...], partition: str, status: str
) -> None:
    got, message = verdict(image(cuda="12.4", horovod_cuda_cc=cuda_cc), partition)
    assert got == status, message
    if status == "fail":
        assert "horovod carries GPU code for sm_90, compute_90" in message and "rebuild" in message


def test_torchs_arch_list_against_the_partition() -> None:
    # what verify's probe printed for torch 2.11.0+cu130 on the H200 machine (no PTX in it)
    cu13 = ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
    assert verdict(image(cuda="13.0", torch_cuda_archs=cu13), "amd_h200nv_8")[0] == "pass"
    only_hopper = ("sm_90",)
    status, message = verdict(image(cuda="12.4", torch_cuda_archs=only_hopper), "amd_a100_4")
    assert status == "fail" and "torch carries GPU code for sm_90" in message


def test_unknown_gpu_code_or_gpus_are_not_judged() -> None:
    assert verdict(image(cuda="12.4"), "amd_a100_4")[0] == "skip"
    # a site whose profile gives no GPU model (Perlmutter's without its scheduler.gpu)
    from hvd_container.launcher.plan.planner import plan

    site = load_site("perlmutter")
    site = site.model_copy(
        update={"scheduler": site.scheduler.model_copy(update={"gpu": None, "gpu_cc": None})}
    )
    request = LaunchRequest(script="t.py", image="u/i:t", facts=image(cuda="13.0"), nodes=1,
                            account="m_g")  # fmt: skip
    launch = plan(site, request, dry_run=True, keep_going=True)
    found = {r.check: r for r in launch.results}["gpu-arch"]
    assert found.status == "skip" and "are not known" in found.message


def test_runs_on_follows_cuda_compatibility() -> None:
    assert runs_on(("sm_80",), "86")  # same major, older minor
    assert not runs_on(("sm_86",), "80")
    assert not runs_on(("sm_80",), "90")  # machine code does not cross majors
    assert runs_on(("compute_80",), "90")  # PTX does, upwards
    assert not runs_on(("compute_90",), "80")
    assert runs_on(("sm_90a",), "90")


def test_a_known_bad_nccl_is_warned_with_the_fix() -> None:
    status, message = verdict(image(cuda="13.0", nccl="2.28.9"), "amd_h200nv_8", "known-bad")
    assert status == "warn" and "nccl 2.28.9, known-bad" in message and "2.29.7" in message
    assert verdict(image(cuda="13.0", nccl="2.30.7"), "amd_h200nv_8", "known-bad")[0] == "pass"
    assert verdict(image(cuda="13.0"), "amd_h200nv_8", "known-bad")[0] == "skip"


def test_the_gpu_facts_travel_as_labels() -> None:
    labels = verified_labels(
        arch="amd64", horovod=None, versions={"nccl": "2.28.9", "cuda": "13.0", "python": "3.12"},
        ok=True, torch_cuda_archs=["sm_80", "sm_90", "compute_90"],
    )  # fmt: skip
    assert (
        labels[VERSIONS + "nccl"] == "2.28.9"
        and labels[TORCH_CUDA_ARCHS] == "sm_80,sm_90,compute_90"
    )
    facts = facts_from_labels({**labels, HOROVOD_CUDA_CC: "80,90"}, "image x.sif")
    assert facts is not None
    assert facts.nccl == "2.28.9" and facts.torch_cuda_archs == ("sm_80", "sm_90", "compute_90")
    assert facts.gpu_code()[1] == ("horovod", ("sm_80", "sm_90", "compute_90"))


def test_the_recipe_says_its_nccl_and_horovods_compute_capabilities() -> None:
    from hvd_container.containers.recipe_loader import load_recipe

    from hvd_container.facts import facts_from_recipe

    facts = facts_from_recipe(load_recipe("gpu-bookworm"))
    assert facts.nccl == "2.30.7" and facts.horovod_cuda_cc == ("80", "90")


def test_verify_records_what_its_probe_printed_on_a_gpu_machine() -> None:
    """The probe's line from the H200 machine, run there with CUDA_VISIBLE_DEVICES empty (the
    same line as with the GPU: the flags and NCCL are known without one)."""
    from hvd_container.containers.verify import VerifyResult, fact_labels, parse_versions

    line = (
        'HVD-VERSIONS {"python": "3.12.3", "glibc": "2.39", "torch": "2.11.0", "cuda": "13.0", '
        '"torch.cuda_archs": "sm_75,sm_80,sm_86,sm_90,sm_100,sm_120", "nccl": "2.28.9", '
        '"torch.distributed": "gloo,nccl", "mpi": "mpirun (Open MPI) 4.1.6"}'
    )
    result = VerifyResult("x", None, parse_versions(line), "amd64")
    labels = fact_labels(result, None)
    facts = facts_from_labels(labels, "image x")
    assert facts is not None and facts.nccl == "2.28.9" and facts.torch_backends == ("gloo", "nccl")
    assert facts.torch_cuda_archs == ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
    assert verdict(facts, "cas_v100_4")[0] == "fail"  # CUDA 13, and no sm_70 either
    assert verdict(facts, "amd_h200nv_8", "known-bad")[0] == "warn"


def test_a_site_without_partitions_names_its_gpu_so_the_images_code_is_judged() -> None:
    """Perlmutter has no partitions of its own: gpu-arch skipped every image there."""
    site = load_site("perlmutter")
    assert site.scheduler.gpu_model(None) == ("A100", "80")
    request = LaunchRequest(script="t.py", image="u/i:t", nodes=1, account="m1_g",
                            facts=image(cuda="12.4", torch_cuda_archs=("sm_90",)))  # fmt: skip
    from hvd_container.launcher.plan.planner import plan

    launch = plan(site, request, "run", dry_run=True, keep_going=True)
    (found,) = [r for r in launch.results if r.check == "gpu-arch"]
    assert found.status == "fail" and "site perlmutter's A100 (sm_80)" in found.message
