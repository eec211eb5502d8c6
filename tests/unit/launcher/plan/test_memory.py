"""The memory a launch asks for (launcher/plan/memory.py) and the memory check: --mem and
--mem-per-gpu as given, the node's share where a site's default is too small for a training
rank (ZIH: 300 MB per CPU), nothing where the job has whole nodes, refusals with the fix."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from _launch_helpers import plan_launch, write
from hvd_container.launcher import guard
from hvd_container.launcher.plan.memory import RANK_NEEDS_MB
from hvd_container.launcher.plan.request import (
    LaunchOptions,
    LaunchRequest,
    request_from_options,
    run_options,
)
from hvd_container.launcher.sites.loader import BUILTIN_DIR, load_site
from hvd_container.launcher.sites.model import Site
from hvd_container.launcher.slurm import slurm_megabytes

from hvd_container.core.errors import UserError


@pytest.fixture(autouse=True)
def job_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "x.sif", "")
    write(tmp_path / "train.py", "import torch.distributed as dist\ndist.init_process_group()\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("USER", "u")


def plan(site: str | Site, **fields: Any) -> Any:
    profile = load_site(site) if isinstance(site, str) else site
    return plan_launch(profile, LaunchRequest(**{"script": "train.py", "image": "x.sif", **fields}))


def memory_result(result: Any) -> Any:
    (found,) = [r for r in result.results if r.check == "memory"]
    return found


def sbatch_lines(result: Any) -> list[str]:
    return [line for line in (result.script or "").splitlines() if line.startswith("#SBATCH")]


@pytest.mark.parametrize(
    ("value", "megabytes"),
    [
        ("300", 300),
        ("300M", 300),
        ("64G", 65536),
        ("64g", 65536),
        ("1T", 1048576),
        ("1500K", 2),
        ("0", 0),
    ],
)
def test_sizes_are_read_as_slurm_reads_them(value: str, megabytes: int) -> None:
    assert slurm_megabytes(value) == megabytes


def test_zih_full_node_asks_for_the_nodes_memory_with_the_reason() -> None:
    """ZIH's default, 300 MB per CPU, gives a full Alpha node's 8 ranks 12 GB (1.5 GB a rank):
    the job was killed for memory. The node's memory is written, the reason under it."""
    result = plan("zih-alpha", nodes=1, ntasks_per_node=8)
    assert "#SBATCH --mem=990000M" in sbatch_lines(result)
    lines = (result.script or "").splitlines()
    reason = lines[lines.index("#SBATCH --mem=990000M") + 1]
    assert reason.startswith("# (site zih-alpha's default (scheduler.memory: 300M per CPU)")
    assert "1500M a rank" in reason and "for 8 of its 8 GPUs (990000M)" in reason
    check = memory_result(result)
    assert check.status == "pass" and "unconfirmed" in check.message, check


def test_zih_two_gpus_ask_for_their_share_of_the_node() -> None:
    result = plan("zih-alpha", nodes=1, ntasks_per_node=2)
    assert f"#SBATCH --mem={990000 * 2 // 8}M" in sbatch_lines(result)


def test_a_given_memory_is_written_as_given_without_a_reason() -> None:
    for fields, line in (
        ({"mem": "200G"}, "#SBATCH --mem=200G"),
        ({"mem_per_gpu": "100G"}, "#SBATCH --mem-per-gpu=100G"),
    ):
        result = plan("zih-alpha", nodes=1, ntasks_per_node=8, **fields)
        assert line in sbatch_lines(result)
        assert [x for x in sbatch_lines(result) if x.startswith("#SBATCH --mem")] == [line]
        assert memory_result(result).message.endswith("as given")


def test_too_little_memory_a_rank_is_warned() -> None:
    result = plan("zih-alpha", nodes=1, ntasks_per_node=8, mem="16G")
    check = memory_result(result)
    assert check.status == "warn"
    assert (
        f"--mem=16G gives a node's ranks 2048M each, less than the {RANK_NEEDS_MB}M"
        in check.message
    )


def test_more_than_a_node_has_is_refused_where_the_fact_is_confirmed(tmp_path: Path) -> None:
    """ZIH's node memory is unconfirmed: a warning; a profile whose source is confirmed
    refuses it at once, with the most a node gives."""
    unconfirmed = memory_result(plan("zih-alpha", nodes=1, ntasks_per_node=8, mem="2T"))
    assert unconfirmed.status == "warn" and "unconfirmed" in unconfirmed.message
    site = load_site(BUILTIN_DIR / "zih-alpha.yaml")
    confirmed = site.model_copy(update={"sources": []})
    with pytest.raises(UserError, match=r"^--mem=2T asks for 2097152M a node, but a node of "
                       r"partition alpha gives a job at most 990000M: ask for less"):  # fmt: skip
        plan(confirmed, nodes=1, ntasks_per_node=8, mem="2T")
    per_gpu = memory_result(plan(site, nodes=1, ntasks_per_node=8, mem_per_gpu="200G"))
    assert "asks for 1638400M a node" in per_gpu.message


def test_a_site_that_takes_no_memory_request_refuses_mem() -> None:
    """KISTI Neuron: --mem is not allowed (memory comes with the GPUs)."""
    comment = "field=ai;appl=pytorch"
    with pytest.raises(UserError, match=r"^--mem: partition amd_a100nv_8 takes no memory request"):
        plan("neuron", nodes=1, ntasks_per_node=2, mem="40G", comment=comment)
    result = plan("neuron", nodes=1, ntasks_per_node=2, comment=comment)
    assert not [x for x in sbatch_lines(result) if x.startswith("#SBATCH --mem")]
    assert memory_result(result).status == "pass"


