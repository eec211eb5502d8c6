"""The Singularity definition: spython's known mistakes are avoided or corrected."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _recipe_helpers import CPU_RECIPE, GPU_RECIPE, merged, write
from hvd_container.containers.blocks import PHASES, hvd_pip_script
from hvd_container.containers.convert.from_dockerfile import (
    _spython_convert,
    dockerfile_to_definition,
    hazards,
    instructions,
)
from hvd_container.containers.printers.dockerfile import MARKER_PREFIX
from hvd_container.containers.recipe import Recipe
from hvd_container.containers.recipe_loader import list_builtin, load_recipe
from hvd_container.containers.render import build_context, render_definition, render_dockerfile

from hvd_container.core.errors import UserError


def sections(definition: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"header": []}
    current = "header"
    for line in definition.splitlines():
        match = re.fullmatch(r"%(\w+)", line)
        if match:
            current = match.group(1)
            assert current not in out, f"section %{current} twice"
            out[current] = []
        elif line.strip():
            out[current].append(line)
    return out


@pytest.fixture
def rich(tmp_path: Path) -> Recipe:
    data = merged(
        CPU_RECIPE,
        env={"OMP_NUM_THREADS": "1", "GREETING": "hello world"},
        labels={"maintainer": "someone", "org.example.team": "ml infra"},
        pip=["rich"],
        checks=["python -c 'import horovod.torch'"],
        description="test image",
    )
    return load_recipe(write(tmp_path, data))


def test_each_label_is_its_own_key_value_line(rich: Recipe) -> None:
    labels = sections(render_definition(rich))["labels"]
    assert "maintainer someone" in labels
    assert "org.example.team ml infra" in labels
    assert f"org.hvd-container.recipe.digest {rich.digest()}" in labels
    assert "org.hvd-container.recipe.name t" in labels
    assert not any("=" in line or '"' in line for line in labels)


def test_spython_alone_gets_labels_wrong(rich: Recipe) -> None:
    """The mistake being corrected: spython keeps `key="value"` as the label key."""
    raw = sections(_spython_convert(render_dockerfile(rich)))["labels"]
    assert 'maintainer="someone"' in raw


def test_env_in_environment_and_exported_in_post(rich: Recipe) -> None:
    parts = sections(render_definition(rich))
    assert 'export OMP_NUM_THREADS="1"' in parts["environment"]
    assert 'export GREETING="hello world"' in parts["environment"]
    assert "export PATH=/opt/venv/bin:$PATH" in parts["environment"]
    post = parts["post"]
    assert "export PATH=/opt/venv/bin:$PATH" in post
    assert "export DEBIAN_FRONTEND=noninteractive" in post
    assert 'export GREETING="hello world"' in post
    after_script = post[post.index("HVD_CONTAINER_EOF") + 1 :]
    assert not any(re.fullmatch(r"[A-Z_]+=.*", line) for line in after_script)


def test_spython_alone_does_not_export_in_post(rich: Recipe) -> None:
    raw = sections(_spython_convert(render_dockerfile(rich)))["post"]
    assert "DEBIAN_FRONTEND=noninteractive" in raw


def test_pip_config_url_comes_from_the_builder_environment(rich: Recipe) -> None:
    post = sections(render_definition(rich))["post"]
    assert 'export HVD_PIP_CONFIG_URL="${HVD_PIP_CONFIG_URL:-}"' in post
    assert "HVD_PIP_CONFIG_URL=" not in post


def test_post_runs_in_dockerfile_order(rich: Recipe) -> None:
    dockerfile = render_dockerfile(rich)
    post = sections(render_definition(rich))["post"]
    markers_d = [line for line in dockerfile.splitlines() if line.startswith(MARKER_PREFIX)]
    markers_p = [line for line in post if line.startswith(MARKER_PREFIX)]
    assert markers_p == markers_d
    runs = [
        line[4:].removesuffix(" \\") for line in dockerfile.splitlines() if line.startswith("RUN ")
    ]
    assert len(runs) == len([i for i in instructions(dockerfile) if i.startswith("RUN ")])
    position = -1
    for run in runs:  # each RUN's first line appears in %post after the previous one
        position = next(
            n for n in range(position + 1, len(post)) if post[n].removesuffix(" \\") == run
        )
    assert [m[len(MARKER_PREFIX) :] for m in markers_p][0] == PHASES[0]


def test_post_stops_at_the_first_failure(rich: Recipe) -> None:
    assert sections(render_definition(rich))["post"][0] == "set -e"


def test_no_user_switch_and_no_exec_form(rich: Recipe) -> None:
    definition = render_definition(rich)
    assert "su -" not in definition
    assert not any(line.lstrip().startswith("[") for line in sections(definition)["post"])


def test_context_files_are_written_by_post_not_relative_files(rich: Recipe) -> None:
    parts = sections(render_definition(rich))
    assert "files" not in parts
    post = "\n".join(parts["post"])
    script = "\n".join(line for line in hvd_pip_script().decode().splitlines() if line.strip())
    heredoc = f"cat > /usr/local/bin/hvd-pip <<'HVD_CONTAINER_EOF'\n{script}\nHVD_CONTAINER_EOF"
    assert heredoc in post
    assert post.index("HVD_CONTAINER_EOF\n") < post.index("chmod 0755 /usr/local/bin/hvd-pip")


def test_spython_alone_writes_a_relative_files_line(rich: Recipe) -> None:
    raw = sections(_spython_convert(render_dockerfile(rich)))["files"]
    assert raw == ["hvd-pip /usr/local/bin/hvd-pip"]


def test_other_files_keep_absolute_destinations() -> None:
    dockerfile = "FROM debian:bookworm\nCOPY /etc/hosts /opt/hosts\nRUN true\n"
    parts = sections(dockerfile_to_definition(dockerfile))
    assert parts["files"] == ["/etc/hosts /opt/hosts"]
    assert all(line.split()[-1].startswith("/") for line in parts["files"])


def test_runscript_runs_the_command_given(rich: Recipe) -> None:
    parts = sections(render_definition(rich))
    assert parts["runscript"] == [
        'if [ "$#" -eq 0 ]; then',
        "    exec /bin/bash",
        "fi",
        'exec "$@"',
    ]
    assert "startscript" not in parts


def test_spython_alone_hands_the_command_to_bash(rich: Recipe) -> None:
    raw = sections(_spython_convert(render_dockerfile(rich)))["runscript"]
    assert raw == ['exec /bin/bash "$@"']


def test_checks_become_the_test_section(rich: Recipe) -> None:
    assert sections(render_definition(rich))["test"] == ["python -c 'import horovod.torch'"]


def test_debootstrap_base_uses_the_debootstrap_agent(rich: Recipe) -> None:
    header = sections(render_definition(rich))["header"]
    assert header == [
        "Bootstrap: debootstrap",
        "OSVersion: bookworm",
        "MirrorURL: http://deb.debian.org/debian",
    ]


def test_docker_base_is_a_single_stage(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, GPU_RECIPE))
    header = sections(render_definition(recipe))["header"]
    assert header == ["Bootstrap: docker", "From: nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04"]


def test_help_has_the_description(rich: Recipe) -> None:
    assert sections(render_definition(rich))["help"] == ["    test image"]


@pytest.mark.parametrize("name", list_builtin())
def test_shipped_recipes_render_without_hazards(name: str) -> None:
    """spython could convert each rendered Dockerfile, but for Horovod's stages, which a
    definition file of the recipe keeps in one (`render --format singularity`)."""
    recipe = load_recipe(name)
    found = hazards(render_dockerfile(recipe))
    if recipe.horovod is not None and recipe.lock is not None:
        assert {h.split(": ")[-1] for h in found} == {
            "a second stage is merged into the first",
            "COPY --from needs a multi-stage build",
        }, found
    else:
        assert found == []


HAZARDS = {
    "second stage": "FROM a AS build\nRUN make\nFROM b\nRUN true\n",
    "chown": "FROM a\nCOPY --chown=1000:1000 /x /y\n",
    "copy from": "FROM a\nCOPY --from=build /x /y\n",
    "arg user": "FROM a\nARG USERNAME=bob\n",
    "user": "FROM a\nUSER bob\n",
    "exec run": 'FROM a\nRUN ["echo", "hi"]\n',
    "exec shell": 'FROM a\nSHELL ["/bin/bash", "-c"]\n',
    "entrypoint": 'FROM a\nENTRYPOINT ["python"]\n',
    "cmd": "FROM a\nCMD python x.py\n",
    "workdir": "FROM a\nWORKDIR /src\n",
    "escaped quote": 'FROM a\nENV A="x\\"y" B=2\n',
    "legacy env": "FROM a\nENV PYTHONUNBUFFERED 1\n",
    "multi label": 'FROM a\nLABEL a="x" b="y"\n',
    "relative copy": "FROM a\nCOPY x .\n",
}


@pytest.mark.parametrize("name", list(HAZARDS))
def test_each_spython_hazard_is_refused(name: str) -> None:
    dockerfile = HAZARDS[name]
    found = hazards(dockerfile)
    assert len(found) == 1, found
    with pytest.raises(UserError) as info:
        dockerfile_to_definition(dockerfile)
    assert str(info.value) == f"Dockerfile cannot be converted faithfully: {found[0]}"


def test_spython_parser_failure_is_one_line() -> None:
    with pytest.raises(UserError, match=r"^Dockerfile cannot be converted: spython failed on it"):
        dockerfile_to_definition('FROM a\nENV A="x"y"\n')


def test_safe_forms_are_not_hazards() -> None:
    safe = (
        'FROM a\nENV A=1\nENV B="x y"\nLABEL a="x"\nARG HVD_PIP_CONFIG_URL=\n'
        "COPY hvd-pip /usr/local/bin/hvd-pip\nRUN echo USER \\\n    && true\n"
    )
    assert hazards(safe) == []


def test_build_context_has_dockerfile_and_hvd_pip(rich: Recipe) -> None:
    context = build_context(rich)
    assert set(context) == {"Dockerfile", "hvd-pip"}
    assert context["Dockerfile"].decode() == render_dockerfile(rich)
    assert context["hvd-pip"] == hvd_pip_script()


def _docker_env(dockerfile: str, env: dict[str, str]) -> dict[str, str]:
    """Apply the Dockerfile's `ENV K="v"`/`ENV K=v` lines as the Dockerfile reference says.

    Inside double quotes a backslash escapes `"`, `\\` and `$`; `$NAME`/`${NAME}` are replaced
    by the value the variable has at that point of the build (empty when unset).
    """
    env = dict(env)
    for inst in instructions(dockerfile):
        match = re.fullmatch(r'ENV ([A-Za-z_][A-Za-z0-9_]*)=(?:"(.*)"|([^\s"\\]*))', inst)
        if match is None:
            assert not inst.startswith("ENV "), inst
            continue
        raw, out, i = match.group(2) or match.group(3) or "", [], 0
        while i < len(raw):
            ch = raw[i]
            if ch == "\\" and i + 1 < len(raw) and raw[i + 1] in '"\\$':
                out.append(raw[i + 1])
                i += 2
            elif ch == "$":
                ref = re.match(r"\$(?:([A-Za-z_]\w*)|\{([A-Za-z_]\w*)\})", raw[i:])
                assert ref is not None, raw
                out.append(env.get(ref.group(1) or ref.group(2), ""))
                i += ref.end()
            else:
                out.append(ch)
                i += 1
        env[match.group(1)] = "".join(out)
    return env


def _definition_env(definition: str, env: dict[str, str], names: list[str]) -> dict[str, str]:
    """What a shell makes of the definition's %environment, as the container runtime sources it."""
    import subprocess

    script = "\n".join(sections(definition)["environment"])
    script += "\nfor n in " + " ".join(names) + '; do eval "printf \'%s\\0\' \\"\\$$n\\""; done'
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=True)
    return dict(zip(names, done.stdout.split("\0")[:-1], strict=True))


