"""Settings for every test run, fast or end to end."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator

import pytest

# The tests' own configuration directory: nothing they make (the pip server's secret, user site
# profiles) lands in the developer's. It is the same from run to run, so the pip server's URL,
# a build arg, and with it Docker's layer cache stay the same for the image tests build. Tests
# that need a configuration of their own set XDG_CONFIG_HOME themselves.
_TESTS_HOME = os.path.join(tempfile.gettempdir(), f"hvd-container-tests-{os.getuid()}")
_CONFIG = os.path.join(_TESTS_HOME, "config")
os.makedirs(_CONFIG, mode=0o700, exist_ok=True)
os.environ["XDG_CONFIG_HOME"] = _CONFIG


# The cache, though, is the session's own: images unpacked for ch-run (2 GB each, a new key for
# every SIF a run converts) would otherwise pile up in the developer's ~/.cache run after run.
# The end of the session removes it, and a later session the leftovers of one that was killed
# (runs side by side, a CI clone beside the inner loop, keep theirs). Slurm jobs inherit it
# with the environment.
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


for _name in os.listdir(_TESTS_HOME):
    _pid = _name.removeprefix("cache-")
    if _name.startswith("cache-") and _pid.isdigit() and not _alive(int(_pid)):
        shutil.rmtree(os.path.join(_TESTS_HOME, _name), ignore_errors=True)
_CACHE = os.path.join(_TESTS_HOME, f"cache-{os.getpid()}")
os.makedirs(_CACHE, mode=0o700, exist_ok=True)
os.environ["XDG_CACHE_HOME"] = _CACHE

# A test runner started in the background of a non-interactive shell (`make test &`, some CI
# harnesses) inherits SIGINT ignored, and so would every command the tests start: Python then
# never raises KeyboardInterrupt and the Ctrl-C tests would wait in vain. Catching SIGINT here
# gives the children the default disposition again (exec resets caught signals, not ignored
# ones).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# builds too long for .ci/run's time: run only when the marker expression names them
ASKED_FOR_BY_NAME = ("gpu", "heavy", "arm64")


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Tests marked `gpu` (the NCCL image: a 45-minute build), `heavy` (a CPU build too long
    for CI) or `arm64` (the arm64 torch twin under emulation) run only when the marker
    expression names them (`make test-gpu`: -m gpu, `make test-heavy`: -m heavy, `make
    test-arm64`: -m arm64); every other run deselects them, so `.ci/run` stays within its time."""
    asked = config.getoption("markexpr") or ""
    skipped = [m for m in ASKED_FOR_BY_NAME if m not in asked]
    if not skipped:
        return
    kept = [i for i in items if not any(i.get_closest_marker(m) for m in skipped)]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept


def _free_gb(path: str) -> float:
    return shutil.disk_usage(path).free / 1e9


# The e2e suite needs tens of GB (images, SIFs, unpacked copies): when a run fails on a full
# disk, the last lines of its output say so (CI shows only those), with the module after which
# the disk was fullest (what to make leaner).
_FREE_AT_START = _free_gb(_TESTS_HOME)
_LOWEST: list[tuple[float, str]] = [(_FREE_AT_START, "the start")]


@pytest.fixture(autouse=True, scope="module")
def _free_disk_after_module(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    free = _free_gb(_TESTS_HOME)
    if free < _LOWEST[0][0]:
        _LOWEST[0] = (free, request.module.__name__)


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # type: ignore[no-untyped-def]
    lowest, where = _LOWEST[0]
    terminalreporter.write_line(
        f"disk: {_FREE_AT_START:.1f} GB free at the start, {lowest:.1f} GB at the lowest (after "
        f"{where}), {_free_gb(_TESTS_HOME):.1f} GB at the end ({tempfile.gettempdir()})"
    )


def pytest_sessionfinish(session, exitstatus):  # type: ignore[no-untyped-def]
    """Remove the session's cache (see _CACHE): the SIFs it unpacked were temporary."""
    shutil.rmtree(_CACHE, ignore_errors=True)
