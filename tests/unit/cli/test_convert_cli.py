"""`hvd-container convert` through the real entry point: flags checked before any work,
one-line errors, nothing written on failure. No Docker engine is reachable here on purpose."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hvd_container.containers.convert.site_images import publish_to_site
from hvd_container.containers.recipe_loader import load_recipe
from hvd_container.containers.render import render_definition

from hvd_container.cli.app import main
from hvd_container.core.errors import StepFailed, UserError

RECIPE = "cpu-bookworm"


@pytest.fixture(autouse=True)
def no_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An engine that is not there: a socket path that does not exist."""
    host = f"unix://{tmp_path}/missing/docker.sock"
    monkeypatch.setenv("DOCKER_HOST", host)
    monkeypatch.chdir(tmp_path)
    return host


def error_of(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line, no traceback
    return code, err.removeprefix("hvd-container: error: ").rstrip("\n")


def test_arch_is_checked_before_the_image(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = error_of(capsys, "convert", "nosuch:1", "--to", "sif", "--arch", "sparc")
    assert code == 2
    assert err == "--arch: unknown architecture 'sparc' (allowed: amd64, arm64, ppc64le)"


def test_recipe_arch_mismatch_is_refused_before_the_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = load_recipe(RECIPE)
    assert recipe.arch == "amd64"
    code, err = error_of(capsys, "convert", RECIPE, "--to", "sif", "--arch", "arm64")
    # Not "image not found" / "cannot reach the Docker engine": the engine is never asked.
    assert (code, err) == (
        2,
        "--arch arm64: recipe 'cpu-bookworm' has arch: amd64, its image cpu-bookworm:1 is built "
        "for amd64 (allowed here: amd64; for arm64 set arch: arm64 in a copy of the recipe and "
        "build it)",
    )
    assert os.listdir(tmp_path) == []
    # The recipe's own arch passes this check and goes on to the (unreachable) engine.
    code, err = error_of(capsys, "convert", RECIPE, "--to", "sif", "--arch", "amd64")
    assert code == 2 and err.startswith("cannot reach the Docker engine at ")


def test_library_checks_arch_before_the_engine(tmp_path: Path) -> None:
    from hvd_container.containers.convert.sif_native import convert_image_to_sif

    with pytest.raises(UserError, match=r"^--arch: unknown architecture 'sparc'"):
        convert_image_to_sif("nosuch:1", tmp_path / "x.sif", arch="sparc")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--to", "sif", "--engine", "apptainer", "--compression", "zstd"],
            "--compression: not used with --to sif --engine apptainer "
            "(only with --to sif --engine native)",
        ),
        (
            ["--to", "sif", "--engine", "apptainer", "--arch", "amd64"],
            "--arch: not used with --to sif --engine apptainer (only with --to sif --engine native)",
        ),
        (
            ["--to", "sif", "--engine", "apptainer", "--threads", "2"],
            "--threads: not used with --to sif --engine apptainer "
            "(only with --to sif --engine native)",
        ),
        (
            ["--to", "def", "--compression", "xz"],
            "--compression: not used with --to def (only with --to sif --engine native)",
        ),
        (
            ["--to", "def", "--threads", "2"],
            "--threads: not used with --to def (only with --to sif --engine native)",
        ),
        (
            ["--to", "def", "--engine", "apptainer"],
            "--engine: not used with --to def (only with --to sif)",
        ),
        (
            ["--to", "sif", "--archive", "x.tar"],
            "--archive: not used with --to sif --engine native (only with --to sif --engine apptainer)",
        ),
        (
            ["--to", "shifter", "-o", "x.sif"],
            "--output: not used with --to shifter (only with --to sif or --to def)",
        ),
        (
            ["--to", "sif", "--bootstrap", "docker"],
            "--bootstrap: not used with --to sif --engine native (only with --to def)",
        ),
        (
            ["--to", "def", "--site", "perlmutter"],
            "--site: not used with --to def (only with --to podman-hpc or --to shifter)",
        ),
        (
            ["--to", "sif", "--compression", "lz4"],
            "--compression: unknown compressor 'lz4' (allowed: gzip, zstd, xz)",
        ),
    ],
)
def test_flags_the_target_would_ignore_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, err = error_of(capsys, "convert", RECIPE, *args)
    assert (code, err) == (2, message)
    assert os.listdir(tmp_path) == []  # nothing written


@pytest.mark.parametrize("bad", ["existing", "missing/x.def", "/proc/x.def"])
def test_def_output_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str) -> None:
    (tmp_path / "existing").mkdir()
    code, err = error_of(capsys, "convert", RECIPE, "--to", "def", "-o", bad)
    assert code == 2
    expected = {
        "existing": "--output existing: is a directory; give a file name ending in .def",
        "missing/x.def": "--output missing/x.def: directory missing does not exist",
        # where the check cannot tell (a folder no file can be made in): a line, not a traceback
        "/proc/x.def": "--output /proc/x.def: cannot write: No such file or directory",
    }
    assert err == expected[bad]
    assert os.listdir(tmp_path) == ["existing"]
    assert os.listdir(tmp_path / "existing") == []


