"""Every command that takes a path, given a named pipe, a directory, a socket or a device:
one line saying what the path is and what was expected, a non-zero exit, within a second (a
named pipe opened for reading would block until someone writes to it; /dev/zero never ends).
A directory is an image for the runtimes that run unpacked trees (Charliecloud, Apptainer
sandboxes), so the launch commands take it."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hvd_container.launcher.sites.machine import ThisMachine

from hvd_container.cli.app import main
from tests.unit._launch_helpers import isolated  # noqa: F401  (autouse fixture)

KINDS = {
    "fifo": "is a named pipe",
    "dir": "is a directory",
    "socket": "is a socket",
    "device": "is a character device",
}

# the command line for each command, given the path
COMMANDS: dict[str, Callable[[str], list[str]]] = {
    "run --image": lambda p: ["run", "--site", "local", "--image", p, "-n", "1", "--dry-run", "t.py"],
    "run --image (apptainer)": lambda p: ["run", "--site", "neuron", "--image", p, "-n", "1", "--comment", "field=ai;appl=pytorch", "--dry-run", "t.py"],
    "batch --image": lambda p: ["batch", "--site", "local", "--image", p, "-n", "1", "t.py"],
    "jupyter --image": lambda p: ["jupyter", "--site", "local", "--image", p, "--dry-run"],
    "run --recipe": lambda p: ["run", "--site", "local", "--recipe", p, "--dry-run", "t.py"],
    "run --site": lambda p: ["run", "--site", p, "--image", "x.sif", "--dry-run", "t.py"],
    "inspect": lambda p: ["inspect", p],
    "recipes validate": lambda p: ["recipes", "validate", p],
    "recipes show": lambda p: ["recipes", "show", p],
    "render": lambda p: ["render", p],
    "render --from-dockerfile": lambda p: ["render", "--from-dockerfile", p, "--format", "singularity"],
    "lock": lambda p: ["lock", p],
    "build": lambda p: ["build", p],
    "sites show": lambda p: ["sites", "show", p],
    "convert --archive": lambda p: ["convert", "cpu-bookworm", "--to", "sif", "--engine", "apptainer", "--archive", p],
    "cache prune --keep": lambda p: ["cache", "prune", "--keep", p],
}  # fmt: skip

# launch commands, for which a directory is an image
TAKES_A_DIRECTORY = {"run --image", "run --image (apptainer)", "batch --image", "jupyter --image"}


@pytest.fixture
def special(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A named pipe, a directory, a bound socket and /dev/null, with short names (a socket's
    path has at most 107 bytes: bound relative to the working directory)."""
    monkeypatch.chdir(tmp_path)
    os.mkfifo("fifo")
    os.mkdir("adir")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind("sock")
    yield {"fifo": "./fifo", "dir": "./adir", "socket": "./sock", "device": "/dev/null"}
    sock.close()


def _hang(*_: object) -> None:
    raise TimeoutError("the command blocked")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_path_that_is_not_a_file(command, kind, special, capsys) -> None:  # type: ignore[no-untyped-def]
    argv = COMMANDS[command](special[kind])
    old = signal.signal(signal.SIGALRM, _hang)
    signal.alarm(2)
    try:
        code = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    if kind == "dir" and command in TAKES_A_DIRECTORY:
        assert code == 0, err
        return
    assert code == 2, err
    assert len(err) == 1, err
    assert os.path.normpath(special[kind]) in err[0] and KINDS[kind] in err[0], err[0]
    assert "Traceback" not in err[0]


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_doctor_fails_the_image_check(kind, special, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # this machine's srun, without the cluster's slurm.conf, looks for one for a minute
    monkeypatch.setattr(ThisMachine, "srun_mpi_plugins", None)
    code = main(["doctor", "--site", "local", "--image", special[kind]])
    out = capsys.readouterr().out
    image = next(line for line in out.splitlines() if line.split()[1:2] == ["image"])
    assert code == 1
    assert image.startswith("FAIL") and KINDS[kind] in image, image


# every flag that names a file the tool writes, given the path
OUTPUTS: dict[str, Callable[[str], list[str]]] = {
    "render -o": lambda p: ["render", "cpu-bookworm", "-o", p],
    "schema -o": lambda p: ["schema", "site", "-o", p],
    "batch -o": lambda p: ["batch", "--site", "perlmutter", "--image", "u/img:1", "--account", "m1", "-o", p, "t.py"],
    "convert --to def -o": lambda p: ["convert", "cpu-bookworm", "--to", "def", "-o", p],
    "doctor --exclude-file": lambda p: ["doctor", "--site", "local", "--image", "x.sif", "--screen", "--exclude-file", p],
}  # fmt: skip


@pytest.mark.parametrize("kind", ["fifo", "socket", "link"])
@pytest.mark.parametrize("command", OUTPUTS)
def test_an_output_that_is_not_a_regular_file_is_refused_and_kept(
    command, kind, special, capsys
) -> None:  # type: ignore[no-untyped-def]
    """Each wrote a new file and renamed it onto the path: a named pipe or a socket was
    replaced by it, and as root `-o /dev/null` replaced the device itself."""
    Path("t.py").write_text("import torch\n")
    Path("file").write_text("kept\n")
    os.symlink("file", "link")
    path = {**special, "link": "./link"}[kind]
    before = os.lstat(path)
    assert main(OUTPUTS[command](path)) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    said = {**KINDS, "link": "is a symbolic link (to file)"}[kind]
    assert len(err) == 1 and os.path.normpath(path) in err[0] and said in err[0], err
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert Path("file").read_text() == "kept\n"
