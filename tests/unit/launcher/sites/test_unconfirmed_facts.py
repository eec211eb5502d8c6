"""A fact marked unconfirmed never refuses a job: a check that would fail on a fact of the
site's profile whose source is unconfirmed warns instead, naming the fact, its source and how
to confirm it. Each check that reads a profile fact, with the source confirmed and not."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _launch_helpers import isolated  # noqa: F401
from hvd_container.containers.recipe_loader import read_recipe
from hvd_container.launcher.plan.planner import plan
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.sites.loader import load_site
from hvd_container.launcher.sites.model import Partition, Site, Source
from hvd_container.launcher.sites.sources import UNKNOWN_HOW, how_to_confirm, source_rows

from hvd_container.facts import ImageFacts, facts_from_recipe

GPU_FACTS = dict(source="image x.sif", arch="amd64", gpu=True, glibc="2.36", cuda="13.0")


def with_runtime(site: Site, **values: Any) -> dict[str, Any]:
    return {"runtime": site.runtime.model_copy(update=values)}


def with_cpu_partition(site: Site) -> dict[str, Any]:
    """A user's profile that adds a partition without GPUs to a GPU-only cluster."""
    partitions = {**site.scheduler.partitions, "cpu": Partition(cpus_per_node=8)}
    return {"scheduler": site.scheduler.model_copy(update={"partitions": partitions})}


# (check, site, what the profile says, the request, the profile key the failure rests on)
CASES = [
    ("glibc", "perlmutter", lambda s: with_runtime(s, injects_glibc="2.38"),
     dict(image="u/i:t", account="m1_g"), "runtime.injects_glibc"),
    ("cuda-driver", "perlmutter", lambda s: {"gpu_driver": "525"},
     dict(image="u/i:t", account="m1_g"), "gpu_driver"),
    ("gpu-arch", "zih-capella", lambda s: {},
     dict(image="x.sif", facts_extra={"torch_cuda_archs": ("sm_80",)}),
     "scheduler.partitions.capella"),
    ("time-limit", "zih-capella", lambda s: {}, dict(image="x.sif", time="8-00:00:00"),
     "scheduler.max_time"),
    ("time-limit", "perlmutter", lambda s: {}, dict(image="u/i:t", account="m1_g", time="100:00:00"),
     "scheduler.qos_max_time.regular"),
    ("arch", "zih-capella", lambda s: {}, dict(image="x.sif", facts_extra={"arch": "arm64"}),
     "arch"),
    ("comment", "neuron", lambda s: {},
     dict(image="x.sif", comment="appl-only"), "scheduler.comment.form"),
    ("cpus-per-node", "zih-capella", lambda s: {}, dict(image="x.sif", nodes=1, cpus_per_task=15),
     "scheduler.partitions.capella.cpus_per_node"),
    ("cpus-per-node", "neuron", lambda s: {},
     dict(image="x.sif", ntasks=1, cpus_per_task=10, comment="field=ai;appl=pytorch"),
     "scheduler.partitions.amd_a100nv_8.cpus_per_gpu"),
    ("cpus-per-node", "zih-alpha", lambda s: {},
     dict(image="x.sif", ntasks=2, sbatch_options=["--exclusive"]),
     "scheduler.partitions.alpha.cpus_per_gpu"),
    ("gpu-jobs-only", "zih-capella", with_cpu_partition, dict(image="x.sif", partition="cpu"),
     "scheduler.gpu_jobs_only"),
    ("partition-period", "neuron", lambda s: {},
     dict(image="x.sif", partition="gh200_1", ntasks=1, comment="field=ai;appl=pytorch",
          facts_extra={"arch": "arm64", "cuda": None, "gpu": True}),
     "scheduler.partitions.gh200_1.available_until"),
]  # fmt: skip


