"""check-build parsing, comparison with the recipe, and the facts recorded as labels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import requests
from _fakes import FakeDockerAPI, good_image
from hvd_container.containers.engine.docker_api import DockerEngine
from hvd_container.containers.recipe_loader import load_recipe
from hvd_container.containers.verify import (
    CheckBuild,
    VerifyResult,
    compare_check_build,
    compare_versions,
    docker_runner,
    expected_check_build,
    fact_labels,
    labelled_check_build,
    mpi_version,
    parse_check_build,
    parse_versions,
    verify_image,
)

from hvd_container.core.errors import StepFailed

GOLDEN = Path(__file__).parent.parent.parent / "golden" / "checkbuild" / "cpu-bookworm.txt"


def test_parse_real_check_build_output() -> None:
    cb = parse_check_build(GOLDEN.read_text())
    assert cb == CheckBuild(
        "0.28.1", frozenset({"pytorch"}), frozenset({"mpi", "gloo"}), frozenset({"mpi", "gloo"})
    )


def test_parse_rejects_output_without_blocks() -> None:
    with pytest.raises(ValueError):
        parse_check_build("horovodrun: command not found\n")


def test_cpu_recipe_matches_cpu_check_build() -> None:
    recipe = load_recipe("cpu-bookworm")
    assert (
        compare_check_build(expected_check_build(recipe), parse_check_build(GOLDEN.read_text()))
        == []
    )


def test_missing_controller_and_framework_are_reported() -> None:
    text = GOLDEN.read_text().replace("[X] Gloo", "[ ] Gloo").replace("[X] PyTorch", "[ ] PyTorch")
    problems = compare_check_build(
        expected_check_build(load_recipe("cpu-bookworm")), parse_check_build(text)
    )
    assert problems == [
        "frameworks missing: pytorch",
        "controllers missing: gloo",
        "tensor ops missing: gloo",
    ]


def test_versions_compare_ignores_local_tags_and_flags_mismatches() -> None:
    recipe = load_recipe("cpu-bookworm")
    assert compare_versions(recipe, {"torch": "2.13.0+cpu", "horovod": "0.28.1"}) == []
    assert compare_versions(recipe, {"torch": "2.12.1+cpu", "horovod": "0.28.1"}) == [
        "torch 2.12.1+cpu installed, recipe says 2.13.0"
    ]
    assert compare_versions(recipe, {"torch": "2.13.0"}) == [
        "horovod is not installed, recipe says 0.28.1"
    ]


def test_parse_versions_and_mpi_version() -> None:
    out = 'noise\nHVD-VERSIONS {"python": "3.11.2", "mpi": "mpirun (Open MPI) 4.1.4"}\n'
    assert parse_versions(out) == {"python": "3.11.2", "mpi": "mpirun (Open MPI) 4.1.4"}
    assert mpi_version("mpirun (Open MPI) 4.1.4") == "4.1.4"
    assert mpi_version("") == ""


def test_fact_labels_follow_the_contract() -> None:
    recipe = load_recipe("cpu-bookworm")
    result = VerifyResult(
        "cpu-bookworm:1",
        parse_check_build(GOLDEN.read_text()),
        {
            "python": "3.11.2",
            "torch": "2.13.0+cpu",
            "horovod": "0.28.1",
            "mpi": "mpirun (Open MPI) 4.1.4",
        },
        "amd64",
    )
    labels = fact_labels(result, recipe)
    p = "org.hvd-container."
    assert labels[p + "horovod.frameworks"] == "pytorch"
    assert labels[p + "horovod.controllers"] == "gloo,mpi"
    assert labels[p + "horovod.tensor_ops"] == "gloo,mpi"
    assert labels[p + "versions.torch"] == "2.13.0+cpu"
    assert labels[p + "versions.mpi"] == "4.1.4"
    assert labels[p + "arch"] == "amd64"
    assert labels[p + "recipe.digest"] == recipe.digest()
    assert labels[p + "recipe.name"] == "cpu-bookworm"
    assert labels[p + "verified"] == "true"
    assert labels[p + "mpi.pmi"] == "pmix"


def test_verify_image_runs_checks_and_collects_problems() -> None:
    recipe = load_recipe("cpu-bookworm")
    calls: list[list[str]] = []

    def run(argv: list[str]) -> tuple[int, str]:
        calls.append(argv)
        if argv[:2] == ["horovodrun", "--check-build"]:
            return 0, GOLDEN.read_text().replace("[X] Gloo", "[ ] Gloo")
        if argv[:2] == ["python", "-c"] and "HVD-VERSIONS" in argv[2]:
            return 0, 'HVD-VERSIONS {"torch": "2.13.0+cpu", "horovod": "0.28.1"}'
        if argv[0] == "sh":
            return 1, "Traceback...\nImportError: no module named horovod.torch\n"
        return 0, "0\n"

    result = verify_image("img", run, "amd64", recipe)
    assert not result.ok
    assert "controllers missing: gloo" in result.problems
    assert any(
        p.startswith("check `python -c") and p.endswith("no module named horovod.torch")
        for p in result.problems
    )
    assert calls[2][:2] == ["python", "-c"] and "horovod.torch" in calls[2][2]
    assert result.checks_run[0] == "hvd.init pytorch"


def test_arch_mismatch_is_a_problem() -> None:
    recipe = load_recipe("cpu-bookworm")
    result = verify_image("img", lambda argv: (0, GOLDEN.read_text()), "arm64", recipe)
    assert "image arch arm64, recipe says amd64" in result.problems


NOT_FOUND = (
    "failed to create shim: OCI runtime create failed: container_linux.go:380: starting container "
    'process caused: exec: "horovodrun": executable file not found in $PATH: unknown'
)


def test_command_missing_in_the_image_is_a_problem_not_a_traceback() -> None:
    # e.g. `verify hvd-base/debian:bookworm`: neither horovodrun nor python exist there
    api = FakeDockerAPI({})
    api.start_error = docker.errors.APIError("500 Server Error", explanation=NOT_FOUND)
    result = verify_image(
        "hvd-base/debian:bookworm", docker_runner(DockerEngine(api), "x"), "amd64"
    )
    assert result.problems == [
        "`horovodrun --check-build` failed (exit 127): "
        "horovodrun: executable file not found in $PATH",
        "version probe failed (exit 127): horovodrun: executable file not found in $PATH",
    ]
    assert api.live == {}


def test_other_start_failure_is_one_line() -> None:
    api = FakeDockerAPI({})
    api.start_error = docker.errors.APIError("500", explanation="cgroup setup failed:\n  details")
    with pytest.raises(StepFailed) as info:
        docker_runner(DockerEngine(api), "img")(["horovodrun", "--check-build"])
    assert str(info.value) == (
        "verification of img: `horovodrun --check-build` could not run: "
        "cgroup setup failed: details"
    )
    assert api.live == {}


def test_check_running_too_long_is_one_line_and_leaves_no_container() -> None:
    api = FakeDockerAPI({})
    api.wait_error = requests.exceptions.ReadTimeout(
        "UnixHTTPConnectionPool(host='localhost', port=None): Read timed out. (read timeout=5)"
    )
    with pytest.raises(StepFailed) as info:
        docker_runner(DockerEngine(api), "img", timeout=5)(["sh", "-c", "sleep 100"])
    assert str(info.value) == "verification of img: `sh -c sleep 100` did not finish within 5 s"
    assert api.live == {}


def test_recipe_without_horovod_skips_check_build() -> None:
    recipe = load_recipe("lightning-pt113")
    calls: list[list[str]] = []

    def run(argv: list[str]) -> tuple[int, str]:
        calls.append(argv)
        if "HVD-VERSIONS" in argv[-1]:
            return 0, (
                'HVD-VERSIONS {"torch": "1.13.1", "lightning": "2.0.2", '
                f'"torch.distributed": "{backends}"}}'
            )
        return 0, ""

    backends = "gloo,nccl"
    result = verify_image("img", run, "amd64", recipe)
    assert result.ok, result.problems
    assert all(argv[0] != "horovodrun" for argv in calls)
    assert "torch.distributed backends" in result.checks_run  # instead of check-build
    backends = "gloo"  # a CUDA recipe whose torch has no NCCL
    assert verify_image("img", run, "amd64", recipe).problems == [
        "torch.distributed has no nccl backend (is_nccl_available() is False; it has gloo)"
    ]


LABELS = {
    "org.hvd-container.verified": "true",
    "org.hvd-container.recipe.name": "my-own-recipe",
    "org.hvd-container.arch": "amd64",
    "org.hvd-container.horovod.frameworks": "pytorch",
    "org.hvd-container.horovod.controllers": "gloo,mpi",
    "org.hvd-container.horovod.tensor_ops": "gloo,mpi",
    "org.hvd-container.versions.torch": "2.13.0+cpu",
    "org.hvd-container.versions.horovod": "0.28.1",
}


def test_labels_are_the_expectations_without_a_recipe() -> None:
    assert labelled_check_build(LABELS) == parse_check_build(GOLDEN.read_text())
    gloo_off = GOLDEN.read_text().replace("[X] Gloo", "[ ] Gloo")

    def run(argv: list[str]) -> tuple[int, str]:
        if argv[0] == "horovodrun":
            return 0, gloo_off
        if "HVD-VERSIONS" in argv[-1]:
            return 0, 'HVD-VERSIONS {"torch": "2.12.0+cpu", "horovod": "0.28.1"}'
        return 0, "0"

    result = verify_image("img", run, "arm64", None, labels=LABELS)
    assert result.problems == [
        "image arch arm64, its labels say amd64",
        "controllers missing: gloo",
        "tensor ops missing: gloo",
        "torch 2.12.0+cpu installed, its labels say 2.13.0+cpu",
    ]
    assert result.checks_run == ["hvd.init pytorch"]


def image_with(labels: dict[str, str]) -> dict[str, Any]:
    return {"Id": "sha256:1", "Architecture": "amd64", "Config": {"Labels": labels}}


def cli(monkeypatch: pytest.MonkeyPatch, api: FakeDockerAPI, *argv: str) -> int:
    from hvd_container.cli.app import main

    monkeypatch.setattr("hvd_container.containers.engine.docker_api.docker_client", lambda: api)
    return main(list(argv))


def test_verify_command_falls_back_to_labels_for_a_recipe_file_image(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FakeDockerAPI({"mine:1": image_with(LABELS)})
    assert cli(monkeypatch, api, "verify", "mine:1") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "mine:1: recipe my-own-recipe is not built in; "
        "verifying against the facts recorded in its labels"
    )
    assert out[-1] == "mine:1: verified against the facts recorded in its labels"


def test_verify_command_reports_a_label_mismatch_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    api = FakeDockerAPI(
        {"mine:1": image_with(LABELS)},
        run=lambda argv: (
            (0, GOLDEN.read_text().replace("[X] MPI", "[ ] MPI"))
            if argv[0] == "horovodrun"
            else good_image(argv)
        ),
    )
    assert cli(monkeypatch, api, "verify", "mine:1", "--json") == 1
    captured = capsys.readouterr()
    message = "verification of mine:1 failed: controllers missing: mpi; tensor ops missing: mpi"
    result, error = (json.loads(line) for line in captured.out.splitlines())
    assert result["against"] == "the facts recorded in its labels" and result["ok"] is False
    assert (error["event"], error["phase"], error["text"], error["exit_code"]) == (
        "error",
        "verify",
        message,
        1,
    )
    assert captured.err.splitlines() == [f"hvd-container: error: {message}"]


@pytest.mark.parametrize(
    ("cuda", "rc", "link"), [("12.8", 1, False), ("13.0", 0, True), ("", 0, None)]
)
def test_verify_records_whether_the_unversioned_libcudart_loads(
    cuda: str, rc: int, link: bool | None
) -> None:
    """An image with CUDA: verify dlopens libcudart.so by that name in a python of its own
    (what a dynamically linked NCCL plugin does), records the answer as a label and warns
    where it is missing; an image without CUDA is not asked."""
    from hvd_container.containers.verify import CUDART_PROBE, fact_labels

    calls: list[list[str]] = []

    def run(argv: list[str]) -> tuple[int, str]:
        calls.append(argv)
        if argv == CUDART_PROBE:
            return rc, "" if rc == 0 else "OSError: libcudart.so: cannot open shared object file"
        if argv[:2] == ["python", "-c"] and "HVD-VERSIONS" in argv[2]:
            found = {"python": "3.11.2", "torch": "2.9.1", "cuda": cuda}
            return 0, "HVD-VERSIONS " + json.dumps(found)
        return 0, GOLDEN.read_text()

    result = verify_image("img", run, "amd64")
    assert result.cudart_link is link
    assert (CUDART_PROBE in calls) is (link is not None)
    labels = fact_labels(result, None)
    label = labels.get("org.hvd-container.cuda.libcudart_so")
    assert label == {None: None, True: "true", False: "false"}[link]
    missing = [w for w in result.warnings if "no unversioned libcudart.so" in w]
    assert bool(missing) is (link is False)
    from hvd_container.facts import facts_from_labels

    facts = facts_from_labels(labels, "image img")
    assert facts is not None and facts.cudart_link is link
