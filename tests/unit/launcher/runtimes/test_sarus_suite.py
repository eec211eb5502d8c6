"""CSCS's Sarus Suite (launcher/runtimes/sarus_suite.py): the EDF a launch writes, checked
against raster's EDF schema and the suite's own example (Skybox and Podman cannot run here: a
STAND-IN for them is the TOML parser plus raster's documented keys and mount grammar), the
srun line that names it, and the batch script that writes it, run by bash."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import tomllib
from _launch_helpers import isolated, job_dir, plan_launch, write  # noqa: F401
from hvd_container.launcher import runtimes
from hvd_container.launcher.checks.registry import run_checks
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.runtimes.sarus_suite import edf_problems, registry_ref
from hvd_container.launcher.sites import probe
from hvd_container.launcher.sites.loader import load_site

from hvd_container.core.errors import UserError

# The EDF of the suite's own pages (sarus-suite.github.io, "Why EDF?", as of 2026-11)
SUITE_EXAMPLE = """
image = "ghcr.io/cscs/ml-workflows/transformers:latest-arm64"

mounts = [
  "/scratch/$USER/hf-models:/opt/hf",
  "/scratch/$USER/data:/data",
  "/scratch/$USER/output:/output"
]

workdir = "/scratch/$USER"
entrypoint = false

devices = ["nvidia.com/gpu=all"]

[env]
HUGGINGFACE_HUB_CACHE = "/opt/hf/hub"
TRANSFORMERS_CACHE = "/opt/hf/transformers"