def judged(
    name: str, site_name: str, update: Any, asked: dict[str, Any], key: str, confirmed: bool
) -> Any:
    site = load_site(site_name)
    source = Source(
        about="what a user's note says", url="https://example.org/note", checked="2026-11-26",
        confirmed=confirmed, keys=[key],
    )  # fmt: skip
    site = site.model_copy(update={**update(site), "sources": [source]})
    asked = dict(asked)
    facts = ImageFacts(**{**GPU_FACTS, **asked.pop("facts_extra", {})})  # type: ignore[arg-type]
    request = LaunchRequest(**{"script": "t.py", "ntasks": 4, "facts": facts, **asked})
    launch = plan(site, request, "run", dry_run=True, keep_going=True)
    return next(r for r in launch.results if r.check == name)


@pytest.mark.parametrize(
    ("name", "site", "update", "asked", "key"), CASES, ids=[c[0] for c in CASES]
)
def test_a_check_that_rests_on_an_unconfirmed_fact_warns(
    name: str, site: str, update: Any, asked: dict[str, Any], key: str
) -> None:
    refused = judged(name, site, update, asked, key, confirmed=True)
    assert refused.status == "fail", refused
    warned = judged(name, site, update, asked, key, confirmed=False)
    assert warned.status == "warn", warned
    # one line: the fact and the fix, then where the source and how to confirm it are said
    assert warned.message == (
        f"{refused.message} (unconfirmed: `hvd-container sites show {site} --sources`)"
    )
    assert "\n" not in warned.message and "what a user's note says" not in warned.message


def test_perlmutters_glibc_and_driver_rest_on_their_unconfirmed_sources() -> None:
    """The issue's case: the glibc Shifter's libraries need (2.31, SLES 15 SP4/5; maybe 2.38
    since SLES 15 SP6) is not confirmed; neither is the driver."""
    site = load_site("perlmutter")
    found = site.unconfirmed_source("runtime.injects_glibc")
    assert found is not None and "glibc 2.31" in found[1].about
    assert site.unconfirmed_source("gpu_driver") is not None
    assert site.unconfirmed_source("scheduler.partitions") is None  # nothing backs those


def test_neurons_gh200_period_is_warned_of_with_how_to_confirm_it() -> None:
    """Its allocation period ended (a user's showque): recorded unconfirmed, so a launch there
    is warned of, never refused, and the warning says to ask showque."""
    site = load_site("neuron")
    facts = ImageFacts(source="image x.sif", arch="arm64", gpu=True, glibc="2.36")
    request = LaunchRequest(script="t.py", image="x.sif", partition="gh200_1", ntasks=1,
                            comment="field=ai;appl=pytorch", facts=facts)  # fmt: skip
    launch = plan(site, request, "run", dry_run=True, keep_going=True)
    (result,) = [r for r in launch.results if r.check == "partition-period"]
    assert result.status == "warn"
    assert result.message.startswith(
        "partition gh200_1 of site neuron: its allocation period ended on 2025-12-31"
    )
    assert result.message.endswith("(unconfirmed: `hvd-container sites show neuron --sources`)")
    (period,) = [
        row
        for row in source_rows(site)
        if "gh200_1" in " ".join(row["keys"])  # type: ignore[arg-type]
    ]
    assert period["confirmed"] is False
    assert "`showque` or `sinfo -p PARTITION`" in str(period["confirm"])
    other = plan(site, LaunchRequest(script="t.py", image="x.sif", partition="amd_a100nv_8",
                                     ntasks=8, comment="field=ai;appl=pytorch"),
                 "run", dry_run=True, keep_going=True)  # fmt: skip
    assert [r.status for r in other.results if r.check == "partition-period"] == ["n/a"]