def test_def_notes_debootstrap_and_offers_docker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = load_recipe(RECIPE)
    assert main(["convert", RECIPE, "--to", "def", "-o", "a.def"]) == 0
    out, err = capsys.readouterr()
    assert out == "wrote a.def\n"
    assert err.startswith("note: this definition uses `Bootstrap: debootstrap`")
    assert "--bootstrap docker starts from debian:bookworm" in err
    assert (tmp_path / "a.def").read_text() == render_definition(recipe)

    assert main(["convert", RECIPE, "--to", "def", "-o", "b.def", "--bootstrap", "docker"]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == ("wrote b.def\n", "")
    a_lines = (tmp_path / "a.def").read_text().splitlines()
    b_lines = (tmp_path / "b.def").read_text().splitlines()
    assert a_lines[:3] == [
        "Bootstrap: debootstrap",
        "OSVersion: bookworm",
        "MirrorURL: http://deb.debian.org/debian",
    ]
    assert b_lines[:2] == ["Bootstrap: docker", "From: debian:bookworm"]
    assert b_lines[2:] == a_lines[3:]  # only the header differs


def test_def_bootstrap_debootstrap_needs_a_debootstrap_base(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = error_of(
        capsys, "convert", "perlmutter-tf210-pt113", "--to", "def", "--bootstrap", "debootstrap"
    )
    assert code == 2
    assert err.startswith("--bootstrap debootstrap: recipe 'perlmutter-tf210-pt113' starts from")


def test_site_push_with_the_engine_down_is_one_line(no_docker: str) -> None:
    with pytest.raises(UserError, match=r"^cannot reach the Docker engine at ") as exc:
        publish_to_site("cpu:1", runtime="shifter", registry="127.0.0.1:5000", login_host="l1")
    assert "\n" not in str(exc.value)


def test_site_push_goes_through_the_one_push(monkeypatch: pytest.MonkeyPatch) -> None:
    """The site path pushes with containers.push (credentials, masking, rollback)."""
    from hvd_container.containers import push

    calls = []

    def recorded(api: object, image: str, registry: str, report: object = None) -> None:
        calls.append((image, registry))
        raise StepFailed("push of 127.0.0.1:5000/cpu:1 refused: denied")

    monkeypatch.setattr(push, "push_image", recorded)
    with pytest.raises(StepFailed, match="refused: denied"):
        publish_to_site("cpu:1", runtime="shifter", registry="127.0.0.1:5000", login_host="l1")
    assert calls == [("cpu:1", "127.0.0.1:5000")]


def test_convert_to_shifter_with_the_engine_down(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = error_of(
        capsys, "convert", "cpu:1", "--to", "shifter", "--registry", "127.0.0.1:5000",
        "--login-host", "login1",
    )  # fmt: skip
    assert code == 2
    assert err.startswith("cannot reach the Docker engine at ")


def test_site_push_takes_registry_and_login_host_from_the_site_lookup() -> None:
    from hvd_container.containers.convert.site_images import SiteTarget

    asked: list[str | None] = []
    pushed: list[tuple[str, str]] = []

    def lookup(name: str | None) -> SiteTarget:
        asked.append(name)
        return SiteTarget("mysite", None if name == "bare" else "reg.example:5000", None)

    with pytest.raises(
        UserError,
        match=r"^--registry: needed for --to shifter \(site 'mysite' has no images.registry\)$",
    ):
        publish_to_site("cpu:1", runtime="shifter", site_name="bare", site_lookup=lookup)
    with pytest.raises(UserError, match=r"site 'mysite' has no login_host"):
        publish_to_site("cpu:1", runtime="shifter", site_name="s", site_lookup=lookup,
                        push=lambda image, registry: pushed.append((image, registry)))  # fmt: skip
    assert asked == ["bare", "s"] and pushed == []


def test_def_of_an_arm64_recipe_says_how_apptainer_builds_it_for_arm64(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Apptainer's debootstrap agent bootstraps the build host's architecture whatever the
    recipe says (runtime.GOARCH, apptainer's conveyorPacker_debootstrap.go): the note says
    where to build it, or how with a docker bootstrap."""
    assert main(["convert", "cpu-bookworm-torch-arm64", "--to", "def", "-o", "a.def"]) == 0
    out, err = capsys.readouterr()
    assert out == "wrote a.def\n"
    lines = err.splitlines()
    assert lines[0].startswith("note: this definition uses `Bootstrap: debootstrap`")
    assert lines[1].startswith(
        "note: the recipe is arm64, and Apptainer's debootstrap bootstrap builds for the build "
        "host's own architecture: build this definition on an arm64 machine"
    )
    assert "`apptainer build --arch arm64`" in lines[1]
    assert main(["convert", "cpu-bookworm-torch-arm64", "--to", "def", "-o", "b.def",
                 "--bootstrap", "docker"]) == 0  # fmt: skip
    out, err = capsys.readouterr()
    assert err.startswith("note: the recipe is arm64: build it with `apptainer build --arch arm64`")
    assert err.count("\n") == 1
