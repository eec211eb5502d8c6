"""Trust boundaries, group C: every value written into an #SBATCH line is read back by the
real sbatch exactly as the user gave it (submitted held, read with squeue/scontrol, cancelled).

The corpus is tests/unit/hostile/c_sbatch_values.yaml; values that cannot be written (line
breaks, bytes that are not UTF-8) are refused in one line, and the script is not written.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hvd_container.cli.app import main
from tests.e2e.slurm_fixtures import slurm_cluster  # noqa: F401

pytestmark = pytest.mark.e2e

CORPUS = yaml.safe_load(
    (Path(__file__).parents[1] / "unit" / "hostile" / "c_sbatch_values.yaml").read_text()
)
FLAG = {"name": "--job-name", "comment": "--comment", "account": "--account",
        "output": "--job-output", "error": "--job-error"}  # fmt: skip
# --partition, --qos and --constraint go through the same writer; this cluster knows only its
# own partitions and features and keeps no QOS (no accounting), so sbatch cannot echo them


def _batch(workdir: Path, *argv: str) -> tuple[int, str]:
    err = io.StringIO()
    before = os.getcwd()
    os.chdir(workdir)  # the job's relative output paths are the submit folder's
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(["batch", "--site", "local", "--runtime", "none", "-n", "1",
                         "--partition", "debug", *argv])  # fmt: skip
    finally:
        os.chdir(before)
    return code, err.getvalue()


def _submit_held(script: Path) -> str:
    done = subprocess.run(
        ["sbatch", "--hold", "--parsable", str(script)],
        capture_output=True, text=True, cwd=script.parent, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def _read_back(job: str) -> dict[str, str]:
    try:
        fields = {}
        for key, code in (("name", "%j"), ("comment", "%k"), ("account", "%a")):
            out = subprocess.run(["squeue", "-h", "-j", job, "-o", code],
                                 capture_output=True, text=True, timeout=60)  # fmt: skip
            fields[key] = out.stdout.rstrip("\n")
        show = subprocess.run(["scontrol", "show", "job", job],
                              capture_output=True, text=True, timeout=60).stdout  # fmt: skip
        for key, word in (("output", "StdOut"), ("error", "StdErr")):
            match = re.search(rf"^\s*{word}=(.*)$", show, re.M)
            fields[key] = match.group(1) if match else "?"
        return fields
    finally:
        subprocess.run(["scancel", job], capture_output=True, timeout=60)


def _cases(kind: str) -> list[Any]:
    return [pytest.param(v, id=repr(v)) for v in CORPUS[kind]]


@pytest.mark.parametrize("field", ["name", "comment", "account", "output", "error"])
def test_each_value_reaches_slurm_as_given(
    slurm_cluster: str,  # noqa: F811
    tmp_path: Path,
    field: str,
) -> None:
    as_given = field in ("name", "comment", "account")
    values = CORPUS["values"] if as_given else CORPUS["paths"]
    wrong = []
    for i, value in enumerate(values):
        script = tmp_path / f"job{i}.sh"
        code, err = _batch(tmp_path, FLAG[field], value, "-o", str(script), "true")
        assert code == 0, (value, err)
        got = _read_back(_submit_held(script))[field]
        want = value if as_given else str(tmp_path / value)
        if field == "account":
            want = want.lower()  # Slurm keeps account names in lower case
        if got != want:
            wrong.append((value, got))
    assert wrong == [], wrong


@pytest.mark.parametrize("name", CORPUS["script_names"])
def test_a_script_name_becomes_the_job_name_as_it_is(
    slurm_cluster: str,  # noqa: F811
    tmp_path: Path,
    name: str,
) -> None:
    program = tmp_path / f"{name}.py"
    program.write_text("print('hi')\n")
    script = tmp_path / "job.sh"
    code, err = _batch(tmp_path, "-o", str(script), str(program))
    assert code == 0, err
    assert _read_back(_submit_held(script))["name"] == name


@pytest.mark.parametrize("value", _cases("refused"))
def test_a_value_sbatch_cannot_read_back_is_one_line(tmp_path: Path, value: str) -> None:
    script = tmp_path / "job.sh"
    code, err = _batch(tmp_path, "--job-name", value, "-o", str(script), "true")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--job-name" in err
    assert not script.exists()


def _show_held(script: Path) -> str:
    job = _submit_held(script)
    try:
        return subprocess.run(["scontrol", "show", "job", job],
                              capture_output=True, text=True, timeout=60).stdout  # fmt: skip
    finally:
        subprocess.run(["scancel", job], capture_output=True, timeout=60)


def test_passed_through_options_and_the_memory_reach_slurm(
    slurm_cluster: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """--sbatch-option lines are the real sbatch's (the mail type reads back); --mem is the
    tool's own flag (through --sbatch-option it is refused in one line) and reads back too."""
    script = tmp_path / "job.sh"
    code, err = _batch(tmp_path, "--sbatch-option=--mem=100M", "-o", str(script), "true")
    assert code == 2 and "--mem is set by the tool: use its --mem" in err, err
    assert not script.exists()
    code, err = _batch(
        tmp_path, "--mem", "100M", "--sbatch-option=--mail-type=END,FAIL",
        "-o", str(script), "true",
    )  # fmt: skip
    assert code == 0, err
    show = _show_held(script)
    assert re.search(r"\bMinMemoryNode=100M\b", show), show
    assert re.search(r"\bMailType=END,FAIL\b", show), show


def test_the_nodes_share_written_for_a_small_default_reaches_slurm(
    slurm_cluster: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A site whose default memory would starve a training rank (ZIH's 300 MB a CPU, here
    said of the local cluster by a profile of its own): the script asks for the node's share of
    the CPUs asked for, says why under the line, and Slurm reads that request back."""
    profile = tmp_path / "small-memory.yaml"
    profile.write_text(
        "extends: local\nname: small-memory\n"
        "scheduler: {cpus_per_node: 4,\n"
        "  memory: {whole_node: false, default_per_cpu: 300M, per_node: 4000M}}\n"
    )
    profile.chmod(0o600)
    script = tmp_path / "job.sh"
    err = io.StringIO()
    before = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(["batch", "--site", str(profile), "--runtime", "none", "-n", "2",
                         "-N", "1", "--partition", "debug", "-o", str(script), "true"])  # fmt: skip
    finally:
        os.chdir(before)
    assert code == 0, err.getvalue()
    text = script.read_text()
    assert (
        "#SBATCH --mem=2000M\n# (site small-memory's default (scheduler.memory: 300M per CPU)"
        in text
    ), text
    assert re.search(r"\bMinMemoryNode=2000M\b", _show_held(script))
