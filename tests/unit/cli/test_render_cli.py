"""`hvd-container recipes list|show|validate` and `render`, through the real entry point."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from _recipe_helpers import CPU_RECIPE, line_of, merged, write
from hvd_container.containers.recipe_loader import list_builtin, load_recipe
from hvd_container.containers.render import build_context, render_definition, render_dockerfile

from hvd_container.cli.app import main


def test_recipes_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recipes", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == list_builtin()
    assert any(line.split()[1] == "cpu-bookworm:1" for line in out)


def test_recipes_show_prints_the_merged_recipe(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recipes", "show", "perlmutter-tf210-pt113"]) == 0
    out = capsys.readouterr().out
    recipe = load_recipe("perlmutter-tf210-pt113")
    assert out.splitlines()[0] == f"# {recipe.image_tag} digest {recipe.digest()}"
    data = yaml.safe_load(out)
    assert data["pytorch"]["version"] == "1.13.1"  # from the child
    assert data["horovod"]["gpu_operations"] == "nccl"  # from the parent
    assert "extends" not in data


def test_recipes_validate_ok_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path, CPU_RECIPE, "good.yaml")
    bad = write(tmp_path, merged(CPU_RECIPE, arch="sparc"), "bad.yaml")
    assert main(["recipes", "validate", str(good), str(bad), "cpu-bookworm"]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"OK   {good} (t:1)", "OK   cpu-bookworm (cpu-bookworm:1)"]
    assert captured.err.splitlines() == [
        f"FAIL {bad}:{line_of(bad, 'arch')}: arch: not allowed (got 'sparc') (allowed: amd64, arm64, ppc64le)"
    ]


def test_recipes_validate_all_builtin(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recipes", "validate"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in out if line.startswith("OK ")] == list_builtin()
    # the rest are notes: built-in recipes that drop inherited list items on purpose
    assert all(line.startswith("NOTE ") for line in out if not line.startswith("OK "))


def test_render_docker_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "cpu-bookworm"]) == 0
    assert capsys.readouterr().out == render_dockerfile(load_recipe("cpu-bookworm"))


def test_render_singularity_to_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "cpu.def"
    assert main(["render", "cpu-bookworm", "--format", "singularity", "-o", str(target)]) == 0
    assert target.read_text() == render_definition(load_recipe("cpu-bookworm"))
    assert capsys.readouterr().err.strip() == f"wrote {target}"
    assert [p.name for p in tmp_path.iterdir()] == ["cpu.def"]


def test_render_docker_file_mentions_the_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "Dockerfile"
    assert main(["render", "cpu-bookworm", "-o", str(target)]) == 0
    assert target.read_text() == render_dockerfile(load_recipe("cpu-bookworm"))
    # every file the Dockerfile copies is named, and the base it expects to find locally
    assert capsys.readouterr().err.splitlines()[-1] == (
        "note: `docker build` also needs horovod-build.lock, horovod.lock, hvd-pip and requirements.lock beside it, "
        "and the local base image hvd-base/debian:bookworm (testbed/base-image.sh bookworm "
        "makes it): `render --context DIR` writes the whole build context"
    )
    copied = {line.split()[1] for line in target.read_text().splitlines()
              if line.startswith("COPY ") and "--from=" not in line}  # fmt: skip
    assert copied == {"horovod-build.lock", "horovod.lock", "hvd-pip", "requirements.lock"}


def test_render_context_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "ctx"
    assert main(["render", "cpu-bookworm", "--context", str(target)]) == 0
    recipe = load_recipe("cpu-bookworm")
    # the shipped lock's two parts come along: the locked packages and Horovod's sdist entry
    names = ["Dockerfile", "horovod-build.lock", "horovod.lock", "hvd-pip", "requirements.lock"]
    assert sorted(p.name for p in target.iterdir()) == names
    assert (target / "Dockerfile").read_text() == render_dockerfile(recipe)
    context = build_context(recipe)
    for name in names[1:]:
        assert (target / name).read_bytes() == context[name]
    assert (target / "hvd-pip").stat().st_mode & 0o777 == 0o755
    assert sorted(capsys.readouterr().err.splitlines()) == [f"wrote {target / n}" for n in names]


def test_render_context_refuses_other_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["render", "cpu-bookworm", "--context", str(tmp_path), "-f", "singularity"])
    assert code == 2
    assert "--context writes a Docker build context" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_render_context_onto_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f").write_text("x")
    assert main(["render", "cpu-bookworm", "--context", str(tmp_path / "f")]) == 2
    assert "exists and is not a directory" in capsys.readouterr().err


def test_render_bad_recipe_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(
        tmp_path, merged(CPU_RECIPE, horovod={"version": "0.28.1", "frameworks": ["pytorch"]})
    )
    target = tmp_path / "out"
    assert main(["render", str(bad), "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hvd-container: error: {bad}:")
    assert "add `cxx17` to horovod.patches" in err
    assert len(err.splitlines()) == 1
    assert not target.exists()


def test_render_missing_output_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "nope" / "Dockerfile"
    assert main(["render", "cpu-bookworm", "-o", str(target)]) == 2
    assert f"directory {target.parent} does not exist" in capsys.readouterr().err


def test_render_unknown_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "cpu-bookworm", "--format", "podman"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "hvd-container: error: --format/-f: 'podman' is not one of 'docker', 'singularity'"
    ]


def test_unknown_recipe_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "no-such"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "no built-in recipe of that name" in err


def test_render_output_that_cannot_be_created(capsys: pytest.CaptureFixture[str]) -> None:
    # /proc exists but no file can be created in it (not even by root)
    assert main(["render", "cpu-bookworm", "-o", "/proc/hvd-x.txt"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "hvd-container: error: --output /proc/hvd-x.txt: cannot write: No such file or directory"
    ]
    assert not list(Path("/proc").glob(".hvd-x.txt*"))


def test_render_context_that_cannot_be_created(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "cpu-bookworm", "--context", "/proc/hvd-ctx/sub"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "hvd-container: error: --context /proc/hvd-ctx/sub: cannot write: No such file or directory"
    ]


def _failing_second_file(monkeypatch: pytest.MonkeyPatch) -> None:
    from hvd_container.containers import context as context_module

    def context(recipe: object) -> dict[str, bytes]:
        # the second file's temporary name lands in a missing directory: it fails after the first
        return {"Dockerfile": b"FROM x\n", "missing/hvd-pip": b"#!/bin/sh\n"}

    monkeypatch.setattr(context_module, "build_context", context)


def test_render_context_failing_midway_removes_the_directory_it_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _failing_second_file(monkeypatch)
    target = tmp_path / "new" / "ctx"
    assert main(["render", "cpu-bookworm", "--context", str(target)]) == 2
    assert "cannot write: No such file or directory" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_render_context_failing_midway_keeps_an_existing_directory_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _failing_second_file(monkeypatch)
    (tmp_path / "Dockerfile").write_text("old\n")
    assert main(["render", "cpu-bookworm", "--context", str(tmp_path)]) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["Dockerfile"]
    assert (tmp_path / "Dockerfile").read_text() == "old\n"


def test_render_from_a_users_dockerfile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text('FROM debian:bookworm\nENV A=1\nLABEL team="ml"\nRUN echo hi\n')
    assert main(["render", "--from-dockerfile", str(dockerfile), "--format", "singularity"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Bootstrap: docker\nFrom: debian:bookworm\n")
    assert "%labels\nteam ml\n" in out and "export A=1\n" in out and "echo hi\n" in out


@pytest.mark.parametrize(
    "extra", [["cpu-bookworm", "--format", "singularity"], ["--format", "docker"], []]
)
def test_render_from_dockerfile_goes_alone_with_singularity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM debian:bookworm\n")
    assert main(["render", "--from-dockerfile", str(dockerfile), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hvd-container: error: --from-dockerfile: ") and err.count("\n") == 1


def test_render_from_a_missing_dockerfile_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"
    assert main(["render", "--from-dockerfile", str(missing), "-f", "singularity"]) == 2
    assert capsys.readouterr().err == (
        f"hvd-container: error: --from-dockerfile {missing}: no such file\n"
    )


@pytest.mark.parametrize("text", ["", "\n", "RUN echo hi\n"])
def test_a_dockerfile_without_from_is_one_line(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(text)  # spython exits the process on these
    assert main(["render", "--from-dockerfile", str(dockerfile), "-f", "singularity"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no FROM instruction" in err, err
