"""The console script's quick `run --dry-run` (argparse, no typer) against the full typer CLI.

The quick path must print exactly what the full CLI prints for every argv it accepts, and hand
everything it might read differently to the full CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _launch_helpers import isolated, write  # noqa: F401
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hvd_container.cli import app as cli
from hvd_container.cli import entry, quick_dry_run
from hvd_container.cli.commands import load
from hvd_container.cli.commands.launch_options import DEFAULTS, OPTIONS

SITES = ["neuron", "perlmutter", "zih-alpha", "zih-ml", "local"]
HOSTILE = ["--lr", "0.1", "a b", "it's", 'say "hi"', "x;y", "$HOME", "-n", "--dry-run", "--help", "-5", ""]  # fmt: skip


@pytest.fixture(autouse=True)
def in_job_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    job = tmp_path / "job"
    write(job / "x.sif", "")
    write(job / "train.py", "import horovod.torch as hvd\n")
    write(job / "pl.py", "import lightning as L\n")
    monkeypatch.chdir(job)
    monkeypatch.setenv("USER", "alice")
    return job


def both(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[Any, Any, bool]:
    """((code, out, err) of the console script, of the full CLI, whether the quick path ran)."""
    quick = quick_dry_run.parse(argv) is not None
    code = entry.main(argv)
    first = (code, *capsys.readouterr())
    code = cli.main(argv)
    return first, (code, *capsys.readouterr()), quick


def test_the_table_is_what_typer_made_of_run() -> None:
    command = load("run")
    params = {p.name: p for p in command.params}
    assert [p.name for p in command.params[:2]] == ["script", "args"]
    assert set(params) - {"script", "args"} == set(OPTIONS)
    for name, opt in OPTIONS.items():
        param = params[name]
        assert tuple(param.opts) == opt.flags, name
        assert param.multiple == (opt.kind == "list"), name
        assert param.is_flag == (opt.kind == "flag"), name
        if opt.kind in ("int", "str"):
            # counts arrive as text (<int> in --help): build_request reads them strictly
            assert param.type.name == "str", name
            assert (param.metavar == "<int>") == (opt.kind == "int"), name
            assert param.default == DEFAULTS.get(name), name
    assert params["args"].nargs == -1


PLAIN = [
    # counts are read by build_request on both paths: the same one-line error
    ["--site", "perlmutter", "--image", "u/i:t", "-n", "eight", "--dry-run", "train.py"],
    ["--site", "perlmutter", "--image", "u/i:t", "-N", "1_6", "--dry-run", "train.py"],
    ["--site", "perlmutter", "--image", "u/img:tag", "-n", "8", "--account", "m1_g", "--dry-run", "train.py", *HOSTILE],
    ["--site=neuron", "--image=x.sif", "-n8", "--comment", "pytorch", "--dry-run", "train.py", "--epochs", "3"],
    ["--dry-run", "--site", "neuron", "--image", "x.sif", "-N", "2", "--ntasks-per-node", "4", "--comment", "pytorch", "pl.py"],
    ["--dry-run", "--site", "neuron", "--image", "x.sif", "-n", "8", "pl.py"],  # Lightning with -n: an error
    ["--dry-run", "--site", "perlmutter", "--image", "u/i:t", "--module", "gpu", "--module", "gpu", "train.py"],
    ["--dry-run", "--site", "zih-ml", "--image", "x.sif", "-e", "A=1", "-eB=x y", "--env=C=$D", "-B", "/data:/data:ro", "train.py"],
    ["--dry-run", "--site", "local", "--image", "x.sif", "--controller", "gloo", "-n", "2", "train.py"],
    ["--dry-run", "--site", "neuron", "--image", "x.sif", "--gpus-per-task", "1", "-n", "4", "--comment", "pytorch", "train.py"],
    ["--dry-run", "--site", "neuron", "--image", "x.sif", "--mpi", "bogus", "train.py"],
    ["--dry-run", "--site", "nowhere", "train.py"],
    ["--dry-run", "--site", "perlmutter", "--image", "u/i:t", "-t", "1:00:00", "-J", "job one", "-p", "x", "train.py"],
    ["--dry-run", "--site", "neuron", "--image", "x.sif", "--runtime", "apptainer", "--workdir", "/w", "prog", "a b"],
]  # fmt: skip


@pytest.mark.parametrize("argv", PLAIN, ids=range(len(PLAIN)))
def test_plain_dry_runs_take_the_quick_path_and_print_the_same(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    quick, full, took_quick = both(capsys, ["run", *argv])
    assert took_quick
    assert quick == full
    assert quick[1] or quick[2]  # something was said


NOT_SURE = [
    ["run", "--help"],
    ["run", "-h"],
    ["run", "--site", "neuron", "--dry-run", "--", "-train.py"],
    ["run", "--site", "neuron", "--dry-run", "train.py", "--", "x"],
    ["run", "--site", "neuron", "-n=8", "--dry-run", "train.py"],
    ["run", "--site", "neuron", "--dry-run", "-5"],
    ["run", "--site", "neuron", "--image", "x.sif", "train.py"],  # no --dry-run: a real run
    ["run", "--site", "neuron", "train.py", "--dry-run"],  # the script's --dry-run
    ["run", "--ntask", "8", "--dry-run", "train.py"],
    ["run", "--dry", "train.py"],
    ["run", "--site", "--dry-run", "train.py"],
    ["run", "--dry-run=yes", "train.py"],
    ["run", "--dry-run"],
    ["run", "--site", "neuron", "--comment=--", "--dry-run", "train.py"],  # argparse: comment []
    ["run", "--site", "neuron", "-J--", "-e--", "--dry-run", "train.py"],
    ["--version"],
    ["batch", "--dry-run", "train.py"],
    [],
]


@pytest.mark.parametrize("argv", NOT_SURE, ids=range(len(NOT_SURE)))
def test_anything_unusual_goes_to_the_full_cli(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert quick_dry_run.parse(argv) is None


def test_shell_completion_goes_to_the_full_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["run", "--site", "neuron", "--dry-run", "train.py"]
    assert quick_dry_run.parse(argv) is not None
    monkeypatch.setenv("_HVD_CONTAINER_COMPLETE", "bash_complete")
    assert quick_dry_run.parse(argv) is None


def test_click_errors_still_come_from_click(capsys: pytest.CaptureFixture[str]) -> None:
    quick, full, took_quick = both(capsys, ["run", "--site", "neuron", "-n=8", "--dry-run", "t.py"])
    assert not took_quick and quick == full
    assert quick[0] == 2 and "--ntasks/-n: '=8' is not a valid int" in quick[2]


@pytest.mark.parametrize("program", ["hvd_container", "hvd_container.cli.app"])
def test_a_reader_that_went_away_is_exit_1_without_a_traceback(program: str) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    done = subprocess.run(
        [sys.executable, "-m", program, "run", "--site", "perlmutter", "--image", "u/i:t",
         "--account", "m_g", "--dry-run", "t.py"],
        stdout=write_end, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(write_end)
    assert (done.returncode, done.stderr) == (1, "")


# Generated command lines: any mix of the table's options in any of click's spellings.
# QUICK_DRY_RUN_EXAMPLES=5000 searches longer (5000 passed here, in 3.7 minutes).
_WORD = st.text(alphabet="ab -=:/$;'\"*.,0123456789", max_size=8)


def _value(kind: str) -> st.SearchStrategy[str]:
    if kind == "int":
        return st.one_of(st.integers(-3, 70).map(str), _WORD)
    return st.one_of(_WORD, st.sampled_from(["gpu", "x.sif", "u/img:tag", "A=1", "/d:/d:ro", "pmi2", "gloo", "1:00:00", "pytorch", "--", "-", "=", "", "-x", "--x=1", "-1"]))  # fmt: skip


@st.composite
def _option(draw: st.DrawFn) -> list[str]:
    name = draw(st.sampled_from(sorted(OPTIONS)))
    opt = OPTIONS[name]
    flag = draw(st.sampled_from(opt.flags))
    if opt.kind == "flag":
        return [flag]
    value = draw(_value(opt.kind))
    spelling = draw(st.sampled_from(["apart", "joined"]))
    if spelling == "apart":
        return [flag, value]
    return [flag + ("=" if flag.startswith("--") else "") + value]


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    options = draw(st.lists(_option(), max_size=6))
    site = ["--site", draw(st.sampled_from(SITES))]
    image = ["--image", draw(st.sampled_from(["x.sif", "u/img:tag", "missing.sif"]))]
    parts = draw(st.permutations([site, image, ["--dry-run"], *options]))
    script = draw(st.sampled_from(["train.py", "pl.py", "prog", "a b.py", "-x.py"]))
    args = draw(st.lists(st.sampled_from([*HOSTILE, "--"]), max_size=4))
    return ["run", *[token for part in parts for token in part], script, *args]


@settings(
    max_examples=int(os.environ.get("QUICK_DRY_RUN_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(argv=command_lines())
def test_generated_command_lines_give_the_same_output(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    quick, full, _ = both(capsys, argv)
    assert quick == full, argv
