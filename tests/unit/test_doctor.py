"""`hvd-container doctor`: every static check as one pass / warn / fail line, the smoke job's
output judged per rank and node, and the command's text and JSON."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from _json_records import result
from hvd_container.launcher.doctor import CHECKED, Report, diagnose, judge_smoke, parse_smoke
from hvd_container.launcher.facts import ImageFacts
from hvd_container.launcher.request import LaunchRequest
from hvd_container.launcher.sites import load_site

from hvd_container.cli.app import main

OMPI = ImageFacts(
    source="image ompi.sif", arch="amd64", mpi_pmi=("pmix",), controllers=("mpi", "gloo"),
    mpi_family="openmpi", gpu=False, cuda="",
)  # fmt: skip


def lines(report: Report) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for r in report.results:
        out.setdefault(r.check, []).append((r.status, r.message))
    return out


def test_every_launch_check_has_a_pass_line(tmp_path: Path) -> None:
    image = tmp_path / "image"  # an image directory, as ch-run takes it
    image.mkdir()
    request = LaunchRequest(script="doctor", image=str(image), nodes=2, lightning=False)
    report = diagnose(load_site("local"), dataclasses.replace(request, facts=OMPI), probe=False)
    found = lines(report)
    assert set(CHECKED) - {"comment", "account"} <= set(found)
    assert not report.failed
    assert found["arch"] == [("pass", CHECKED["arch"])]


def test_a_planted_fault_fails_with_its_fix_and_the_rest_still_runs(tmp_path: Path) -> None:
    image = tmp_path / "image"  # an image directory, as ch-run takes it
    image.mkdir()
    p9 = dataclasses.replace(OMPI, arch="ppc64le", controllers=("gloo",))
    request = LaunchRequest(
        script="doctor", image=str(image), nodes=2, lightning=False, facts=p9, mpi="pmi2"
    )
    report = diagnose(load_site("local"), request, probe=False)
    found = lines(report)
    assert report.failed
    assert found["arch"][0][0] == "fail" and "is built for ppc64le" in found["arch"][0][1]
    (mpi,) = found["mpi-plugin"]
    assert mpi[0] == "fail" and "without the MPI controller: pass --controller gloo" in mpi[1]
    # a launch stops at the first of them; doctor went on to the last check
    assert found["nccl-network"] == [("pass", CHECKED["nccl-network"])]


def test_missing_image_and_unknown_facts() -> None:
    request = LaunchRequest(script="doctor", image="/nonexistent/x.sif", nodes=1, lightning=False)
    found = lines(diagnose(load_site("local"), request, probe=False))
    assert found["image"][0][0] == "fail" and "no such file or directory" in found["image"][0][1]
    assert "prepare" not in found  # the same problem is said once
    assert found["facts"][0][0] == "warn"
    assert found["arch"] == [
        ("pass", CHECKED["arch"] + " (not judged: the image's facts are unknown)")
    ]


SMOKE_OK = """\
SMOKE rank 0 size 2 host node1 controller mpi
SMOKE rank 1 size 2 host node2 controller mpi
SMOKE rank 0 op mpi allreduce ok busbw 812.5 MB/s
SMOKE rank 1 op mpi allreduce ok busbw 790.1 MB/s
"""


def test_smoke_output_is_judged_per_rank_and_node() -> None:
    ranks, ops = parse_smoke(SMOKE_OK)
    assert [r.host for r in ranks] == ["node1", "node2"]
    assert ops["mpi"] == [(0, "ok", 812.5), (1, "ok", 790.1)]
    report = Report()
    judge_smoke("mpi", 2, 0, SMOKE_OK, report)
    assert [(r.check, r.status, r.message) for r in report.results] == [
        ("smoke-mpi", "pass", "2 ranks, size 2, over mpi, on node1, node2"),
        (
            "allreduce-mpi",
            "pass",
            "sum correct on every rank; bus bandwidth node1 812 MB/s, node2 790 MB/s",
        ),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # a PMI the image's MPI does not speak: every rank alone
            "SMOKE rank 0 size 1 host node1 controller mpi\nSMOKE rank 0 size 1 host node2 controller mpi\n",
            "2 ranks reported sizes 1, expected 2 ranks of size 2: the ranks did not find each other",
        ),
        (
            "Traceback ...\nImportError: no horovod\n",
            "no rank started Horovod (exit 1): Traceback ... | ImportError: no horovod",
        ),
        (
            SMOKE_OK.replace(
                "op mpi allreduce ok busbw 790.1", "op mpi allreduce WRONG sum 2 busbw 790.1"
            ),
            "allreduce over mpi: rank 1: WRONG sum 2",
        ),
    ],
)
def test_smoke_failures_say_what_went_wrong(text: str, expected: str) -> None:
    report = Report()
    judge_smoke("mpi", 2, 1, text, report)
    assert report.failed
    assert any(r.status == "fail" and r.message.startswith(expected) for r in report.results), (
        report
    )


def test_doctor_command_text_and_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    image = tmp_path / "image"  # an image directory, as ch-run takes it
    image.mkdir()
    assert main(["doctor", "--site", "zih-alpha", "--image", "/nonexistent.sif", "-N", "1"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("FAIL  image ") and any(s.startswith("PASS  arch ") for s in out)
    assert main(["doctor", "--site", "local", "--image", str(image), "-N", "2", "--json"]) == 0
    record = result("doctor", capsys.readouterr().out)
    assert record["ok"] is True and record["site"] == "local"
    assert {"check": "facts", "status": "warn"}.items() <= record["checks"][1].items()
