"""A launch's partition, account, QOS, constraint and time, resolved once
(launcher/plan/scheduler_values.py): the value a check judges is the one the script writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _launch_helpers import plan_launch, write
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.plan.scheduler_values import requested_values, scheduler_values
from hvd_container.launcher.sites.loader import BUILTIN_DIR, load_site

BUILT_IN = sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))
NAMES = ("partition", "account", "qos", "constraint", "time")


@pytest.fixture(autouse=True)
def job_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "train.py", "import horovod.torch as hvd\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv("USER", "u")


def _written(script: str) -> dict[str, str | None]:
    lines = [line.removeprefix("#SBATCH --") for line in script.splitlines()]
    options = dict(line.partition("=")[::2] for line in lines if "=" in line)
    return {name: options.get(name) for name in NAMES}


def _launch(site: str, **given: Any) -> Any:
    profile = load_site(site)
    registry = ("container-engine", "shifter", "pyxis", "podman-hpc")
    kind = profile.runtime.kind
    image = "u/x:1" if kind in registry else "x.sqfs" if kind == "charliecloud" else "x.sif"
    extra = {"comment": "field=ai;appl=pytorch"} if site == "neuron" else {}
    request = LaunchRequest(script="train.py", image=image, nodes=1, account="a1", **extra, **given)
    return plan_launch(profile, request, "batch")


@pytest.mark.parametrize("site", BUILT_IN)
@pytest.mark.parametrize("given", [{}, {"time": "0:30:00"}, {"qos": "debug", "time": "10"}])
def test_the_script_writes_the_values_the_checks_judged(site: str, given: dict[str, str]) -> None:
    write(Path("x.sif"), "")
    write(Path("x.sqfs"), "hsqs")  # a SquashFS file, which ch-run mounts as it is
    planned = _launch(site, **given)
    judged = planned.launch.scheduled
    assert _written(planned.script) == {name: getattr(judged, name) for name in NAMES}
    for name, value in given.items():
        assert getattr(judged, name) == value  # as given wins
    own = scheduler_values(load_site(site))
    for name in NAMES:
        if name not in given and name != "account":
            assert getattr(judged, name) == getattr(own, name)  # else the site's


def test_a_profiles_time_is_what_the_time_checks_judge(tmp_path: Path) -> None:
    """scheduler.time (the --time a profile writes when a launch gives none) over a debug
    QoS's node-time budget: judged as written, named as the job's own --time."""
    profile = write(
        tmp_path / "c.yaml",
        'extends: cscs-clariden\nname: c\nscheduler: {time: "1:00:00"}\n',
    )
    site = load_site(str(profile))
    assert requested_values(site, LaunchRequest(script="t.py")).time == "1:00:00"
    request = LaunchRequest(
        script="train.py", image="u/x:1", nodes=2, partition="debug", account="a"
    )
    with pytest.raises(Exception, match=r"^--time 1:00:00 on 2 nodes is 120 node-minutes"):
        plan_launch(site, request, "batch")