@pytest.mark.parametrize("name", sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml")))
def test_every_built_in_site_states_its_memory_facts_with_a_source(name: str) -> None:
    site = load_site(name)
    facts = [site.scheduler.memory, *(p.memory for p in site.scheduler.partitions.values())]
    assert any(f is not None for f in facts), f"{name}: no scheduler.memory"
    about = [s for s in site.sources if "memory" in s.about or "--mem" in s.about]
    assert about or name == "local", f"{name}: no source says its memory facts"


def test_whole_node_sites_write_no_memory_and_say_so() -> None:
    for name, image in (("cscs-daint", "u/x:1"), ("jupiter", "x.sif"), ("perlmutter", "u/x:1")):
        extra = {"account": "a1"}
        result = plan(name, image=image, nodes=2, **extra)
        assert not [x for x in sbatch_lines(result) if x.startswith("#SBATCH --mem")], name
        check = memory_result(result)
        assert (check.status, check.message) == ("pass", "the job gets all the memory of its nodes")


def test_a_site_without_memory_facts_is_not_judged(tmp_path: Path) -> None:
    site = load_site("zih-alpha")
    site = site.model_copy(update={"scheduler": site.scheduler.model_copy(update={"memory": None})})
    result = plan(site, nodes=1, ntasks_per_node=8)
    assert not [x for x in sbatch_lines(result) if x.startswith("#SBATCH --mem")]
    check = memory_result(result)
    assert check.status == "skip" and "states no memory facts" in check.message


def test_without_the_nodes_memory_a_rank_gets_what_it_needs(tmp_path: Path) -> None:
    site = load_site("zih-alpha")
    memory = site.scheduler.memory.model_copy(update={"per_node": None})  # type: ignore[union-attr]
    site = site.model_copy(
        update={"scheduler": site.scheduler.model_copy(update={"memory": memory})}
    )
    result = plan(site, nodes=1, ntasks_per_node=4)
    assert f"#SBATCH --mem={4 * RANK_NEEDS_MB}M" in sbatch_lines(result)


def test_inside_an_allocation_the_step_takes_the_jobs_memory_or_the_given_one() -> None:
    result = plan("zih-alpha", nodes=1, ntasks_per_node=8, inside_allocation=True)
    assert not [w for w in result.step if w.startswith("--mem")]
    given = plan("zih-alpha", nodes=1, ntasks_per_node=8, inside_allocation=True, mem="64G")
    assert "--mem=64G" in given.step


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mem": "4G", "mem_per_gpu": "2G"}, "--mem and --mem-per-gpu: give one of them"),
        (
            {"mem": "4 G"},
            "--mem: '4 G' is not a memory size as Slurm writes it (allowed: megabytes",
        ),
        ({"mem": "4GB"}, "--mem: '4GB' is not a memory size"),
        ({"mem_per_gpu": "0"}, "--mem-per-gpu: must be more than 0"),
        ({"mem": "-1"}, "--mem: '-1' is not a memory size"),
    ],
)
def test_bad_memory_is_one_line_naming_the_flag(options: dict[str, str], message: str) -> None:
    site, request = request_from_options(
        "train.py", [], LaunchOptions(site="local", image="x.sif", **options)
    )
    with pytest.raises(UserError) as info:
        plan_launch(site, request)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_a_batch_job_that_restarts_asks_for_the_same_memory_again() -> None:
    """run_options (the job's own `run` line under --until-done) carries --mem."""
    request = LaunchRequest(script="train.py", mem="64G")
    assert "--mem=64G" in run_options(request, "zih-alpha")
    request = LaunchRequest(script="train.py", mem_per_gpu="8G")
    assert "--mem-per-gpu=8G" in run_options(request, "zih-alpha")


def test_slurms_memory_options_are_the_tools_own() -> None:
    """--mem, --mem-per-gpu and --mem-per-cpu through --sbatch-option (or a profile) would sit
    beside the tool's own (Slurm refuses two of them): each is refused with the flag to use."""
    for name, use in (
        ("mem", "--mem"),
        ("mem-per-gpu", "--mem-per-gpu"),
        ("mem-per-cpu", "--mem or"),
    ):
        refused = guard.slurm_entry_refusal(f"--{name}=4G", "sbatch")
        assert refused is not None and re.search(f"is set by the tool: use its {use}", refused.why)


def test_a_share_below_the_default_is_not_asked_for() -> None:
    """A node whose share for the job's CPUs is less than the default gives: nothing written
    (asking would lower it); the check warns that the ranks get too little, with the fix."""
    site = load_site("zih-alpha")
    memory = site.scheduler.memory.model_copy(update={"per_node": "8000M"})  # type: ignore[union-attr]
    site = site.model_copy(
        update={"scheduler": site.scheduler.model_copy(update={"memory": memory})}
    )
    result = plan(site, nodes=1, ntasks_per_node=8)  # default 8 x 5 x 300M = 12000M > 8000M
    assert not [x for x in sbatch_lines(result) if x.startswith("#SBATCH --mem")]
    check = memory_result(result)
    assert check.status == "warn"
    assert check.message.startswith(
        "partition alpha's default gives a node's ranks 12000M, 1500M each, less than the 8192M"
    )
