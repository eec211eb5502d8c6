"""The CI workflows are valid YAML and run only commands that exist, as a user would run them.

Each `run:` step may call `hvd-container SUBCOMMAND` (subcommands and options checked against
the real CLI), `make TARGET` (targets in the Makefile), `bash testbed/SCRIPT` or `bash .ci/run` (the script
exists), pip and python (`-c` code must compile), plus the few plain utilities a step needs to
hold its output (mkdir, tee) and apt-get install for packages the runner image lacks. Matrix
recipes must be built-in recipes.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml
from hvd_container.containers.recipe_loader import list_builtin, load_recipe

from hvd_container.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))
UTILITIES = {"mkdir", "tee"}
SEPARATORS = {"|", "||", "&&", ";", "&"}


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{path.name}: not a mapping"
    return data


def triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` key as True
    assert isinstance(on, dict)
    return on


def run_steps(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{job_name}/{step.get('name') or step['run'].splitlines()[0]}", step)
        for job_name, job in workflow["jobs"].items()
        for step in job.get("steps", [])
        if "run" in step
    ]


def _substitutions(line: str) -> tuple[str, list[str]]:
    """line with each `$(...)` replaced by a word, and the commands inside them."""
    inner: list[str] = []
    out = ""
    i = 0
    while i < len(line):
        if line.startswith("$(", i):
            depth, j = 1, i + 2
            while depth:
                assert j < len(line), f"unbalanced $( in {line!r}"
                depth += {"(": 1, ")": -1}.get(line[j], 0)
                j += 1
            inner.append(line[i + 2 : j - 1])
            out += "SUBSTITUTED"
            i = j
        else:
            out += line[i]
            i += 1
    return out, inner


def commands(script: str) -> list[list[str]]:
    """The simple commands of a shell script (pipelines, lists and $(...) taken apart)."""
    found: list[list[str]] = []
    for raw in script.replace("\\\n", " ").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line, inner = _substitutions(line)
        for sub in inner:
            found += commands(sub)
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        current: list[str] = []
        for token in lexer:
            if token in SEPARATORS:
                found.append(current)
                current = []
            else:
                current.append(token)
        found.append(current)
    return [_strip_wrappers(c) for c in found if c]


def _strip_wrappers(argv: list[str]) -> list[str]:
    """Drop VAR=value prefixes and the `sudo [-E]` / `env VAR=value` wrappers."""
    while argv:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0]):
            argv = argv[1:]
        elif argv[0] == "sudo":
            argv = argv[1:]
            while argv and argv[0].startswith("-"):
                argv = argv[1:]
        elif argv[0] == "env":
            argv = argv[1:]
        else:
            return argv
    return argv


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_.-]+):", text, re.M))


CLI = typer.main.get_command(app)


def check_hvd(argv: list[str]) -> None:
    command: Any = CLI
    words = argv[1:]
    while hasattr(command, "commands"):  # a command group (typer ships its own click)
        assert words, f"{shlex.join(argv)}: no subcommand"
        name = words.pop(0)
        # looked up as click does (the root group loads its subcommands on first use)
        sub = command.get_command(None, name)
        assert sub is not None, f"{shlex.join(argv)}: no such subcommand {name!r}"
        command = sub
    options = {opt for param in command.params for opt in param.opts}
    for word in words:
        if word.startswith("-") and len(word) > 1:
            flag = word.split("=", 1)[0]
            assert flag in options, f"{shlex.join(argv)}: {command.name} has no option {flag}"


def check_command(argv: list[str]) -> None:
    program = argv[0]
    if program == "hvd-container":
        check_hvd(argv)
    elif program == "make":
        targets = [a for a in argv[1:] if "=" not in a and not a.startswith("-")]
        assert targets, f"{shlex.join(argv)}: name the target"
        assert set(targets) <= make_targets(), f"{shlex.join(argv)}: no such Makefile target"
    elif program == "bash":
        assert argv[1].startswith("testbed/") or argv[1] == ".ci/run", (
            f"{shlex.join(argv)}: only testbed/ scripts and .ci/run"
        )
        assert (ROOT / argv[1]).is_file(), f"{shlex.join(argv)}: no such script"
    elif program == "python":
        if argv[1] == "-m":
            assert argv[2] == "pip", f"{shlex.join(argv)}: only `python -m pip`"
        else:
            assert argv[1] == "-c", f"{shlex.join(argv)}: python -c or -m pip"
            compile(argv[2], "<workflow>", "exec")
    elif program == "apt-get":
        assert argv[1] in ("update", "install"), f"{shlex.join(argv)}: only apt-get update/install"
    else:
        assert program in UTILITIES | {"pip"}, f"{shlex.join(argv)}: {program} is not allowed"


def test_there_are_workflows() -> None:
    assert [p.name for p in WORKFLOWS] == ["ci.yml", "images.yml"]


def test_ci_runs_lint_and_fast_tests_on_every_change_and_e2e_on_a_schedule() -> None:
    workflow = load(ROOT / ".github" / "workflows" / "ci.yml")
    on = triggers(workflow)
    assert {"push", "pull_request", "schedule", "workflow_dispatch"} <= set(on)
    # no paths filter: every push and pull request
    assert "paths" not in (on["push"] or {}) and "paths" not in (on["pull_request"] or {})
    runs = {
        name: [step["run"] for _, step in run_steps({"jobs": {name: job}})]
        for name, job in workflow["jobs"].items()
    }
    assert "make lint" in runs["fast"] and "make test-fast" in runs["fast"]
    assert any(".ci/run" in r for r in runs["e2e"])
    assert "schedule" in workflow["jobs"]["e2e"]["if"] and "push" in workflow["jobs"]["fast"]["if"]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_run_steps_call_only_existing_commands(path: Path) -> None:
    steps = run_steps(load(path))
    assert steps
    for where, step in steps:
        argvs = commands(step["run"])
        assert argvs, where
        for argv in argvs:
            try:
                check_command(argv)
            except AssertionError as exc:
                raise AssertionError(f"{path.name}: {where}: {exc}") from None


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_pipelines_fail_when_a_part_fails(path: Path) -> None:
    # GitHub's default shell is `bash -e {0}`; only an explicit `shell: bash` adds pipefail.
    for where, step in run_steps(load(path)):
        lexer = shlex.shlex(step["run"], posix=True, punctuation_chars=True)
        if "|" in list(lexer):
            assert step.get("shell") == "bash", f"{where}: a pipeline needs `shell: bash`"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_matrix_recipes_are_built_in(path: Path) -> None:
    builtin = set(list_builtin())
    for job_name, job in load(path)["jobs"].items():
        recipes = (job.get("strategy") or {}).get("matrix", {}).get("recipe", [])
        assert isinstance(recipes, list), f"{job_name}: the matrix names its recipes literally"
        assert set(recipes) <= builtin, f"{job_name}: not built in: {set(recipes) - builtin}"


def test_images_workflow_renders_every_recipe_and_builds_the_cpu_ones() -> None:
    jobs = load(ROOT / ".github" / "workflows" / "images.yml")["jobs"]
    assert sorted(jobs["recipes"]["strategy"]["matrix"]["recipe"]) == sorted(list_builtin())
    # the amd64 CPU recipes with a debootstrap base: the only ones a hosted runner can build
    # (the GPU one, gpu-bookworm, needs about 45 min and more disk than a hosted runner has;
    # the arm64 twin needs emulation: `make test-arm64`)
    debootstrap = [load_recipe(n) for n in list_builtin()]
    cpu = sorted(
        r.name for r in debootstrap if r.base.debootstrap_suite and not r.gpu and r.arch == "amd64"
    )
    assert cpu == ["cpu-bookworm", "cpu-bookworm-tf-pt", "cpu-bookworm-torch"]
    assert jobs["image"]["strategy"]["matrix"]["recipe"] == cpu
    build = next(s for s in jobs["image"]["steps"] if "make image" in s.get("run", ""))
    # torch==2.13.0+cpu is on PyTorch's CPU index, not on PyPI
    assert build["env"]["PIP_EXTRA_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"


def test_images_workflow_runs_on_changes_to_what_it_builds_with() -> None:
    on = triggers(load(ROOT / ".github" / "workflows" / "images.yml"))
    for event in ("push", "pull_request"):
        paths = on[event]["paths"]
        for needed in (
            "hvd_container/**", "pyproject.toml", "containers/**", "recipes/**", "launcher/**",
            "tests/**",
        ):  # fmt: skip
            assert needed in paths, f"{event}: {needed} missing from paths"


def test_command_parser_takes_scripts_apart() -> None:
    script = (
        "mkdir -p out  # comment\n"
        'sudo -E env "PATH=$PATH" make image RECIPE="$RECIPE"\n'
        "hvd-container push x --json | tee out/p.json && echo done\n"
        'hvd-container verify "$(python -c "print(f(\'$R\').tag)")"\n'
    )
    assert commands(script) == [
        ["mkdir", "-p", "out"],
        ["make", "image", "RECIPE=$RECIPE"],
        ["hvd-container", "push", "x", "--json"],
        ["tee", "out/p.json"],
        ["echo", "done"],
        ["python", "-c", "print(f('$R').tag)"],
        ["hvd-container", "verify", "SUBSTITUTED"],
    ]
    with pytest.raises(AssertionError, match="no such subcommand 'bild'"):
        check_command(["hvd-container", "bild", "x"])
    with pytest.raises(AssertionError, match="push has no option --regsitry"):
        check_command(["hvd-container", "push", "x", "--regsitry", "r"])
    with pytest.raises(AssertionError, match="echo is not allowed"):
        check_command(["echo", "done"])
