"""Trust boundaries, group A: a site profile from someone else runs nothing of its author's.

The corpus (hostile/a_site_profiles.yaml) changes one field at a time; the file cases below
give a profile to the tool through a path others could write.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import stat
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hvd_container.launcher.sites import loader as site_loader
from hvd_container.launcher.sites import model as sites

from hvd_container.cli.app import main
from hvd_container.core.errors import UserError
from hvd_container.core.text import TERMINAL_CONTROLS

HOSTILE = Path(__file__).with_name("hostile")
CORPUS_A = yaml.safe_load((HOSTILE / "a_site_profiles.yaml").read_text())["cases"]


def _profile(case: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {"name": "t", "runtime": {"kind": case.get("runtime", "apptainer")}}
    *parents, last = case["at"].split(".")
    node = data
    for key in parents:
        node = node.setdefault(key, {} if key != "srun_options" else [])
    if last.isdigit():
        container_key = parents[-1]
        parent = data
        for key in parents[:-1]:
            parent = parent[key]
        parent[container_key] = [case["value"]]
    else:
        node[last] = case["value"]
    return data


def _case_id(case: dict[str, Any]) -> str:
    return f"{case.get('runtime', '')}:{case['at']}={case['value']}"


@pytest.mark.parametrize("case", CORPUS_A, ids=_case_id)
def test_a_profile_cannot_set_what_decides_which_program_runs(
    tmp_path: Path, case: dict[str, Any]
) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(_profile(case)))
    if case["refused"] is None:
        site_loader.read_site_file(path)
        return
    with pytest.raises(UserError) as err:
        site_loader.read_site_file(path)
    message = str(err.value)
    assert len(message.splitlines()) == 1, message
    assert message.startswith(f"{path}:"), message
    assert case["refused"] in message, message
    assert "allowed" in message or "not " in message or "cannot" in message, message


def test_the_corpus_has_fifty_refusals() -> None:
    assert sum(1 for c in CORPUS_A if c["refused"]) >= 50


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


PAYLOADS = {
    "path": {"env": {"PATH": "{dir}/bin:/usr/bin:/bin"}},
    "preload": {"env": {"LD_PRELOAD": "{dir}/x.so"}},
    "task-prolog": {"env": {"SLURM_TASK_PROLOG": "{dir}/bin/srun"}},
    "srun-option": {"scheduler": {"srun_options": ["--task-prolog={dir}/bin/srun"]}},
    "job-log": {"scheduler": {"sbatch_options": ["--output={dir}/stolen.log"]}},
    "module-file": {"modules": ["{dir}/evil.lua"]},
    "none-flags": {"runtime": {"kind": "none", "flags": ["sh", "-c", "touch {dir}/owned", "x"]}},
    "none-python": {"runtime": {"kind": "none", "python": "{dir}/bin/srun"}},
}


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_a_hostile_profile_is_refused_before_anything_runs(tmp_path: Path, payload: str) -> None:
    """The issue's payloads: a program of the profile's author that would create a file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text(f"#!/bin/sh\ntouch {tmp_path}/owned\n")
    srun.chmod(0o755)
    data = {"name": "theirs", "runtime": {"kind": "apptainer"}}
    text = yaml.safe_dump({**data, **PAYLOADS[payload]}).replace("{dir}", str(tmp_path))
    profile = tmp_path / "theirs.yaml"
    profile.write_text(text)
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    for argv in (
        ("run", "--site", str(profile), "--dry-run", "-n", "2", "--image", "/x.sif", str(script)),
        ("batch", "--site", str(profile), "-n", "2", "--image", "/x.sif", "-o",
         str(tmp_path / "job.sh"), str(script)),
    ):  # fmt: skip
        code, _out, err = _cli(*argv)
        assert code == 2, err
        assert len(err.strip().splitlines()) == 1, err
        assert str(profile) in err
    assert not (tmp_path / "owned").exists()
    assert not (tmp_path / "job.sh").exists()


# --- profiles read from paths others can write --------------------------------------------

PROFILE = "name: mine\nruntime: {kind: apptainer}\n"


