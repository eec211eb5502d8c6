"""`hvd-container doctor`: every static check as one pass / warn / fail line, the smoke job's
output judged per rank and node, and the command's text and JSON."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from _json_records import result
from hvd_container.launcher.checks.registry import registry
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.run.doctor import Report, diagnose, judge_smoke, parse_smoke
from hvd_container.launcher.sites.loader import load_site

from hvd_container.cli.app import main
from hvd_container.facts import ImageFacts

OMPI = ImageFacts(
    source="image ompi.sif", arch="amd64", mpi_pmi=("pmix",), controllers=("mpi", "gloo"),
    mpi_family="openmpi", gpu=False, cuda="",
)  # fmt: skip


ABOUT = {c.name: c.about for c in registry()}
# the checks that cannot judge without the image's facts
NEED_FACTS = {c.name for c in registry() if "facts" in c.needs}


def lines(report: Report) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for r in [*report.checks, *report.smoke]:
        out.setdefault(r.check, []).append((r.status, r.message))
    return out


def test_every_check_of_the_registry_reports_once(tmp_path: Path) -> None:
    image = tmp_path / "image"  # an image directory, as ch-run takes it
    image.mkdir()
    request = LaunchRequest(script="doctor", image=str(image), nodes=2)
    report = diagnose(
        load_site("local"), dataclasses.replace(request, facts=OMPI), ask_machine=False
    )
    assert [r.check for r in report.checks] == [c.name for c in registry()]
    assert not report.failed
    found = lines(report)
    assert found["arch"] == [("pass", "amd64, as the nodes")]
    assert found["comment"] == [("n/a", "site local asks for no --comment")]  # no such rule


def test_a_planted_fault_fails_with_its_fix_and_the_rest_still_runs(tmp_path: Path) -> None:
    image = tmp_path / "image"  # an image directory, as ch-run takes it
    image.mkdir()
    p9 = dataclasses.replace(OMPI, arch="ppc64le", controllers=("gloo",))
    request = LaunchRequest(script="doctor", image=str(image), nodes=2, facts=p9, mpi="pmi2")
    report = diagnose(load_site("local"), request, ask_machine=False)
    found = lines(report)
    assert report.failed
    assert found["arch"][0][0] == "fail" and "is built for ppc64le" in found["arch"][0][1]
    (controller,) = found["controller"]
    assert controller[0] == "fail"
    assert "without the MPI controller: pass --controller gloo" in controller[1]
    # a launch stops at the first of them; doctor went on to the last check
    assert [r.check for r in report.checks][-1] == registry()[-1].name


def test_missing_image_and_unknown_facts() -> None:
    request = LaunchRequest(script="doctor", image="/nonexistent/x.sif", nodes=1)
    found = lines(diagnose(load_site("local"), request, ask_machine=False))
    assert found["image"][0][0] == "fail" and "no such file or directory" in found["image"][0][1]
    assert found["facts"][0][0] == "skip"
    assert found["arch"] == [
        ("skip", found["facts"][0][1])  # the same reason: the image's facts are unknown
    ]


@pytest.mark.parametrize(
    "site", ["local", "perlmutter", "neuron", "zih-alpha", "zih-capella", "zih-ml"]
)
def test_an_image_without_facts_gets_skips_never_a_pass_from_the_checks_that_need_them(
    tmp_path: Path, site: str
) -> None:
    made_up = tmp_path / "made-up.sif"
    made_up.write_bytes(b"")  # no SIF, no labels: nothing is known of it
    report = diagnose(
        load_site(site),
        LaunchRequest(
            script="doctor", image=str(made_up), nodes=2, comment="field=ai;appl=pytorch"
        ),
        ask_machine=False,
    )
    statuses = {r.check: r.status for r in report.checks}
    # skip (not judged) or n/a (a GPU rule on CPU nodes): never a pass
    assert NEED_FACTS and {statuses[name] for name in NEED_FACTS} <= {"skip", "n/a"}
    assert "skip" in {statuses[name] for name in NEED_FACTS}
    skipped = [r for r in report.checks if r.check in NEED_FACTS and r.status == "skip"]
    assert all("facts are unknown" in r.message for r in skipped)


SMOKE_OK = """\
SMOKE rank 0 size 2 host node1 controller mpi
SMOKE rank 1 size 2 host node2 controller mpi
SMOKE rank 0 op mpi allreduce ok busbw 812.5 MB/s
SMOKE rank 1 op mpi allreduce ok busbw 790.1 MB/s
"""


def test_smoke_output_is_judged_per_rank_and_node() -> None:
    ranks, ops = parse_smoke(SMOKE_OK)
    assert [r.host for r in ranks] == ["node1", "node2"]
    assert [(o.rank, o.word, o.busbw, o.average) for o in ops["mpi"]] == [
        (0, "ok", 812.5, None),
        (1, "ok", 790.1, None),
    ]
    report = Report()
    judge_smoke("mpi", 2, 0, SMOKE_OK, report)
    assert [(r.check, r.status, r.message) for r in report.smoke] == [
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
            "no rank started (exit 1): Traceback ... | ImportError: no horovod",
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
    assert any(r.status == "fail" and r.message.startswith(expected) for r in report.smoke), report


def test_one_rank_reports_no_bus_bandwidth() -> None:
    text = (
        "SMOKE rank 0 size 1 host node1 controller torch\nSMOKE rank 0 op torch-nccl allreduce ok\n"
    )
    report = Report()
    judge_smoke("torch", 1, 0, text, report)
    [line] = [r for r in report.smoke if r.check == "allreduce-torch-nccl"]
    assert line.status == "pass"
    assert "MB/s" not in line.message and "one rank: no bus bandwidth" in line.message


def test_a_wrong_average_fails_naming_the_known_bad_nccl() -> None:
    """What the Horovod payload printed on an H200 with NCCL 2.28.9 (bench/README.md)."""
    text = (
        "SMOKE rank 0 size 1 host gpu1 controller mpi\n"
        "SMOKE rank 0 op nccl allreduce ok\n"
        "SMOKE rank 0 op nccl average WRONG 1 of 4913 values (last -7, want 4912)\n"
    )
    report = Report()
    judge_smoke("mpi", 1, 0, text, report)
    [line] = [r for r in report.smoke if r.check == "average-nccl"]
    assert line.status == "fail" and report.failed
    assert "WRONG 1 of 4913 values" in line.message
    assert "NVIDIA/nccl issue 1950" in line.message and "2.29.7" in line.message


def test_a_right_average_passes() -> None:
    text = SMOKE_OK + "SMOKE rank 0 op mpi average ok\nSMOKE rank 1 op mpi average ok\n"
    report = Report()
    judge_smoke("mpi", 2, 0, text, report)
    assert ("average-mpi", "pass") in [(r.check, r.status) for r in report.smoke]


def test_doctor_command_text_and_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    image = tmp_path / "image"  # an image directory, as ch-run takes it
    image.mkdir()
    assert main(["doctor", "--site", "local", "--image", "/nonexistent.sif", "-N", "1"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("FAIL  image ") and any(s.startswith("SKIP  arch ") for s in out)
    # the reason arch shares with facts is named, not repeated; the counts end the text
    assert any(s.startswith("SKIP  arch") and s.endswith("same reason as facts") for s in out)
    assert re.fullmatch(r"\d+ pass, \d+ warn, [1-9]\d* fail, \d+ skip, \d+ n/a", out[-1])
    # away from the cluster, a SIF that is not here may be on it: not judged, and said where
    assert main(["doctor", "--site", "zih-alpha", "--image", "/nonexistent.sif", "-N", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("SKIP  image ") and "run doctor on zih-alpha's login node" in out[0]
    assert "or pass --recipe NAME" in out[0]
    assert any(s.startswith("N/A   account ") for s in out)  # zih-alpha has no suffix rule
    assert main(["doctor", "--site", "local", "--image", str(image), "-N", "2", "--json"]) == 0
    record = result("doctor", capsys.readouterr().out)
    assert record["ok"] is True and record["site"] == "local"
    assert {"check": "facts", "status": "skip"}.items() <= record["checks"][1].items()


@pytest.mark.parametrize("site", ["local", "perlmutter", "neuron"])
def test_doctor_json_lists_exactly_the_registry(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, site: str
) -> None:
    """No second list of names: doctor prints the registry's checks, each once, in its order."""
    made_up = tmp_path / "made-up.sif"
    made_up.write_bytes(b"")
    code = main(["doctor", "--site", site, "--image", str(made_up), "-N", "2", "--comment",
                 "pytorch", "--account", "a_g", "--json"])  # fmt: skip
    record = result("doctor", capsys.readouterr().out)
    assert [c["check"] for c in record["checks"]] == [c.name for c in registry()]
    assert record["smoke"] == []
    # a made-up image: nothing that needs its facts passes, and doctor does not call it ok
    assert not any(c["status"] == "pass" for c in record["checks"] if c["check"] in NEED_FACTS)
    assert code == (1 if not record["ok"] else 0)


def test_doctor_takes_the_script_as_run_does_and_says_when_none_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """doctor took no script and, without --controller, checked the MPI controller's launch,
    printing `N/A script` although none was given."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ddp.py").write_text('import torch.distributed as dist\ndist.init_process_group("gloo")\n')  # fmt: skip
    base = ["doctor", "--site", "zih-alpha", "--image", "/nonexistent.sif", "-N", "1", "--json"]

    def checked(*more: str) -> dict[str, tuple[str, str]]:
        main([*base, *more])
        record = result("doctor", capsys.readouterr().out)
        return {r["check"]: (r["status"], r["message"]) for r in record["checks"]}

    alone = checked()
    assert alone["script"] == ("n/a", "no script given: name it after the options (`doctor ... train.py ARGS`) to check it and its controller as run does")  # fmt: skip
    assert alone["gloo-layout"][1] == "not for controller mpi"
    given = checked("ddp.py", "--epochs", "3")
    assert given["script"][0] == "pass"
    assert given["gloo-layout"][1] == "not for controller torch"  # detected as run detects it
