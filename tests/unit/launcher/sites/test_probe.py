"""The pure parts of `sites probe`: reading Slurm's records, writing a profile, drift."""

from __future__ import annotations

from pathlib import Path

import pytest
from _launch_helpers import isolated, write  # noqa: F401
from hvd_container.launcher.sites import probe
from hvd_container.launcher.sites.loader import load_site, validate_site_file


@pytest.mark.parametrize(
    ("gres", "expected"),
    [
        ("gpu:2", (2, None)),
        ("gpu:a100:4(S:0-1)", (4, "a100")),
        ("nic:1,gpu:h200:8", (8, "h200")),
        ("(null)", (0, None)),
        ("", (0, None)),
    ],
)
def test_gpus_per_node_and_type_from_a_nodes_gres(
    gres: str, expected: tuple[int, str | None]
) -> None:
    assert probe._gpus(gres) == expected


def _found(**partitions: probe.PartitionFacts) -> probe.SiteProbe:
    return probe.SiteProbe(
        host="login1", date="2026-11-25", cluster="c", default_partition="debug",
        partitions=partitions, mpi_plugins=["none", "pmi2", "pmix"], mpi_default="none",
        runtimes={"charliecloud": "0.31", "podman-hpc": "found"}, modules=["cuda/13.0", "nccl-plugin", "singularity/4.3.4"],
    )  # fmt: skip


TESTBED = {
    "debug": probe.PartitionFacts(2, None, "amd64", 4, None),
    "gpu": probe.PartitionFacts(2, None, "amd64", 4, "01:00:00"),
}


def test_the_local_profile_has_no_drift_from_the_testbed_it_describes() -> None:
    assert probe.drift(load_site("local"), _found(**TESTBED)) == []


def test_every_drifted_fact_is_one_line() -> None:
    found = _found(
        debug=probe.PartitionFacts(4, "h100", "arm64", 4, None),
        gpu=probe.PartitionFacts(2, None, "amd64", 4, "02:00:00"),
    )
    found.modules = ["cuda/13.0", "singularity/4.3.4"]
    found.mpi_plugins = ["none", "pmi2"]
    assert probe.drift(load_site("local"), found) == [
        "scheduler.partitions.debug.gpus_per_node: 2 → 4",
        f"scheduler.partitions.debug.arch: {load_site('local').arch} → arm64",
        "scheduler.partitions.gpu.max_time: 1:00:00 → 02:00:00",
        "mpi: pmix → not among srun's plugins (none, pmi2)",
        "site_modules: nccl-plugin → (absent)",
    ]


def test_a_probed_profile_validates_and_names_its_sources(tmp_path: Path, isolated: Path) -> None:  # noqa: F811
    site = probe.write_profile(_found(**TESTBED), str(tmp_path / "mysite.yaml"))
    assert site.name == "mysite" and site.scheduler.partition == "debug"
    assert site.runtime.kind == "charliecloud" and site.mpi == "none"
    assert site.scheduler.gpu_request == "gres" and site.gpus_per_node("gpu") == 2
    assert {s.probed for s in site.sources} == {"login1, 2026-11-25"}
    assert validate_site_file(tmp_path / "mysite.yaml").name == "mysite"
    text = (tmp_path / "mysite.yaml").read_text()
    assert "# TODO: shared_paths" in text


def test_odd_values_from_the_site_stay_in_their_place_or_leave_no_file(
    tmp_path: Path,
    isolated: Path,  # noqa: F811
) -> None:
    found = _found(**{"weird: name\n#": probe.PartitionFacts(1, "x\ny", "amd64", 4, None)})
    found.default_partition = "weird: name\n#"
    target = tmp_path / "odd.yaml"
    with pytest.raises(Exception, match=r"odd\.yaml"):
        probe.write_profile(found, str(target))
    assert not target.exists()  # refused by validate: nothing written


def test_the_output_name_is_the_sites_name(tmp_path: Path, isolated: Path) -> None:  # noqa: F811
    from hvd_container.core.errors import UserError

    with pytest.raises(UserError, match=r"-o .*My Site\.yaml: the file's name is the site's name"):
        probe.write_profile(_found(**TESTBED), str(tmp_path / "My Site.yaml"))


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("My Site.yaml", "the file's name is the site's name"),
        ("folder.yaml", "is a directory, expected a file path"),
        ("missing/mysite.yaml", "directory missing does not exist"),
    ],
)
def test_an_output_it_could_not_write_is_said_before_the_probe_runs(
    target: str,
    problem: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    isolated: Path,  # noqa: F811
) -> None:
    """It probed first (with --nodes: a job in the queue), then refused -o's file."""
    from hvd_container.cli.app import main

    asked = tmp_path / "asked"
    for program in ("scontrol", "sinfo", "srun"):  # each notes that the probe ran it
        write(tmp_path / "bin" / program, f"#!/bin/sh\necho {program} >> {asked}\nexit 1\n").chmod(
            0o755
        )
    (tmp_path / "folder.yaml").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.chdir(tmp_path)
    assert main(["sites", "probe", "--nodes", "-o", target]) == 2
    assert capsys.readouterr().err == f"hvd-container: error: -o {target}: {problem}" + (
        ": NAME.yaml with lower-case letters, digits and . _ - (e.g. -o mysite.yaml)\n"
        if target == "My Site.yaml"
        else "\n"
    )
    assert not asked.exists()