def _write(path: Path, text: str = PROFILE, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def _refused(path: Path | str, *words: str) -> None:
    with pytest.raises(UserError) as err:
        site_loader.load_site(str(path))
    message = str(err.value)
    assert len(message.splitlines()) == 1, message
    for word in words:
        assert word in message, message


OTHER_UID = 65534  # nobody


@pytest.fixture
def private(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    return home


@pytest.mark.parametrize(
    "mode, words",
    [
        (0o664, ("writable by its group", "mode 0664")),
        (0o646, ("writable by others", "mode 0646")),
        (0o666, ("writable by group and others",)),
        (0o777, ("writable by group and others",)),
        (0o620, ("writable by its group",)),
    ],
)
def test_a_profile_others_can_write_is_refused(
    private: Path, mode: int, words: tuple[str, ...]
) -> None:
    path = _write(private / "mine.yaml", mode=mode)
    _refused(path, str(path), "refused", *words, "chmod go-w")


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o777])
def test_a_profile_in_a_folder_others_can_write_is_refused(private: Path, mode: int) -> None:
    shared = private / "shared"
    path = _write(shared / "mine.yaml")
    shared.chmod(mode)
    _refused(path, f"its folder {shared}", "writable")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_profile_of_another_user_is_refused(private: Path) -> None:
    path = _write(private / "mine.yaml")
    os.chown(path, OTHER_UID, -1)
    _refused(path, "belongs to another user", f"uid {OTHER_UID}")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_profile_in_a_folder_of_another_user_is_refused(private: Path) -> None:
    theirs = private / "theirs"
    path = _write(theirs / "mine.yaml")
    os.chown(theirs, OTHER_UID, -1)
    _refused(path, f"its folder {theirs}", "belongs to another user")


def test_a_link_to_a_profile_others_can_write_is_refused(private: Path) -> None:
    target = _write(private / "shared" / "theirs.yaml", mode=0o666)
    link = private / "mine.yaml"
    link.symlink_to(target)
    _refused(link, "writable by group and others")


def test_a_link_in_a_folder_others_can_write_is_refused(private: Path) -> None:
    target = _write(private / "mine" / "real.yaml")
    shared = private / "shared"
    shared.mkdir()
    (shared / "mine.yaml").symlink_to(target)
    shared.chmod(0o777)
    _refused(shared / "mine.yaml", f"its folder {shared}", "writable")


def test_an_extends_of_a_profile_others_can_write_is_refused(private: Path) -> None:
    _write(private / "shared" / "base.yaml", mode=0o666)
    child = _write(private / "mine.yaml", "extends: shared/base.yaml\nname: mine\n")
    _refused(child, str(private / "shared" / "base.yaml"), "writable")


def test_a_private_profile_under_the_sticky_tmp_folder_loads(private: Path) -> None:
    """/tmp lets everyone write but only an entry's owner rename it: as safe as a home folder."""
    assert stat.S_IMODE(os.stat("/tmp").st_mode) & stat.S_ISVTX
    assert site_loader.load_site(str(_write(private / "mine.yaml"))).name == "mine"


def test_a_users_sites_folder_others_can_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    user_sites = config / "hvd-container" / "sites"
    _write(user_sites / "mine.yaml")
    user_sites.chmod(0o777)
    _refused("mine", "its folder", "writable")
    # a launch that only detects the site passes the profile over with a warning
    warnings: list[str] = []
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "somewhere")
    assert site_loader.detect_site("somewhere", warnings) is None
    assert warnings and "mine passed over" in warnings[0]


def test_a_config_file_others_can_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.delenv(site_loader.SITE_ENV_VAR, raising=False)
    _write(config / "hvd-container" / "config.yaml", "site: local\n", mode=0o666)
    with pytest.raises(UserError, match="config.yaml: refused: the file is writable"):
        site_loader.choose_site(None)


def test_builtin_profiles_are_trusted_as_shipped() -> None:
    for name in site_loader.list_sites():
        site_loader.load_site(name)


# --- group C: values that reach Slurm's and the runtimes' own parsers -------------------------


@pytest.mark.parametrize("runtime", ["charliecloud", "podman-hpc"])
@pytest.mark.parametrize("folder", ["w,/etc:/mnt/etc:rw", "a:b", "a,b", "x:/y"])
def test_a_working_directory_in_bind_syntax_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: str, folder: str
) -> None:
    """`w,/etc:/mnt/etc:rw` as a folder would bind /etc into the container."""
    work = tmp_path / folder
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    image = "/x.sif" if runtime == "charliecloud" else "registry.example/x:1"
    code, out, err = _cli("run", "--site", "local", "--runtime", runtime, "--dry-run", "-n", "1",
                          "--image", image, "true")  # fmt: skip
    assert code == 2, out + err
    assert len(err.strip().splitlines()) == 1, err
    assert "the working directory" in err and "bind option" in err
    assert "/etc:/etc" not in out