def test_env_values_mean_the_same_in_the_dockerfile_and_the_definition(tmp_path: Path) -> None:
    values = {
        "A_PATH": "/opt/tools/bin:$PATH",
        "A_BRACED": "${VIRTUAL_ENV}/share",
        "A_BACKSLASH": "C:\\dir\\$PATH",
        "A_QUOTE": "it's; #1 & <x>",
        "A_SPACES": "  two  spaces ",
        "A_EMPTY": "",
        "A_UNICODE": "ümlaut",
        "A_LATER": "$A_PATH:x",
    }
    recipe = load_recipe(write(tmp_path, merged(CPU_RECIPE, env=values)))
    image_env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}  # the base image's ENV
    docker = _docker_env(render_dockerfile(recipe), image_env)
    names = ["PATH", "VIRTUAL_ENV", *values]
    definition = _definition_env(render_definition(recipe), image_env, names)
    assert {n: docker[n] for n in names} == definition
    assert definition["A_PATH"] == "/opt/tools/bin:/opt/venv/bin:/usr/local/bin:/usr/bin:/bin"
    assert definition["A_BACKSLASH"] == "C:\\dir\\" + definition["PATH"]
    assert definition["A_LATER"] == definition["A_PATH"] + ":x"


def test_platform_flag_stays_out_of_the_definition_header(tmp_path: Path) -> None:
    data = merged(CPU_RECIPE, arch="arm64", base={"image": "debian:bookworm"})
    recipe = load_recipe(write(tmp_path, data))
    assert "FROM --platform=linux/arm64 debian:bookworm\n" in render_dockerfile(recipe)
    header = sections(render_definition(recipe))["header"]
    assert header == ["Bootstrap: docker", "From: debian:bookworm"]
    assert "From: --platform" in _spython_convert(render_dockerfile(recipe))  # what spython does
