"""The script check, and GPUs a launch holds but leaves idle."""

from __future__ import annotations

from pathlib import Path

import pytest
from _launch_helpers import plan_launch
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.sites.loader import load_site


def results(site: str, **fields: object) -> dict[str, tuple[str, str]]:
    fields = {"image": "u/i:t", **fields}
    plan = plan_launch(load_site(site), LaunchRequest(**fields))  # type: ignore[arg-type]
    return {r.check: (r.status, r.message) for r in plan.results}


def test_a_script_that_is_not_here_is_warned_before_the_queue(tmp_path: Path) -> None:
    status, message = results("local", script=str(tmp_path / "tain.py"))["script"]
    assert status == "warn" and message.startswith(f"{tmp_path / 'tain.py'}: no such file here")


def test_a_mistyped_script_is_named_with_the_file_it_is_close_to(tmp_path: Path) -> None:
    (tmp_path / "multinode.py").write_text("import torch.distributed as dist\n")
    (tmp_path / "other.py").write_text("")
    _, message = results("local", script=str(tmp_path / "mulitnode.py"))["script"]
    assert f"(did you mean {tmp_path / 'multinode.py'}?)" in message, message
    _, message = results("local", script=str(tmp_path / "zzz.py"))["script"]
    assert "did you mean" not in message


def test_a_script_that_is_here_passes_and_a_program_is_not_judged(tmp_path: Path) -> None:
    here = tmp_path / "train.py"
    here.write_text("import horovod.torch as hvd\n")
    assert results("local", script=str(here))["script"][0] == "pass"
    assert results("local", script="/opt/venv/bin/python")["script"][0] == "n/a"


@pytest.mark.parametrize(("n", "per_node", "idle"), [(7, 4, 1), (5, 3, 1), (8, 4, 0), (6, 3, 0)])
def test_gpus_a_launch_holds_but_leaves_idle_are_warned(n: int, per_node: int, idle: int) -> None:
    status, message = results("perlmutter", script="t.py", ntasks=n, account="m_g")["gpus-per-rank"]
    if idle:
        assert status == "warn"
        assert message.startswith(f"-n {n} on 2 nodes of {per_node} GPUs leaves {idle} GPU idle")
        assert message.endswith(f"-n {2 * per_node} uses them all")
    else:
        assert status == "pass"


def test_shifter_says_to_pull_the_image_first() -> None:
    status, message = results("perlmutter", script="t.py", ntasks=4, account="m_g")["image-pulled"]
    assert status == "warn" and "`shifterimg pull docker:u/i:t`" in message
    assert results("local", script="t.py", image="x.sif")["image-pulled"][0] == "n/a"


@pytest.mark.parametrize(
    ("listing", "status"),
    [
        ("perlmutter docker     READY    2026-11-20T10:11:12 u/i:t\n", "pass"),
        ("perlmutter docker     READY    2026-11-20T10:11:12 u/other:t\n", "fail"),
        ("perlmutter docker     PULLING  2026-11-20T10:11:12 u/i:t\n", "fail"),
    ],
)
def test_doctor_on_the_login_node_reads_shifterimg_images(
    listing: str, status: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hvd_container.launcher.checks.registry import run_checks
    from hvd_container.launcher.plan.planner import plan
    from hvd_container.launcher.sites.machine import ThisMachine

    machine = ThisMachine("perlmutter")
    machine.listings[("shifterimg", "images")] = listing  # what shifterimg printed there
    request = LaunchRequest(script="t.py", image="u/i:t", ntasks=4, account="m_g")
    launch = plan(
        load_site("perlmutter"), request, "smoke", dry_run=True, keep_going=True, machine=machine
    )
    found = {r.check: r for r in run_checks(launch.launch)}["image-pulled"]
    assert found.status == status
    if status == "fail":
        assert "shifterimg pull docker:u/i:t" in found.message