def test_a_profile_it_cannot_write_is_one_line(tmp_path: Path, isolated: Path) -> None:  # noqa: F811
    from hvd_container.core.errors import UserError

    with pytest.raises(UserError, match=r"^-o /proc/mysite\.yaml: cannot write: "):
        probe.write_profile(_found(**TESTBED), "/proc/mysite.yaml")


def test_a_command_that_does_not_answer_is_said_not_guessed(tmp_path: Path) -> None:
    slow = write(tmp_path / "slow", "#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    unread: list[str] = []
    assert probe._run([str(slow)], 0.5, unread) is None
    assert unread == [f"{slow}: no answer within 0.5 s"]


def test_a_nodes_glibc_is_read_and_compared_with_the_profile() -> None:
    """`sites probe --nodes` reads ldd on a node: the way to confirm a profile's
    injects_glibc (Perlmutter's 2.31 rests on an unconfirmed source)."""
    found = _found(**TESTBED)
    probe.read_node_lines(
        found,
        "arch x86_64\nglibc ldd (GNU libc) 2.38\ngpu NVIDIA A100-SXM4-40GB, 580.65.06\n",
    )
    assert (found.node_arch, found.node_glibc) == ("amd64", "2.38")
    assert (found.gpu_name, found.gpu_driver) == ("NVIDIA A100-SXM4-40GB", "580.65.06")
    assert probe.drift(load_site("perlmutter"), found)[-2:] == [
        "runtime shifter: injects_glibc: 2.31 → 2.38",
        "runtime podman-hpc: injects_glibc: 2.31 → 2.38",
    ]
    debian = _found(**TESTBED)
    probe.read_node_lines(debian, "arch aarch64\nglibc ldd (Debian GLIBC 2.36-9+deb12u4) 2.36\n")
    assert (debian.node_arch, debian.node_glibc, debian.gpu_driver) == ("arm64", "2.36", None)
    _data, todo = probe.profile_data(debian, "x")
    assert any(t.startswith("runtime.injects_glibc: the nodes' glibc is 2.36") for t in todo)


def test_a_probe_where_no_slurm_answers_exits_non_zero_with_the_reason(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    isolated: Path,  # noqa: F811
) -> None:
    """It printed a profile of TODO lines and exited 0."""
    from hvd_container.cli.app import main

    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol, sinfo, srun here
    monkeypatch.chdir(tmp_path)
    assert main(["sites", "probe"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "hvd-container: error: sites probe: no Slurm answered here (scontrol: not on PATH): run "
        "it on the site's login node, where scontrol lists the partitions\n"
    )
    assert main(["sites", "probe", "-o", str(tmp_path / "x.yaml")]) == 2
    assert not (tmp_path / "x.yaml").exists()


def test_a_partitions_default_time_is_drafted_and_its_drift_said() -> None:
    """Slurm's DefaultTime (the limit of a job without --time): `sites probe` writes it into
    the partition's entry, and --diff says when the site changed it."""
    gpu = probe.PartitionFacts(2, None, "amd64", 4, "01:00:00", default_time="00:30:00")
    data, _todo = probe.profile_data(_found(debug=TESTBED["debug"], gpu=gpu), "x")
    partitions = data["scheduler"]["partitions"]  # type: ignore[index]
    assert partitions["gpu"]["default_time"] == "00:30:00"
    assert "default_time" not in partitions["debug"]  # none set: nothing written
    assert probe.drift(load_site("local"), _found(debug=TESTBED["debug"], gpu=gpu)) == [
        "scheduler.partitions.gpu.default_time: (absent) → 00:30:00"
    ]


def test_a_partitions_memory_facts_are_drafted_and_their_drift_said() -> None:
    """DefMemPerCPU and MaxMemPerNode (scontrol show partition): `sites probe` writes them as
    the partition's memory, and --diff says where the profile's differ (ZIH's 300 MB a CPU)."""
    gpu = probe.PartitionFacts(
        2, None, "amd64", 4, "01:00:00", default_mem_per_cpu=300, max_mem_per_node=990000
    )
    data, _todo = probe.profile_data(_found(debug=TESTBED["debug"], gpu=gpu), "x")
    partitions = data["scheduler"]["partitions"]  # type: ignore[index]
    assert partitions["gpu"]["memory"] == {"per_node": "990000M", "default_per_cpu": "300M"}
    assert "memory" not in partitions["debug"]
    assert probe.drift(load_site("local"), _found(debug=TESTBED["debug"], gpu=gpu)) == [
        "scheduler.memory.default_per_cpu: (absent) → 300M",
        "scheduler.memory.per_node: (absent) → 990000M",
    ]
    alpha = load_site("zih-alpha")
    same = probe.PartitionFacts(8, "A100", "amd64", 48, "7-00:00:00", default_mem_per_cpu=300,
                                max_mem_per_node=990000)  # fmt: skip
    assert not [d for d in probe.drift(alpha, _found(alpha=same)) if "memory" in d]


def test_memory_figures_of_scontrol_are_read_as_megabytes() -> None:
    assert probe._megabytes("300") == 300
    assert probe._megabytes("UNLIMITED") is None
    assert probe._megabytes("3e5") is None and probe._megabytes(None) is None
