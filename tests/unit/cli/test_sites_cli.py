"""`hvd-container sites list|show`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from _launch_helpers import isolated, write  # noqa: F401

from hvd_container.cli.app import main


def test_sites_list(capsys: pytest.CaptureFixture[str], isolated: Path) -> None:  # noqa: F811
    write(
        isolated / "config" / "hvd-container" / "sites" / "mine.yaml",
        "name: mine\nruntime: {kind: pyxis}\n",
    )
    assert main(["sites", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line[2:].split()[0] for line in lines[:-1]]
    assert names == [
        "cscs-clariden", "cscs-daint", "jupiter", "juwels-booster", "local", "mine", "neuron", "perlmutter", "zih-alpha",
        "zih-capella", "zih-ml",
    ]  # fmt: skip
    assert lines[4].startswith("* local ")
    assert "pyxis" in lines[5] and " yours " in lines[5]
    # the columns line up, a profile of yours or not (its path broke them: sites show, --json)
    assert (
        len(
            {
                line.index(" built-in ") if " built-in " in line else line.index(" yours ")
                for line in lines[:-1]
            }
        )
        == 1
    )
    assert "built-in" in lines[4]
    assert lines[-1] == "(* selected by default)"


def test_sites_list_marks_the_selected_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HVD_CONTAINER_SITE", "perlmutter")
    assert main(["sites", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("*")][0].startswith("* perlmutter ")
    assert lines[-1] == "(* selected by $HVD_CONTAINER_SITE)"


def test_sites_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sites", "show", "perlmutter"]) == 0
    out = capsys.readouterr().out
    first, rest = out.split("\n", 1)
    assert first.startswith("# ") and first.endswith("perlmutter.yaml (selected by argument)")
    data = yaml.safe_load(rest)
    assert data["name"] == "perlmutter"
    assert data["runtime"]["modules"] == ["gpu", "nccl-plugin"]
    assert data["scheduler"]["gpu_request"] == "gpus-per-node"


def test_sites_show_default_and_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["sites", "show"]) == 0
    assert yaml.safe_load(capsys.readouterr().out.split("\n", 1)[1])["name"] == "local"
    bad = write(tmp_path / "bad.yaml", "name: bad\nruntime: {kind: docker}\n")
    assert main(["sites", "show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"hvd-container: error: {bad}:2: runtime.kind: not allowed (got 'docker') (allowed: apptainer, singularity, charliecloud, container-engine, none, podman-hpc, pyxis, sarus-suite, shifter)\n"
    )


def test_a_broken_user_profile_does_not_break_other_commands(
    capsys: pytest.CaptureFixture[str],
    isolated: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bad = write(
        isolated / "config" / "hvd-container" / "sites" / "bad.yaml", "name: bad\nruntime: [\n"
    )
    passed_over = f"hvd-container: warning: site profile bad passed over: {bad}:3: not valid YAML"
    # a launch that detects its site by the Slurm cluster name reads every profile
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "perlmutter-nope")
    assert main(["run", "--image", "/x.sif", "-n", "1", "--dry-run", "t.py"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("sbatch ") and "ch-run" in out
    assert [line for line in err.splitlines() if "passed over" in line][0].startswith(passed_over)
    assert main(["sites", "list"]) == 0
    out, err = capsys.readouterr()
    assert "* local" in out and "bad" not in out and err.count(passed_over) == 1
    # asked for by name, it is the error it is
    assert main(["sites", "show", "bad"]) == 2
    assert capsys.readouterr().err.startswith(f"hvd-container: error: {bad}:3: not valid YAML")


def test_sites_show_names_the_facts_its_sources_could_not_confirm(
    capsys: pytest.CaptureFixture[str],
) -> None:

    from hvd_container.cli.app import main

    assert main(["sites", "show", "perlmutter"]) == 0
    unconfirmed = [
        line for line in capsys.readouterr().out.splitlines() if line.startswith("# unconfirmed: ")
    ]
    assert any("nccl-plugin" in line and "https://" in line for line in unconfirmed), unconfirmed
    site = __import__("hvd_container.launcher.sites.loader", fromlist=["load_site"]).load_site(
        "perlmutter"
    )
    assert all(s.url.startswith("https://") and s.checked for s in site.sources)
    assert len(unconfirmed) == sum(not s.confirmed for s in site.sources) >= 1


def test_sites_validate_lists_every_problem_with_its_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    isolated: Path,  # noqa: F811
) -> None:
    bad = write(
        tmp_path / "mysite.yaml",
        "name: other\nruntime: {kind: charliecloud, bogus: 1}\nscheduler:\n  gpus_per_node: -1\n"
        "  partitions:\n    p1: {gpus_per_node: x, max_time: soon}\n",
    )
    assert main(["sites", "validate", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"hvd-container: error: {bad}:2: runtime.bogus: unknown key (allowed: kind, gpu, flags, python, injects_glibc)",
        f"hvd-container: error: {bad}:4: scheduler.gpus_per_node: must be 0 or more (got -1)",
        f"hvd-container: error: {bad}:6: scheduler.partitions.p1.gpus_per_node: expected an integer (got 'x')",
        f"hvd-container: error: {bad}:6: scheduler.partitions.p1.max_time: not allowed (allowed: a Slurm time: MINUTES, HH:MM:SS or D-HH:MM:SS) (got 'soon')",
        f"hvd-container: error: {bad}:1: name: must equal the file name 'mysite' (got 'other'): rename the file to other.yaml or write name: mysite",
    ]


@pytest.mark.parametrize(
    "name",
    [
        "jupiter",
        "juwels-booster",
        "local",
        "neuron",
        "perlmutter",
        "zih-alpha",
        "zih-capella",
        "zih-ml",
    ],  # fmt: skip
)
def test_every_shipped_profile_validates(
    name: str,
    capsys: pytest.CaptureFixture[str],
    isolated: Path,  # noqa: F811
) -> None:
    from hvd_container.launcher.sites.loader import BUILTIN_DIR

    assert main(["sites", "validate", str(BUILTIN_DIR / f"{name}.yaml")]) == 0
    assert f"site {name} is valid" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("module", "flag", "cray_mpich"),
    [("mpi", "--mpi", True), ("cuda-mpi", "--cuda-mpi", True),
     ("openmpi-pmi2", "--openmpi-pmi2", False), ("openmpi-pmix", "--openmpi-pmix", False)],
)  # fmt: skip
def test_a_profile_picks_one_podman_hpc_mpi_module(
    module: str,
    flag: str,
    cray_mpich: bool,
    tmp_path: Path,
    isolated: Path,  # noqa: F811
) -> None:
    from _launch_helpers import plan_launch
    from hvd_container.launcher.plan.request import LaunchRequest
    from hvd_container.launcher.sites.loader import load_site

    path = write(tmp_path / "p.yaml", f"extends: perlmutter\nname: p\nother_runtimes:\n"
                 f"  - {{kind: podman-hpc, mpi_module: {module}}}\n")  # fmt: skip
    result = plan_launch(
        load_site(str(path)),
        LaunchRequest(script="t.py", image="u/i:t", runtime="podman-hpc", ntasks=8, account="a_g"),
    )
    argv = result.step
    modules = [a for a in argv if a in ("--mpi", "--cuda-mpi", "--openmpi-pmi2", "--openmpi-pmix")]
    assert modules == [flag]
    assert result.launch.runtime.injects_host_mpi(result.launch) is cray_mpich


def test_podman_hpc_mpi_modules_are_not_flags(tmp_path: Path, isolated: Path) -> None:  # noqa: F811
    from hvd_container.launcher.sites.loader import load_site

    from hvd_container.core.errors import UserError

    path = write(tmp_path / "p.yaml", "name: p\nruntime: {kind: podman-hpc, flags: [--cuda-mpi]}\n")
    with pytest.raises(
        UserError,
        match=r"p\.yaml:2: runtime.flags: podman-hpc's MPI modules go in mpi_module \(allowed: mpi, cuda-mpi, openmpi-pmi2, openmpi-pmix\), not flags: write mpi_module: cuda-mpi",
    ):
        load_site(str(path))