@pytest.mark.parametrize("job_id", ["²³", "١٢", "12³", "①", "12a", "-1", " 12", ""])
def test_a_job_id_is_ascii_digits(job_id: str) -> None:
    """`jupyter --stop ²³` ran `scancel ²³`: str.isdigit() takes other digits."""
    for argv in (("jupyter", "--stop", job_id), ("logs", job_id), ("jobs", "--cancel", job_id)):
        code, _out, err = _cli(*argv)
        assert code == 2, (argv, err)
        assert len(err.strip().splitlines()) == 1, err


# --- group B: the tool's own files in a shared folder ---------------------------------------

# the path above the working directory, as another user could leave it: (what, how to make it)
PARENT_STATES = {
    "work folder 0777": lambda w: w.chmod(0o777),
    "work folder 0775": lambda w: w.chmod(0o775),
    "work folder 0757": lambda w: w.chmod(0o757),
    "work folder 0770": lambda w: w.chmod(0o770),
    "work folder 0722": lambda w: w.chmod(0o722),
    "work folder 0707": lambda w: w.chmod(0o707),
    "work folder 2775": lambda w: w.chmod(0o2775),
    "work folder 1777 of another user": lambda w: (w.chmod(0o1777), os.chown(w, OTHER_UID, -1)),
    "project folder 0777": lambda w: w.parent.chmod(0o777),
    "project folder 0775": lambda w: w.parent.chmod(0o775),
    "project folder 2770": lambda w: w.parent.chmod(0o2770),
    "work folder of another user": lambda w: os.chown(w, OTHER_UID, -1),
    "project folder of another user": lambda w: os.chown(w.parent, OTHER_UID, -1),
}
# what another user may have put where the tool's folder goes
ENTRY_STATES = {
    "a link to their folder": lambda e, t: e.symlink_to(t),
    "a link to the user's own folder": lambda e, t: e.symlink_to(e.parent.parent),
    "a dangling link": lambda e, t: e.symlink_to(t / "nowhere"),
    "a regular file": lambda e, t: e.write_text("x"),
    "a named pipe": lambda e, t: os.mkfifo(e),
    "a folder of another user": lambda e, t: (e.mkdir(), os.chown(e, OTHER_UID, -1)),
    "a link to a folder of another user": lambda e, t: (
        os.chown(t, OTHER_UID, -1),
        e.symlink_to(t),
    ),
}
NEEDS_ROOT = ("of another user", "a folder of another user", "a link to a folder of another user")


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "project" / "work"
    work.mkdir(parents=True)
    tmp_path.joinpath("project").chmod(0o755)
    return work


def _needs_root(state: str) -> None:
    if "another user" in state and os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root")


