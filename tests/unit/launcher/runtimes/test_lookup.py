"""launcher/runtimes/__init__.py: a runtime kind is looked up in its own module first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hvd_container.launcher import runtimes
from hvd_container.launcher.rooms import room_names


def _loaded_after(code: str) -> list[str]:
    """The runtime modules a new interpreter has loaded after running `code`."""
    program = (
        f"{code}\n"
        "import sys\n"
        "prefix = 'hvd_container.launcher.runtimes.'\n"
        "print(' '.join(sorted(m[len(prefix):] for m in sys.modules if m.startswith(prefix))))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_site_loads_only_the_runtime_it_names() -> None:
    code = (
        "from hvd_container.launcher.sites.model import Site\n"
        "from hvd_container.launcher import runtimes\n"
        "site = Site.model_validate({'name': 'x', 'runtime': {'kind': 'podman-hpc'}})\n"
        "runtimes.runtime(site.runtime)\n"
    )
    assert _loaded_after(code) == ["podman_hpc"]


def test_a_kind_served_under_another_name_is_found_in_every_module() -> None:
    code = (
        "from hvd_container.launcher.sites.model import Site\n"
        "site = Site.model_validate({'name': 'x', 'runtime': {'kind': 'singularity'}})\n"
        "assert type(site.runtime).__name__ == 'ApptainerProfile', site.runtime\n"
    )
    assert set(_loaded_after(code)) >= set(room_names(runtimes.__path__))


@pytest.mark.parametrize("kind", ["", "../shifter", "shifter.x", "_edf", "rooms", "SHIFTER"])
def test_a_kind_that_names_no_runtime_is_none(kind: str) -> None:
    assert runtimes.profile_for(kind) is None


def test_every_kind_is_found_as_the_whole_list_has_it() -> None:
    assert {k: runtimes._class_for(k) for k in runtimes.kinds()} == runtimes._classes()


def test_a_dry_run_loads_the_runtimes_of_its_site_alone(tmp_path: Path) -> None:
    """perlmutter's profile names shifter and podman-hpc: its dry run, checks and all, loads
    no other runtime's module."""
    (tmp_path / "train.py").write_text("import horovod.torch as hvd\n")
    code = (
        "import contextlib, io, os\n"
        f"os.chdir({str(tmp_path)!r})\n"
        "from hvd_container.cli.app import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    code = main(['run', '--site', 'perlmutter', '-N', '2', '--image', 'u/i:t',"
        " '--dry-run', 'train.py'])\n"
        "assert code == 0, code\n"
    )
    assert _loaded_after(code) == ["podman_hpc", "shifter"]
