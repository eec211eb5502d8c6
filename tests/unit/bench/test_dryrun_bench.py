"""bench/dryrun.py: the instruction count it reads off valgrind, which virtualenv another
interpreter's dry run is timed in, and the libraries' floor it times beside the dry run. The count is taken for real here (valgrind is on the machine
CI runs on)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from _bench_scripts import load_bench

CALLGRIND_STDERR = """\
==7164== Callgrind, a call-graph generating cache profiler
==7164== Command: venv/bin/python -c pass
==7164==
==7164== Events    : Ir
==7164== Collected : 38037819
==7164==
==7164== I   refs:      38,037,819
"""


@pytest.fixture(scope="module")
def dryrun() -> ModuleType:
    return load_bench("dryrun.py")


def test_the_count_is_callgrinds_collected_total(dryrun: ModuleType) -> None:
    assert dryrun.counted(CALLGRIND_STDERR) == 38_037_819


def test_output_without_the_total_is_an_error_not_a_zero(dryrun: ModuleType) -> None:
    with pytest.raises(ValueError, match="Collected"):
        dryrun.counted(CALLGRIND_STDERR.replace("Collected", "Skipped"))


def test_a_virtualenvs_python_with_the_tool_beside_it_is_timed_where_it_is(
    dryrun: ModuleType, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text("")
    (bin_dir / "hvd-container").write_text("")
    # no new virtualenv is made (that would need `venv` and pip): the one given is used
    assert dryrun.virtualenv_of(str(python), tmp_path / "other") == python
    assert not (tmp_path / "other").exists()


@pytest.fixture
def valgrind() -> None:
    """The counts below are taken for real; only where valgrind is absent are they not."""
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed here (it is on the machines CI runs on)")


@pytest.mark.usefixtures("valgrind")
def test_the_instructions_of_a_real_run_are_counted_the_same_twice(dryrun: ModuleType) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    first = dryrun.instructions([sys.executable, "-S", "-c", "pass"], env)
    second = dryrun.instructions([sys.executable, "-S", "-c", "pass"], env)
    assert first > 1_000_000  # an interpreter's start, not an empty count
    assert abs(first - second) / first < 0.01


@pytest.mark.usefixtures("valgrind")
def test_a_failing_program_is_an_error(dryrun: ModuleType) -> None:
    with pytest.raises(ValueError, match="exit 3"):
        dryrun.instructions(
            [sys.executable, "-S", "-c", "raise SystemExit(3)"], {"PATH": "/usr/bin:/bin"}
        )


def test_the_libraries_floor_loads_what_the_dry_run_needs_and_none_of_the_package(
    dryrun: ModuleType,
) -> None:
    """The floor the bench prints beside the dry run: the libraries a dry run must load (with
    the importlib.metadata pydantic's plugin look-up brings), and no module of this package."""
    probe = "; import sys; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", dryrun.LIBRARIES + probe], capture_output=True, text=True, check=True
    )
    loaded = set(done.stdout.split())
    assert {"typer._adapters", "yaml", "pydantic.main", "importlib.metadata"} <= loaded
    assert not {m for m in loaded if m.startswith("hvd_container")}