@pytest.fixture(params=sorted(PARENT_STATES))
def shared_workdir(request: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory, with the path above it left as another user could leave it."""
    _needs_root(request.param)
    work = _workdir(tmp_path)
    PARENT_STATES[request.param](work)
    monkeypatch.chdir(work)
    return work


def test_the_smoke_program_is_not_written_where_others_can_swap_it(shared_workdir: Path) -> None:
    from hvd_container.launcher.runtimes import tool_folder

    work = shared_workdir
    with pytest.raises(UserError) as err:
        tool_folder("the smoke program")
    message = str(err.value)
    assert len(message.splitlines()) == 1 and "the smoke program" in message, message
    assert not (work / ".hvd-container").exists()


def test_the_gloo_rendezvous_is_not_read_back_where_others_can_swap_it(
    shared_workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HVD_GLOO_DIR", raising=False)
    code, out, err = _cli("run", "--site", "local", "--runtime", "none", "--controller", "gloo",
                          "--dry-run", "-N", "1", "--ntasks-per-node", "2", "train.py")  # fmt: skip
    assert code == 2, out
    assert len(err.strip().splitlines()) == 1 and "Gloo rendezvous address" in err, err


def test_jupyters_profile_is_not_made_where_others_can_write(shared_workdir: Path) -> None:
    """IPython runs its profile's startup files: a swapped profile runs in the user's kernel."""
    from hvd_container.core.files import private_folder

    with pytest.raises(UserError, match="Jupyter's IPython profile"):
        private_folder(shared_workdir, ".hvd-container", "Jupyter's IPython profile")


@pytest.mark.parametrize("state", sorted(ENTRY_STATES))
@pytest.mark.parametrize("purpose", ["the smoke program", "Jupyter's IPython profile"])
def test_what_others_put_in_place_of_the_tools_folder_is_refused(
    tmp_path: Path, state: str, purpose: str
) -> None:
    from hvd_container.core.files import private_folder

    _needs_root(state)
    work = _workdir(tmp_path)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    entry = work / ".hvd-container"
    ENTRY_STATES[state](entry, theirs)
    with pytest.raises(UserError) as err:
        private_folder(work, ".hvd-container", purpose)
    assert len(str(err.value).splitlines()) == 1
    assert list(theirs.iterdir()) == []


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o705])
def test_the_tools_own_folder_is_made_private(tmp_path: Path, mode: int) -> None:
    from hvd_container.core.files import private_folder

    work = _workdir(tmp_path)
    (work / ".hvd-container").mkdir(mode=mode)
    (work / ".hvd-container").chmod(mode)
    folder = private_folder(work, ".hvd-container", "x")
    assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o1777])
def test_the_tools_own_folder_others_could_write_is_refused(tmp_path: Path, mode: int) -> None:
    from hvd_container.core.files import private_folder

    work = _workdir(tmp_path)
    (work / ".hvd-container").mkdir(mode=0o700)
    (work / ".hvd-container").chmod(mode)
    with pytest.raises(UserError, match=r"writable by others .* remove it \(rm -r "):
        private_folder(work, ".hvd-container", "x")
    assert stat.S_IMODE(os.lstat(work / ".hvd-container").st_mode) == mode  # left as found


@pytest.mark.parametrize("kind", ["file", "link", "dangling link", "named pipe"])
def test_a_file_of_the_tool_is_always_new(tmp_path: Path, kind: str) -> None:
    from hvd_container.core.files import write_new_private

    target = tmp_path / "target"
    target.write_text("theirs")
    path = tmp_path / "smoke.py"
    {"file": lambda: path.write_text("old"), "link": lambda: path.symlink_to(target),
     "dangling link": lambda: path.symlink_to(tmp_path / "none"),
     "named pipe": lambda: os.mkfifo(path)}[kind]()  # fmt: skip
    with pytest.raises(UserError, match="already exists"):
        write_new_private(path, "print(1)\n")
    assert target.read_text() == "theirs" and not (tmp_path / "none").exists()


def test_a_new_file_of_the_tool_is_owner_only(tmp_path: Path) -> None:
    from hvd_container.core.files import write_new_private

    write_new_private(tmp_path / "smoke.py", "print(1)\n")
    assert stat.S_IMODE(os.stat(tmp_path / "smoke.py").st_mode) == 0o600


# --- group D: what a site's tools print to `sites probe` ------------------------------------

CORPUS_D = yaml.safe_load((HOSTILE / "d_probe_outputs.yaml").read_text())["cases"]
PROBE_BOUND = 15.0  # seconds for the whole probe, whatever the site prints
_RAW = re.compile(f"[{TERMINAL_CONTROLS}]")


def _text(value: Any, default: str = "") -> str:
    if value is None:
        return default
    if isinstance(value, dict):
        return value["repeat"] * value["times"] + value.get("then", "")
    return str(value)


def _fake_site(tmp_path: Path, case: dict[str, Any]) -> dict[str, str]:
    """A login node whose tools print the case's output: scontrol, srun, Lmod, podman-hpc."""
    out = tmp_path / "out"
    out.mkdir()
    partition = _text(case.get("partition"), "debug")
    outputs = {
        "partitions": f"PartitionName={partition} Default=YES MaxTime=UNLIMITED Nodes=n1\n"
        + _text(case.get("scontrol_extra")),
        "nodes": f"NodeName=n1 Arch=x86_64 CPUTot={_text(case.get('cputot'), '8')} "
        f"Gres=gpu:{_text(case.get('gres'), '4')} Partitions={partition}\n",
        "config": "MpiDefault = none\nClusterName = c\n",
        "mpi": _text(case.get("mpi_list"), "MPI plugin types are...\n  none\n  pmi2\n"),
        "modules": _text(case.get("modules"), "cuda/12.2\n"),
    }
    for name, text in outputs.items():
        (out / name).write_text(text, encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = {
        "scontrol": f'case "$2" in partition) cat {out}/partitions;; node) cat {out}/nodes;; '
        f"*) cat {out}/config;; esac",
        "srun": f'case "$1" in --mpi=list) cat {out}/mpi;; esac',
        "lmod": f"cat {out}/modules >&2",
    }
    if case.get("podman_module") is not None:
        modules = tmp_path / "podman-modules"
        modules.mkdir()
        (modules / "m.yaml").write_text(_text(case["podman_module"]), encoding="utf-8")
        tools["podman-hpc"] = f'[ "$1" = infohpc ] && echo "modules_dir (site): {modules}"; true'
    for name, body in tools.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "LMOD_CMD": str(bin_dir / "lmod")}


@pytest.mark.parametrize("case", CORPUS_D, ids=lambda c: c["about"])
def test_what_a_site_prints_cannot_break_the_probe_or_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: dict[str, Any]
) -> None:
    for name, value in _fake_site(tmp_path, case).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MODULESHOME", raising=False)
    for argv in (("sites", "probe", "--timeout", "5"), ("sites", "probe", "--diff", "local",
                                                      "--timeout", "5")):  # fmt: skip
        started = time.monotonic()
        code, out, err = _cli(*argv)
        assert time.monotonic() - started < PROBE_BOUND, argv
        assert code in (0, 1, 2), err
        assert "Traceback" not in err
        assert not _RAW.search(out) and not _RAW.search(err), (out[-300:], err[-300:])
        if argv[2] == "--timeout" and code == 0:
            profile = tmp_path / "probed.yaml"
            profile.write_text(out)
            site = site_loader.read_site_file(profile)
            for name, facts in site.scheduler.partitions.items():
                assert sites.valid_partition_name(name), name
                assert 0 <= facts.gpus_per_node <= sites.MAX_GPUS_PER_NODE