def test_sites_show_sources_says_where_each_fact_comes_from_and_how_to_confirm_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from hvd_container.cli.app import main

    assert main(["sites", "show", "jupiter", "--sources"]) == 0
    out = capsys.readouterr().out
    assert "UNCONFIRMED, checked 2026-11-26: JSC uses --comment for its own job tooling" in out
    assert (
        "  to confirm scheduler.comment.reserved: the site's user guide or its support says "
        "whether jobs may set --comment\n"
    ) in out
    assert "  to confirm cluster_names: `scontrol show config | grep ClusterName`" in out
    assert main(["sites", "show", "jupiter", "--sources", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    reserved = [s for s in record["sources"] if "scheduler.comment.reserved" in s["keys"]]
    assert reserved and reserved[0]["confirmed"] is False
    assert set(reserved[0]["confirm"]) == {"scheduler.comment.reserved"}


def test_how_to_confirm_a_key_of_a_partition_and_one_nobody_described() -> None:
    assert how_to_confirm("scheduler.partitions.booster.available_until").startswith("`showque`")
    assert how_to_confirm("scheduler.partitions.booster").startswith("`hvd-container sites probe`")
    assert how_to_confirm("env") == UNKNOWN_HOW


def test_the_glibc_skip_under_a_recipe_says_the_build_records_it() -> None:
    """Under --recipe there is no image to verify again: the skip says the recipe cannot tell
    and how to judge the built image; an image's facts without it name `verify`."""
    site = load_site("perlmutter")
    recipe = facts_from_recipe(read_recipe("gpu-bookworm-torch"))
    for facts, said in (
        (recipe, "recipe gpu-bookworm-torch does not say its image's glibc (the build records "
                 "it): judge the built image with --image IMAGE"),
        (ImageFacts(source="image x:1", arch="amd64", gpu=True),
         "image x:1's glibc is not recorded (hvd-container verify records it)"),
    ):  # fmt: skip
        request = LaunchRequest(script="t.py", image="u/x:1", account="m1", nodes=1, facts=facts)
        launch = plan(site, request, "run", dry_run=True, keep_going=True)
        (result,) = [r for r in launch.results if r.check == "glibc"]
        assert (result.status, result.message) == ("skip", said)


def _with_default_time(name: str, partition: str | None, value: str) -> Site:
    site = load_site(name)
    sched = site.scheduler
    if partition is None:
        sched = sched.model_copy(update={"default_time": value})
    else:
        own = sched.partitions[partition].model_copy(update={"default_time": value})
        sched = sched.model_copy(update={"partitions": {**sched.partitions, partition: own}})
    return site.model_copy(update={"scheduler": sched})


def test_a_job_without_time_is_warned_of_the_default_limit_it_gets() -> None:
    """No --time and none in the profile: Slurm gives the partition's DefaultTime, often far
    shorter than a training; where the profile knows it the launch says so, once --time (or
    the profile's scheduler.time) is there it says nothing."""
    facts = ImageFacts(source="image x.sif", arch="amd64", gpu=True, glibc="2.36")

    def time_result(site: Site, **given: Any) -> Any:
        request = LaunchRequest(script="t.py", image="x.sif", nodes=1, facts=facts, **given)
        launch = plan(site, request, "run", dry_run=True, keep_going=True)
        (result,) = [r for r in launch.results if r.check == "time-limit"]
        return result

    site = _with_default_time("local", "gpu", "30:00")
    said = time_result(site, partition="gpu")
    assert (said.status, said.message) == (
        "warn",
        "no --time: the job gets partition gpu's default limit, 30:00, and is ended then; pass "
        "-t/--time (or set scheduler.time in your own profile)",
    )
    assert time_result(site, partition="gpu", time="2:00:00").status != "warn"
    assert time_result(load_site("local"), partition="gpu").status == "pass"  # not known: quiet
    whole = _with_default_time("local", None, "1:00:00")
    assert "site local's default limit, 1:00:00" in time_result(whole).message
    timed = whole.model_copy(
        update={"scheduler": whole.scheduler.model_copy(update={"time": "4:00:00"})}
    )
    assert time_result(timed).status != "warn"