[annotations]
com.hooks.cxi.enabled = "true"
com.hooks.aws_ofi_nccl.enabled = "true"
com.hooks.aws_ofi_nccl.variant = "cuda12"
com.hooks.nvidia_cuda_mps.enabled = "true"
"""


def test_the_suites_own_edf_example_passes_the_check() -> None:
    assert edf_problems(tomllib.loads(SUITE_EXAMPLE)) == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('image = "a"\nenvironment = "b"\n', "unknown key 'environment' (allowed: annotations,"),
        ("devices = 'nvidia.com/gpu=all'\n", "devices: a str, expected list"),
        ('mounts = ["/capstor"]\n', "mounts: '/capstor' is not SOURCE:DESTINATION[:FLAGS]"),
        ('mounts = ["/a:data"]\n', "mounts: '/a:data' is not SOURCE:DESTINATION[:FLAGS]"),
    ],
)
def test_what_raster_would_not_take_is_named(text: str, problem: str) -> None:
    (found,) = edf_problems(tomllib.loads(text))
    assert found.startswith(problem), found


def _plan(mode: str = "run", site: str = "cscs-clariden", **fields: Any) -> Any:
    fields = {"script": "train.py", "account": "a", "runtime": "sarus-suite", **fields}
    return plan_launch(load_site(site), LaunchRequest(**fields), mode)


@pytest.mark.usefixtures("job_dir")
def test_the_launch_names_its_edf_on_the_srun_line_and_the_edf_says_the_rest() -> None:
    planned = _plan(image="registry.example.org/team/ddp:1", nodes=2, ntasks_per_node=4)
    ((path, text),) = planned.files.items()
    assert path.startswith("/home/u/job/.hvd-container/edf-") and path.endswith(".toml")
    assert f"--edf={path}" in planned.step  # absolute: raster reads it, no search path
    assert not any("ddp" in word for word in planned.step)
    edf = tomllib.loads(text)
    assert edf_problems(edf) == []
    assert edf["image"] == "registry.example.org/team/ddp:1"  # as Podman pulls it: no '#'
    assert edf["devices"] == ["nvidia.com/gpu=all"]
    assert edf["mounts"] == ["/home/u/job:/home/u/job"] and edf["workdir"] == "/home/u/job"
    assert edf["annotations"] == {
        "com": {
            "hooks": {
                "cxi": {"enabled": "true"},
                "aws_ofi_nccl": {"enabled": "true", "variant": "cuda12"},
            }
        }
    }
    assert edf["env"] == {"PMIX_MCA_psec": "^munge"}  # the site's, as the CE's EDF has it
    assert "--edf" not in "".join(planned.allocation)


@pytest.mark.usefixtures("job_dir")
def test_every_dollar_but_the_images_is_literal_to_raster() -> None:
    """raster expands $VAR (shellexpand: `$$` is a `$`) in mounts, workdir, env, annotations
    and devices, not in image: a value given with a `$` reaches the container as written."""
    planned = _plan(
        image="registry.example.org/team/ddp:1",
        nodes=1,
        binds=["/capstor/${USER}/d:/data"],
        env={"TOKEN": "a$b${HOME}"},
    )
    edf = tomllib.loads(next(iter(planned.files.values())))
    assert edf["env"]["TOKEN"] == "a$$b$${HOME}"
    assert "/capstor/$${USER}/d:/data" in edf["mounts"]
    assert edf["image"] == "registry.example.org/team/ddp:1"


@pytest.mark.parametrize(
    ("ref", "pulled"),
    [
        ("ddp:1", "docker.io/library/ddp:1"),
        ("team/ddp:1", "docker.io/team/ddp:1"),
        ("docker://team/ddp:1", "docker.io/team/ddp:1"),
        ("localhost:5000/team/ddp:1", "localhost:5000/team/ddp:1"),
        ("ghcr.io/team/ddp@sha256:" + "a" * 64, "ghcr.io/team/ddp@sha256:" + "a" * 64),
    ],
)
def test_a_name_without_a_registry_is_spelled_out_for_podman(ref: str, pulled: str) -> None:
    assert registry_ref(ref) == pulled


def test_a_file_is_refused_with_what_the_suite_runs(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "train.py", "")
    write(tmp_path / "ddp.sqsh", "")
    with pytest.raises(UserError, match=r"Sarus Suite runs registry images .*not files: `hvd-container push IMAGE`"):  # fmt: skip
        _plan(image="ddp.sqsh", nodes=1)


@pytest.mark.usefixtures("job_dir")
def test_without_gpus_the_edf_names_no_device_and_the_check_says_so(tmp_path: Path) -> None:
    site = write(
        tmp_path / "alps.yaml",
        "extends: cscs-clariden\nname: alps\nruntime: {kind: sarus-suite, gpu: false, cxi: false, aws_ofi_nccl: none}\n",
    )
    request = LaunchRequest(script="train.py", image="r.example.org/t/i:1", nodes=1, account="a")
    planned = plan_launch(load_site(str(site)), request)
    edf = tomllib.loads(next(iter(planned.files.values())))
    assert "devices" not in edf and "annotations" not in edf
    (result,) = [r for r in planned.results if r.check == "runtime-gpu"]
    assert result.status == "warn" and "sarus-suite runs without GPUs (gpu: false" in result.message


def test_nccl_forced_without_the_hook_is_refused(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "train.py", "")
    site = write(
        tmp_path / "alps.yaml",
        "extends: cscs-clariden\nname: alps\nruntime: {kind: sarus-suite, aws_ofi_nccl: none}\n",
    )
    request = LaunchRequest(
        script="train.py", image="r.example.org/t/i:1", nodes=2, account="a",
        env={"NCCL_NET": "AWS Libfabric"},
    )  # fmt: skip
    with pytest.raises(UserError, match=r"NCCL_NET='AWS Libfabric' is forced but the EDF switches no AWS OFI NCCL hook on \(aws_ofi_nccl: none in the sarus-suite runtime"):  # fmt: skip
        plan_launch(load_site(str(site)), request)


def _gpu_facts(cuda: str | None) -> Any:
    from hvd_container.facts import ImageFacts

    return ImageFacts(source="recipe g", name="g", version="1", arch="arm64", cuda=cuda)


@pytest.mark.parametrize(
    ("variant", "cuda", "said"),
    [
        ("cuda12", "12.8", "pass"),
        ("cuda13", "13.0", "pass"),
        ("cuda12", "13.0", "set aws_ofi_nccl: cuda13 in the sarus-suite runtime of site alps"),
        ("cuda12", "11.8", "no variant for the image's CUDA 11.8 (it has cuda12, cuda13)"),
        ("cuda12", None, "skip"),
        ("cuda12", "", "n/a"),
    ],
)
def test_the_hook_must_suit_the_images_cuda(
    tmp_path: Path, monkeypatch: Any, variant: str, cuda: str | None, said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "train.py", "")
    site = write(
        tmp_path / "alps.yaml",
        f"extends: cscs-clariden\nname: alps\nruntime: {{kind: sarus-suite, aws_ofi_nccl: {variant}}}\n",
    )
    request = LaunchRequest(
        script="train.py", facts=_gpu_facts(cuda), image="r.example.org/t/g:1", nodes=1, account="a"
    )
    if said in ("pass", "skip", "n/a"):
        planned = plan_launch(load_site(str(site)), request)
        (result,) = [r for r in planned.results if r.check == "sarus-nccl-hook"]
        assert result.status == said, result
        # the Container Engine's checks are its own: none judges a Sarus Suite launch, and
        # doctor, which lists every check, says they do not apply
        assert [r for r in planned.results if r.check.startswith("ce-")] == []
        every = run_checks(planned.launch, every=True)
        ce = [r for r in every if r.check.startswith("ce-")]
        assert ce and {(r.status, r.message) for r in ce} == {
            ("n/a", "not for runtime sarus-suite")
        }
        return
    with pytest.raises(UserError, match=said.replace("(", r"\(").replace(")", r"\)")):
        plan_launch(load_site(str(site)), request)


def test_the_batch_script_writes_the_edf_its_step_reads(tmp_path: Path, monkeypatch: Any) -> None:
    """bash runs the script's file lines: the EDF lands byte for byte, owner-only."""
    job = tmp_path / "job"
    write(job / "train.py", "")
    monkeypatch.chdir(job)
    planned = _plan(image="registry.example.org/team/ddp:1", nodes=2, mode="batch")
    ((path, text),) = planned.files.items()
    assert not Path(path).exists()  # a dry run makes nothing
    script = planned.script
    start = script.index("(umask 077")
    end = script.index("HVD_FILE_END\n", script.index("<<'HVD_FILE_END'")) + len("HVD_FILE_END\n")
    subprocess.run(["bash", "-c", script[start:end]], check=True, cwd=job)
    assert Path(path).read_text() == text
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert f"--edf={path}" in script


