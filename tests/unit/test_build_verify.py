"""check-build parsing, comparison with the recipe, and the facts recorded as labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from containers.recipe import load_recipe
from containers.verify import (
    CheckBuild,
    VerifyResult,
    compare_check_build,
    compare_versions,
    expected_check_build,
    fact_labels,
    mpi_version,
    parse_check_build,
    parse_versions,
    verify_image,
)

GOLDEN = Path(__file__).parent.parent / "golden" / "checkbuild" / "cpu-bookworm.txt"


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
