from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from hvd_container.launcher import runtimes

__version__ = version("hvd-container")  # the installed metadata, as --version reads it
from hvd_container.cli.app import main
from hvd_container.cli.commands import COMMANDS, load


def test_version(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"hvd-container {__version__}"


def test_help_lists_command_groups(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage: hvd-container" in out
    listed = re.findall(r"^  ([a-z]+) +\S", out.split("Commands:", 1)[1], re.M)
    assert listed == list(COMMANDS)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_root_help_says_what_the_command_says_of_itself(name: str) -> None:
    """The root help lists the summaries of the table (loading no command): each is the
    command's own first sentence."""
    assert COMMANDS[name][1] == load(name).get_short_help_str(limit=100)


def test_the_root_help_loads_no_command_and_no_rich() -> None:
    """`hvd-container --help` lists the commands from the table: no command module, no Docker
    SDK, no rich (bench/dryrun.py prints its time)."""
    code = (
        "import sys\nfrom hvd_container.cli.app import main\nmain(['--help'])\n"
        "print('LOADED', *sorted(m for m in sys.modules if m.startswith("
        "('hvd_container.cli.commands.', 'docker', 'rich', 'hvd_container.launcher.sites.model'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.rsplit("LOADED", 1)[1].split()
    assert loaded == [], loaded


def test_console_script_runs_as_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hvd_container", "--version"], capture_output=True, text=True
    )
    assert done.returncode == 0
    assert done.stdout.strip().endswith(__version__)


@pytest.mark.parametrize(
    ("words", "cword", "expected"),
    [
        ("hvd-container ru", 1, ["run"]),
        ("hvd-container run --site perlmutter --ntasks-p", 4, ["--ntasks-per-node"]),
        # a complete dry run on the line: completing SCRIPT offers nothing, and prints no srun line
        ("hvd-container run --dry-run --site perlmutter t", 5, []),
    ],
)
def test_shell_completion_through_the_console_script(
    words: str, cword: int, expected: list[str]
) -> None:
    env = {**os.environ, "_HVD_CONTAINER_COMPLETE": "complete_bash", "COMP_WORDS": words,
           "COMP_CWORD": str(cword)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "hvd_container", *words.split()[1:]],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == expected


def test_unknown_command_is_a_usage_error(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["no-such-command"]) == 2
    assert "No such command" in capsys.readouterr().err


def test_ctrl_c_is_one_line_and_exit_130(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from hvd_container.containers import recipe_loader as recipe_module

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(recipe_module, "list_builtin", interrupted)
    assert main(["recipes", "list"]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "hvd-container: interrupted"


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["render", "cpu-bookworm", "-f", "xml"],
            "hvd-container: error: --format/-f: 'xml' is not one of 'docker', 'singularity'",
        ),
        (
            ["run", "-n", "abc", "x.py"],
            "hvd-container: error: --ntasks/-n: 'abc' is not a valid int (decimal digits only)",
        ),
        (
            ["render"],
            "hvd-container: error: RECIPE: missing (a built-in recipe name or a recipe file), or --from-dockerfile FILE",
        ),
        (
            ["recipes", "nosuch"],
            "hvd-container: error: No such command 'nosuch' (allowed: list, show, validate)",
        ),
    ],
)
def test_usage_errors_are_one_line(capsys, argv: list[str], line: str) -> None:  # type: ignore[no-untyped-def]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [line]


def test_unknown_option_lists_the_allowed_ones(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["render", "cpu-bookworm", "--bogus"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("hvd-container: error: No such option: --bogus (allowed: ")
    assert "--format" in line and "--output" in line


def test_help_is_unchanged_by_the_error_handling(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["render", "--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage: hvd-container render" in out
    assert "--format" in out


def test_no_arguments_prints_help(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["recipes"]) == 2
    captured = capsys.readouterr()
    assert "Usage: hvd-container recipes" in captured.out + captured.err
    assert "error" not in captured.err


def test_exit_codes_of_commands_are_kept(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    assert main(["recipes", "validate", str(bad)]) == 2  # typer.Exit(2) from the command
    assert "FAIL" in capsys.readouterr().err


def test_sigterm_handler_is_restored_after_main() -> None:
    before = signal.getsignal(signal.SIGTERM)
    assert main(["--version"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before


# A render --context whose write stalls inside the atomic writer (temp file open) until signalled.
_STALLED_WRITE = """
import os, sys, time
from hvd_container.cli.app import main

def stall(fd):
    print("writing", flush=True)
    time.sleep(60)

os.fsync = stall
sys.exit(main(["render", "cpu-bookworm", "--context", sys.argv[1]]))
"""


@pytest.mark.parametrize(
    ("signum", "code", "message"),
    [
        (signal.SIGTERM, 143, "hvd-container: terminated"),
        (signal.SIGINT, 130, "hvd-container: interrupted"),
    ],
)
def test_signal_during_write_leaves_nothing_behind(
    tmp_path, signum: int, code: int, message: str
) -> None:  # type: ignore[no-untyped-def]
    context = tmp_path / "ctx"
    context.mkdir()  # kept (it was there before); a directory the call made would be removed
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _STALLED_WRITE, str(context)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "writing\n"
    assert [p.name for p in context.iterdir()][0].endswith(".part")  # the temp file exists
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code
    assert err.strip().splitlines()[-1] == message
    assert list(context.iterdir()) == []


README = Path(__file__).resolve().parents[3] / "README.md"


def _readme_shell_lines(tmp_path: Path) -> list[str]:
    """The lines of the README's ```sh blocks; `cat > F <<'END'` here-documents are written."""
    lines: list[str] = []
    in_block, heredoc, target, body = False, None, Path(), []
    for line in README.read_text().splitlines():
        if heredoc is not None:
            if line == heredoc:
                target.write_text("".join(f"{b}\n" for b in body))
                heredoc, body = None, []
            else:
                body.append(line)
        elif line.startswith("```"):
            in_block = line == "```sh"
        elif in_block:
            match = re.fullmatch(r"cat > (\S+) <<'(\w+)'", line)
            if match:
                target, heredoc = tmp_path / match.group(1), match.group(2)
            else:
                lines.append(line)
    return lines


def _runs_without_engines(argv: list[str]) -> bool:
    if argv[1:3] in (["sites", "probe"], ["sites", "validate"]):
        return False  # the site's Slurm, and the file the probe wrote there
    if "--dry-run" in argv or argv[1] in ("render", "recipes", "sites"):
        return True
    return argv[1] == "batch" and ("-o" in argv or "--output" in argv)


def test_readme_tour_commands_work(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Every engine-free command in the README runs; the others at least parse."""
    import typer.main

    from hvd_container.cli.app import app

    monkeypatch.chdir(tmp_path)
    commands = [
        shlex.split(line, comments=True)
        for line in _readme_shell_lines(tmp_path)
        if line.startswith("hvd-container ")
    ]
    runnable = [argv for argv in commands if _runs_without_engines(argv)]
    assert len(runnable) >= 9 and len(commands) > len(runnable)
    for argv in runnable:
        assert main(argv[1:]) == 0, f"{shlex.join(argv)}: {capsys.readouterr().err}"
        for flag in ("-o", "--output"):
            if flag in argv:
                assert (tmp_path / argv[argv.index(flag) + 1]).is_file(), shlex.join(argv)
    group = typer.main.get_command(app)
    for argv in commands:
        if argv not in runnable:  # needs engines: check its command, options and their values
            ctx = group.make_context("hvd-container", argv[1:])
            command = group.get_command(ctx, argv[1])  # type: ignore[attr-defined]
            assert command is not None, shlex.join(argv)
            command.make_context(argv[1], argv[2:], parent=ctx)
    dry_runs = [argv for argv in runnable if "--dry-run" in argv]
    assert dry_runs and all(argv.index("--dry-run") < len(argv) - 1 for argv in dry_runs)


def test_the_version_has_one_source() -> None:
    from pathlib import Path

    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    assert __version__ == pyproject["project"]["version"]


def _complete(words: str, cwd: Path | None = None) -> list[str]:
    env = {**os.environ, "_HVD_CONTAINER_COMPLETE": "complete_bash", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "hvd_container", *words.split()[1:]],
        capture_output=True, text=True, env=env, cwd=cwd,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (
            "hvd-container build cpu-b",
            [
                "cpu-bookworm",
                "cpu-bookworm-tf-pt",
                "cpu-bookworm-torch",
                "cpu-bookworm-torch-arm64",
            ],
        ),
        ("hvd-container render light", ["lightning-pt113"]),
        ("hvd-container recipes show perl", ["perlmutter-tf210-pt113"]),
        ("hvd-container run --recipe zih", ["zih-alpha-pt113"]),
        ("hvd-container run --site per", ["perlmutter"]),
        ("hvd-container batch --site zih", ["zih-alpha", "zih-capella", "zih-ml"]),
        ("hvd-container sites show neu", ["neuron"]),
        ("hvd-container convert x --to shifter --site loc", ["local"]),
    ],
)
def test_recipe_and_site_names_complete(words: str, expected: list[str]) -> None:
    assert _complete(words) == expected


def test_image_files_complete(tmp_path: Path) -> None:
    for name in ("a.sif", "b.sqfs", "notes.txt", ".hidden.sif"):
        (tmp_path / name).write_text("")
    (tmp_path / "unpacked").mkdir()
    (tmp_path / "my.yaml").write_text("")
    assert _complete("hvd-container run --image ", tmp_path) == ["a.sif", "b.sqfs", "unpacked/"]
    assert _complete("hvd-container inspect a", tmp_path) == ["a.sif"]
    # a recipe argument offers built-in names and recipe files
    assert _complete("hvd-container build m", tmp_path) == ["my.yaml"]


def test_site_names_complete_without_yaml_files_unless_a_path_is_typed(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text("")
    (tmp_path / "local-copy.yaml").write_text("")
    assert _complete("hvd-container run --site ", tmp_path) == [
        "cscs-clariden", "cscs-daint", "jupiter", "juwels-booster", "local", "neuron", "perlmutter", "zih-alpha", "zih-capella", "zih-ml",
    ]  # fmt: skip
    assert _complete("hvd-container run --site ./", tmp_path) == [
        "./local-copy.yaml",
        "./mine.yaml",
    ]
    assert _complete("hvd-container run --site mi", tmp_path) == ["mine.yaml"]  # no name fits


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("hvd-container run --site neuron -p amd_h", ["amd_h100_2", "amd_h200nv_8"]),
        ("hvd-container batch --site zih-capella --partition ", ["capella"]),
        ("hvd-container run --controller torch", ["torch", "torchrun"]),
        ("hvd-container run --runtime p", ["podman-hpc", "pyxis"]),
        ("hvd-container run --mpi pmix_", ["pmix_v3", "pmix_v4", "pmix_v5"]),
    ],
)
def test_the_sites_partitions_and_the_launch_values_complete(
    words: str, expected: list[str]
) -> None:
    assert _complete(words) == expected


@pytest.mark.parametrize("shell", ["zsh", "fish", "bash"])
def test_show_completion_prints_the_named_shells_script(shell: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hvd_container", "--show-completion", shell],
        capture_output=True, text=True, env={**os.environ, "SHELL": "/bin/bash"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first = {"zsh": "#compdef hvd-container", "fish": "complete --command hvd-container",
             "bash": "_hvd_container_completion() {"}[shell]  # fmt: skip
    assert done.stdout.startswith(first), done.stdout[:200]


def test_every_commands_help_names_values_one_way(capsys: pytest.CaptureFixture[str]) -> None:
    """No <bool> on a flag, arguments in capitals in the usage line and the table, and each
    paragraph of a command's description one line before the terminal wraps it."""
    from hvd_container.cli.commands import COMMANDS, load

    for name in COMMANDS:
        command = load(name)
        subs = getattr(command, "commands", None) or {name: command}
        for sub_name, sub in subs.items():
            words = [name] if sub is command else [name, sub_name]
            assert main([*words, "--help"]) == 0
            out = capsys.readouterr().out
            assert "<bool>" not in out, (words, out)
            usage = next(line for line in out.splitlines() if "Usage:" in line)
            for piece in usage.split("[OPTIONS]")[-1].split():
                if "|" in piece:
                    continue  # a choice shows its values: {recipe|site|output}
                assert piece.strip("{}[].") == piece.strip("{}[].").upper(), (words, usage)
            assert all("\n" not in p.strip() or p.startswith("\b") or "\n-" in p or "\n " in p
                       for p in (sub.help or "").split("\n\n")), (words, sub.help)  # fmt: skip


def test_the_readmes_ddp_tutorial_script_is_launched_one_rank_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's script in the style of PyTorch's DDP tutorial (LOCAL_RANK,
    init_process_group("nccl")) gets the torch controller from its own text, four ranks on
    each of Perlmutter's 4-GPU nodes, and LOCAL_RANK from each task's place on its node."""
    import json

    _readme_shell_lines(tmp_path)  # writes the README's here-documents
    script = tmp_path / "multinode.py"
    assert 'init_process_group(backend="nccl")' in script.read_text()
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--site", "perlmutter", "--image", "u/img:tag", "--account", "m1234_g",
            "-N", "2", "--dry-run", "--json", "multinode.py", "50", "10"]  # fmt: skip
    assert main(argv) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["controller"]["name"] == "torch"
    assert "init_process_group" in record["controller"]["why"]
    assert (record["nodes"], record["tasks_per_node"], record["gpus_per_node"]) == (2, 4, 4)
    assert any('LOCAL_RANK="$SLURM_LOCALID"' in word for word in record["step"])
    assert record["step"][-3:] == ["multinode.py", "50", "10"]


def test_the_readmes_login_node_install_names_the_python_and_works_in_a_venv() -> None:
    """`pip install --user` fails inside a venv and the README never said which Python: its
    login-node install names the oldest Python pyproject allows and installs into a venv."""
    import tomllib

    text = README.read_text()
    oldest = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"]
    minimum = oldest["requires-python"].removeprefix(">=")
    login = text[text.index("**On a login node**") :]
    login = login[: login.index("```sh\n", login.index("```sh\n") + 1)]  # up to the next block
    assert f"Python {minimum} or newer" in " ".join(login.split())
    block = login[login.index("```sh\n") :]
    first = block.splitlines()[1]
    assert first.startswith("python3 -m venv ") and "bin/activate" in first
    assert "pip install --user" not in first.split("#")[0]  # only offered outside a venv


@pytest.mark.parametrize("command", ["run", "batch", "doctor", "jupyter"])
def test_a_launch_commands_help_lists_every_runtime(command: str, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """--runtime's help names the kinds when it is shown (a launch loads only its own)."""
    monkeypatch.setenv("COLUMNS", "400")
    assert main([command, "--help"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "--runtime" in x]
    assert "{runtimes}" not in line
    assert "instead of the site's: " + ", ".join(runtimes.kinds()) in line