# --- group E: crashes, and what reaches the terminal -----------------------------------------


def _chain(folder: Path, depth: int, last: str, link: str) -> Path:
    """depth files, each `extends:` the next; the last is `last`."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(depth - 1):
        (folder / f"c{i}.yaml").write_text(f"extends: c{i + 1}.yaml\n{link}")
    (folder / f"c{depth - 1}.yaml").write_text(last)
    return folder / "c0.yaml"


@pytest.mark.parametrize("depth", [33, 100, 1000, 2000])
def test_a_deep_extends_chain_of_site_profiles_is_one_line(tmp_path: Path, depth: int) -> None:
    first = _chain(tmp_path / "p", depth, "name: c0\nruntime: {kind: apptainer}\n", "")
    with pytest.raises(UserError, match=r"extends: a chain of more than 32 files") as err:
        site_loader.read_site_file(first)
    assert len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize("depth", [33, 100, 1000, 2000])
def test_a_deep_extends_chain_of_recipes_is_one_line(tmp_path: Path, depth: int) -> None:
    from hvd_container.containers.recipe_loader import read_recipe

    first = _chain(tmp_path / "r", depth, "extends: cpu-bookworm\nname: deep\n", "")
    with pytest.raises(UserError, match=r"extends: a chain of more than 32 files") as err:
        read_recipe(first)
    assert len(str(err.value).splitlines()) == 1


def test_a_chain_of_32_files_still_loads(tmp_path: Path) -> None:
    first = _chain(tmp_path / "p", 32, "name: c0\nruntime: {kind: apptainer}\n", "")
    assert site_loader.read_site_file(first).runtime.kind == "apptainer"


@pytest.mark.parametrize("command", [("sites", "list"), ("run", "--dry-run", "-n", "1",
                                     "--runtime", "none", "true")])  # fmt: skip
def test_a_deep_chain_in_the_users_sites_folder_breaks_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    config = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.delenv(site_loader.SITE_ENV_VAR, raising=False)
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "elsewhere")
    first = _chain(tmp_path / "chain", 1000, "name: deep\nruntime: {kind: apptainer}\n", "")
    _write(config / "hvd-container" / "sites" / "deep.yaml", f"extends: {first}\nname: deep\n")
    code, _out, err = _cli(*command)
    assert code == 0, err
    assert "Traceback" not in err and "RecursionError" not in err
    if command[0] == "sites":
        assert "site profile deep passed over" in err and "more than 32 files" in err


LABELS = ".singularity.d/labels.json"


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda f: os.truncate(f, 4 << 30), "more than an image's labels"),  # sparse, 4 GiB
        (lambda f: os.truncate(f, (1 << 20) + 1), "more than an image's labels"),
        (lambda f: os.truncate(f, 64 << 20), "more than an image's labels"),
        (lambda f: f.write_text("[" * 200_000), None),  # nested past the parser: no facts
        (lambda f: f.write_text('{"a": ' * 100_000), None),
        (lambda f: f.write_bytes(b"\xff\xfe"), "not a UTF-8"),
        (lambda f: (f.unlink(), os.mkfifo(f)), None),  # never opened: it would block
        (lambda f: (f.unlink(), f.symlink_to("/dev/zero")), None),
    ],
)
def test_an_image_directorys_labels_are_read_with_limits(
    tmp_path: Path, make: Any, words: str | None
) -> None:
    from hvd_container.launcher.plan.image import read_facts

    image = tmp_path / "image"
    labels = image / LABELS
    labels.parent.mkdir(parents=True)
    labels.write_text("{}")
    make(labels)
    started = time.monotonic()
    if words is None:
        assert read_facts(str(image), ask_docker=False) is None
    else:
        with pytest.raises(UserError, match=words) as err:
            read_facts(str(image), ask_docker=False)
        assert len(str(err.value).splitlines()) == 1
    assert time.monotonic() - started < 10


# what a terminal acts on and a profile or recipe may still hold (their Line fields refuse
# control characters and line breaks; these are printable by Python's rules or invisible)
INVISIBLE = ["\u202e", "\u202a", "\u202b", "\u202c", "\u202d", "\u2066", "\u2067", "\u2068",
             "\u2069", "\u200e", "\u200f"]  # fmt: skip


@pytest.mark.parametrize("char", INVISIBLE, ids=lambda c: f"U+{ord(c):04X}")
def test_a_site_description_reaches_the_terminal_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, char: str
) -> None:
    config = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    _write(config / "hvd-container" / "sites" / "mine.yaml",
           f"name: mine\ndescription: 'evil{char}txt.exe'\nruntime: {{kind: apptainer}}\n"
           "sources:\n  - {about: 'fact" + char + "', url: 'https://example.org/" + char + "',"
           " checked: '2026-01-01', confirmed: false}\n")  # fmt: skip
    code, out, err = _cli("sites", "list")
    assert code == 0, err
    assert char not in out and f"\\u{ord(char):04x}" in out
    code, out, err = _cli("sites", "show", "mine")
    assert code == 0, err
    assert char not in out and f"\\u{ord(char):04x}" in out


@pytest.mark.parametrize("char", INVISIBLE, ids=lambda c: f"U+{ord(c):04X}")
def test_a_recipe_from_elsewhere_reaches_the_terminal_escaped(tmp_path: Path, char: str) -> None:
    recipe = tmp_path / f"mine{char}.yaml"
    recipe.write_text(f"extends: cpu-bookworm\nname: mine\ndescription: 'evil{char}txt'\n")
    code, out, err = _cli("recipes", "show", str(recipe))
    assert code == 0, err
    assert char not in out + err
    code, out, err = _cli("recipes", "validate", str(recipe))
    assert char not in out + err


CONTROLS = ["\x1b", "\x9b", "\x07", "\x08", "\x7f", "\u2028", "\u2029", "\r"]


@pytest.mark.parametrize("field", ["description", "notes"])
@pytest.mark.parametrize("char", CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
def test_a_control_character_in_a_profile_text_is_refused_with_its_line(
    tmp_path: Path, field: str, char: str
) -> None:
    value = json.dumps(f"evil{char}[2Jtxt")  # a JSON string is a YAML double-quoted one
    text = f"name: mine\nruntime: {{kind: apptainer}}\n{field}: " + (
        value if field == "description" else f"[{value}]"
    )
    path = _write(tmp_path / "home" / "mine.yaml", text + "\n")
    with pytest.raises(UserError) as err:
        site_loader.read_site_file(path)
    message = str(err.value)
    assert f"{path}:3: {field}" in message and char not in message, message


@pytest.mark.parametrize("field", ["bio#x", "bio x", "bio'", 'bio"', "bio\\x", "bio;appl"])
def test_neurons_comment_field_is_a_word_sbatch_and_the_site_read_alike(field: str) -> None:
    """`field=bio#x;appl=pytorch` passed the check; sbatch then read `field=bio`."""
    code, _out, err = _cli("run", "--site", "neuron", "--dry-run", "-n", "1", "--image",
                           "/x.sif", "--comment", f"field={field};appl=pytorch", "train.py")  # fmt: skip
    assert code == 2, err
    assert "--comment" in err and len(err.strip().splitlines()) == 1, err