def test_a_profile_names_it_and_its_keys_are_checked(tmp_path: Path, isolated: Path) -> None:  # noqa: F811
    good = write(
        tmp_path / "alps.yaml",
        "extends: cscs-clariden\nname: alps\nruntime: {kind: sarus-suite, aws_ofi_nccl: cuda13}\n",
    )
    assert load_site(str(good)).runtime.kind == "sarus-suite"
    bad = write(
        tmp_path / "bad.yaml",
        "extends: cscs-clariden\nname: bad\nruntime: {kind: sarus-suite, aws_ofi_nccl: cuda-dl}\n",
    )
    with pytest.raises(UserError, match=r"bad.yaml:3: .*aws_ofi_nccl"):
        load_site(str(bad))


def test_sites_probe_finds_it_by_skyboxs_srun_option(tmp_path: Path, monkeypatch: Any) -> None:
    """Skybox registers --edf with srun, and `srun --help` lists a SPANK plugin's options: a
    STAND-IN srun prints the lines Alps's would (Pyxis's, the CE's and Skybox's options)."""
    fake = write(
        tmp_path / "bin" / "srun",
        "#!/bin/sh\n# STAND-IN for srun --help on a login node with three SPANK plugins\n"
        "cat <<'EOF'\nUsage: srun [OPTIONS(0)... [executable(0) [args(0)...]]]\n"
        "      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH  [pyxis] the image\n"
        "      --environment=PATH      [edf] the Environment Definition File\n"
        "      --edf=PATH              [skybox] the path to the Environment Definition File to use.\n"
        "EOF\n",
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    found = probe.SiteProbe(host="h", date="2026-11-28")
    probe._runtimes(found, timeout=10)
    assert found.runtimes["sarus-suite"] == "srun --edf"
    assert {"pyxis", "container-engine"} <= set(found.runtimes)
    # a new profile takes the found runtime of lowest rank: the CE, CSCS's default, first
    kinds = [kind for kind, _ in runtimes.findable()]
    assert kinds.index("container-engine") < kinds.index("sarus-suite")
