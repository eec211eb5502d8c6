"""Trust boundaries, round two: cases of each kind the allow-lists close (launcher/guard.py).

Each case below was accepted before the guard: a profile from someone else (or a pass-through
flag) that chose the program, walked past a list of what was forbidden, or read options
otherwise than Slurm does. Now each is refused in one line naming its key or flag. The lines the
tool writes are read back through tests/unit/slurm_getopt.py, glibc's getopt_long over Slurm's
option table: what srun would take as its options, and the program it would run.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from _fake_slurm import FakeSlurm
from hvd_container.launcher import guard
from hvd_container.launcher.plan.request import LaunchOptions, request_from_options
from hvd_container.launcher.sites import loader as site_loader

from hvd_container.cli.app import main
from hvd_container.core.errors import UserError
from tests.unit import slurm_getopt
from tests.unit._launch_helpers import isolated, plan_launch  # noqa: F401 - the fixture

# --- the cases, by kind -------------------------------------------------------------------

# 1. a runtime's flags: each runtime's words that the old lists did not name (srun's own
# options for the Container Engine and Pyxis, whose flags go to srun)
_SRUN_WORDS = [
    "--prolog=/x", "--task-prolog=/x", "--epilog=/x", "--task-epilog=/x", "--export=ALL",
    "--chdir=/x", "-D/x", "--output=/x", "--input=/x", "--error=/x", "--bcast=/x",
    "--multi-prog", "--jobid=1", "--container=/x", "--uid=0", "--get-user-env",
    "--environment=/x.toml", "--container-image=evil/img", "--export-file=/x", "--send-libs",
]  # fmt: skip
RUNTIME_FLAGS: list[tuple[str, list[str]]] = [
    *(("container-engine", [w]) for w in _SRUN_WORDS),
    *(("pyxis", [w]) for w in [*_SRUN_WORDS, "--container-save=/x.sqsh", "--container-name=t"]),
    *(("sarus-suite", [w]) for w in [*_SRUN_WORDS, "--edf=/x.toml", "--edf", "/x.toml"]),
    *(
        (kind, words)
        for kind in ("apptainer", "singularity")
        for words in (
            ["--mount=type=bind,src=/x,dst=/usr/bin"],
            ["--overlay=/x.img"],
            ["--home=/x"],
            ["--fakeroot"],
            ["--writable"],
            ["--add-caps=all"],
            ["--containlibs=/x.so"],
            ["--scratch=/usr"],
            ["--security=seccomp:unconfined"],
            ["-cB", "/:/host"],
            ["--keep-privs"],
            ["-H/x"],
        )
    ),
    *(
        ("charliecloud", words)
        for words in (
            ["--storage=/x"],
            ["--mount=/x"],
            ["--write"],
            ["--unsafe"],
            ["--gid=0"],
            ["--uid=0"],
            ["-s/x"],
            ["-m/x"],
            ["-w"],
        )
    ),  # fmt: skip
    *(
        ("podman-hpc", words)
        for words in (
            ["--privileged"],
            ["--security-opt=seccomp=unconfined"],
            ["--device=/dev/mem"],
            ["--cap-add=ALL"],
            ["--env-host"],
            ["--env-merge=X=1"],
            ["--pull=always"],
            ["--rootfs"],
            ["--tmpfs=/usr"],
        )
    ),  # fmt: skip
    *(("shifter", words) for words in (["--image=evil/img"], ["-i", "evil/img"], ["--clearenv"])),
]

# 2. option bundles, abbreviations and bare values in srun_options, sbatch_options and the
# pass-through flags: read as getopt_long reads them, each reaches an option not allowed
_BUNDLE_HEADS = ["-E", "-vE", "-QE", "-lE", "-uE", "-OE", "-sE", "-HE", "-XE", "-ZE"]
_BUNDLE_TAILS = ["D/dir", "o/x", "e/x", "i/x"]
_BARE = ["--nodelist", "--mem", "--gres", "--exclude", "--reservation", "-w", "-x", "-m",
         "--distribution", "--cpu-bind", "--licenses", "--mail-user"]  # fmt: skip
_UNLISTED = ["--multi-prog", "--jobid=1", "--nodefile=/x", "--bbf=/x", "--bb=x", "--pty",
             "--x11", "--send-libs", "--test-only", "--external-launcher", "--het-group=0",
             "--no-allocate", "-Z", "--edf=/x.toml"]  # fmt: skip
_SBATCH_SPANK = ["--environment=/x.toml", "--edf=/x.toml", "--container-image=evil/img",
                 "--container-mounts=/x:/usr/bin", "--container-workdir=/x", "--parsable",
                 "--wait", "--array=0-99", "--batch=x", "--bbf=/x", "--ignore-pbs"]  # fmt: skip
BUNDLES: list[tuple[str, str]] = [
    *(("scheduler.srun_options", h + t) for h in _BUNDLE_HEADS for t in _BUNDLE_TAILS),
    *(("scheduler.srun_options", b) for b in _BARE),
    *(("scheduler.srun_options", u) for u in _UNLISTED),
    *(("scheduler.sbatch_options", s) for s in _SBATCH_SPANK),
    *(("--srun-option", h + t) for h in _BUNDLE_HEADS[:5] for t in _BUNDLE_TAILS),
    *(("--srun-option", b) for b in _BARE),
    *(("--srun-option", u) for u in _UNLISTED),
    *(("--sbatch-option", s) for s in _SBATCH_SPANK),
]

# 3. variables that load code: each library's plugin, module, path or start-up variable
_LOADS_CODE = [
    "OPENSSL_CONF", "OPENSSL_MODULES", "OPENSSL_ENGINES", "HOME", "GCONV_PATH",
    "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN", "NCCL_ENV_PLUGIN",
    "NCCL_CONF_FILE", "NCCL_TOPO_FILE", "FI_PROVIDER_PATH", "UCX_MODULE_DIR",
    "OMPI_MCA_mca_base_component_path", "PMIX_MCA_mca_base_component_path",
    "PRTE_MCA_prte_base_component_path", "OMPI_MCA_mca_base_param_files",
    "HWLOC_PLUGINS_PATH", "PERL5OPT", "PERL5LIB", "NODE_OPTIONS", "LUA_INIT", "LUA_PATH",
    "RUBYOPT", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "TORCHINDUCTOR_CACHE_DIR",
    "TORCH_HOME", "CUDA_CACHE_PATH", "CUDA_INJECTION64_PATH", "ENROOT_CACHE_PATH",
    "EDF_IMAGESTORE", "XDG_CONFIG_HOME", "XDG_DATA_DIRS", "MPLCONFIGDIR", "JUPYTER_CONFIG_DIR",
    "HF_HOME", "GIT_CONFIG_GLOBAL", "HOROVOD_TIMELINE", "MALLOC_CONF", "GLIBC_TUNABLES",
    "TMPDIR", "NCCL_DEBUG_FILE", "KRB5_CONFIG", "LOCPATH", "TERMINFO", "ZDOTDIR", "INPUTRC",
    "HOROVOD_AUTOTUNE_LOG", "UCX_LOG_FILE", "MPICH_RANK_REORDER_FILE",
]  # fmt: skip
VARIABLES: list[tuple[str, str]] = [
    *(("env", name) for name in _LOADS_CODE),
    *(("multi_node_env", name) for name in _LOADS_CODE[:10]),
    *(("env", "APPTAINERENV_" + name) for name in _LOADS_CODE[:10]),
]

# 4. the program, chosen by a bind or a path
_PROGRAM_PLACES = ["/usr/bin/python", "/usr/local/bin", "/usr", "/opt/venv", "/opt/venv/bin",
                   "/etc", "/etc/ld.so.preload", "/lib/x86_64-linux-gnu", "/lib64", "/bin",
                   "/sbin", "/usr/lib/python3/dist-packages", "/.singularity.d/env"]  # fmt: skip
_PYTHONS = ["/tmp/python", "/home/u/python", "$HOME/python", "~/python", "./python",
            "/var/tmp/p/python3", "/dev/shm/python", "/usr/../tmp/python", "bash", "sh",
            "/bin/sh", "perl"]  # fmt: skip
PROGRAMS: list[tuple[str, str, Any]] = [
    *(("apptainer", "binds", [f"/scratch/x:{p}"]) for p in _PROGRAM_PLACES),
    *(("apptainer", "runtime.flags", ["-B", f"/scratch/x:{p}"]) for p in _PROGRAM_PLACES[:6]),
    *(("apptainer", "runtime.flags", [f"--bind=/scratch/x:{p}"]) for p in _PROGRAM_PLACES[6:]),
    *(("pyxis", "runtime.flags", [f"--container-mounts=/x:{p}"]) for p in _PROGRAM_PLACES[:5]),
    *(("podman-hpc", "runtime.flags", ["-v", f"/x:{p}"]) for p in _PROGRAM_PLACES[:4]),
    *(("charliecloud", "runtime.flags", ["-b", f"/x:{p}"]) for p in _PROGRAM_PLACES[:4]),
    *((kind, "runtime.python", p) for kind in ("apptainer", "shifter", "podman-hpc") for p in _PYTHONS),
]  # fmt: skip


def test_each_kind_has_fifty_cases_of_its_own() -> None:
    kinds = (RUNTIME_FLAGS, BUNDLES, VARIABLES, PROGRAMS, SHARED_PLACES, REWRITES)
    assert min(len(k) for k in kinds) >= 50


# --- how a case is tried -----------------------------------------------------------------


def _profile(kind: str, at: str, value: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": "t", "runtime": {"kind": kind}}
    *parents, last = at.split(".")
    node = data
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return data


def _refused(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError) as err:
        site_loader.read_site_file(path)
    message = str(err.value)
    assert len(message.splitlines()) == 1 and message.startswith(f"{path}:"), message
    return message


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


@pytest.mark.parametrize(("kind", "flags"), RUNTIME_FLAGS, ids=lambda v: repr(v))
def test_a_runtime_takes_its_own_known_flags_only(
    tmp_path: Path, kind: str, flags: list[str]
) -> None:
    message = _refused(tmp_path, _profile(kind, "runtime.flags", flags))
    assert "runtime.flags" in message and any(repr(f) in message for f in flags), message


@pytest.mark.parametrize(("at", "value"), BUNDLES, ids=lambda v: repr(v))
def test_options_are_read_as_slurm_reads_them_and_allowed_by_name(
    tmp_path: Path, at: str, value: str
) -> None:
    if at.startswith("--"):
        code, err = _cli("run", "--site", "local", "--image", "x.sif", "-N", "2",
                         f"{at}={value}", "--dry-run", "t.py")  # fmt: skip
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert err.startswith(f"hvd-container: error: {at} {value!r}: "), err
        return
    message = _refused(tmp_path, _profile("apptainer", at, [value]))
    assert at in message and repr(value) in message, message


@pytest.mark.parametrize(("at", "name"), VARIABLES, ids=lambda v: repr(v))
def test_a_profile_sets_only_variables_that_cannot_load_code(
    tmp_path: Path, at: str, name: str
) -> None:
    message = _refused(tmp_path, _profile("apptainer", at, {name: "/x"}))
    assert f"{at}: {name}:" in message, message


@pytest.mark.parametrize(("kind", "at", "value"), PROGRAMS, ids=lambda v: repr(v))
def test_no_bind_or_path_chooses_the_program(
    tmp_path: Path, kind: str, at: str, value: Any
) -> None:
    message = _refused(tmp_path, _profile(kind, at, value))
    assert at in message, message


# --- what a user may still allow -----------------------------------------------------------


def test_a_trusted_profile_may_set_what_it_showed_and_a_change_untrusts_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.yaml"
    data = _profile("apptainer", "env", {"NCCL_NET_PLUGIN": "/opt/site/libnccl-net.so"})
    data["binds"] = ["/opt/site:/opt/site"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError) as err:
        site_loader.read_site_file(path)
    assert len(err.value.problems) == 2
    assert all(f"hvd-container sites trust {path})" in p for p in err.value.problems), err.value
    code, err = _cli("sites", "trust", "--show", str(path))
    assert code == 0 and err == ""
    with pytest.raises(UserError):
        site_loader.read_site_file(path)  # --show trusts nothing
    files, found = site_loader.trust_profile(path)
    assert files == [path] and len(found) == 2, found
    assert any("NCCL_NET_PLUGIN" in f for f in found) and any("/opt/site" in f for f in found)
    site = site_loader.read_site_file(path)
    assert site.env == {"NCCL_NET_PLUGIN": "/opt/site/libnccl-net.so"}
    store = site_loader.trust_store().path
    assert store.stat().st_mode & 0o777 == 0o600 and store.parent.stat().st_mode & 0o777 == 0o700
    path.write_text(path.read_text() + "# changed\n")
    with pytest.raises(UserError):  # the same settings, a changed file: untrusted again
        site_loader.read_site_file(path)
    assert site_loader.untrust_profile(path)


def test_trust_never_allows_what_the_tool_sets_itself(tmp_path: Path) -> None:
    for at, value in (
        ("env", {"MASTER_ADDR": "evil"}),
        ("scheduler.srun_options", ["--nodelist"]),
        ("scheduler.srun_options", ["--output=/x"]),
        ("runtime.flags", ["--bind"]),
    ):
        path = tmp_path / "t.yaml"
        path.write_text(yaml.safe_dump(_profile("apptainer", at, value)))
        site_loader.trust_store().add([path])
        with pytest.raises(UserError, match=at.split(".")[-1]):
            site_loader.read_site_file(path)


def test_a_profile_that_extends_a_built_in_one_is_judged_by_its_own_settings(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("extends: perlmutter\nname: mine\nscheduler:\n  account: m1234_g\n")
    site = site_loader.read_site_file(path)  # perlmutter's own NCCL_NET, FI_* and flags are allowed
    assert site.name == "mine" and site.runtime.kind == "shifter"


# --- the lines written, read back as Slurm reads them ------------------------------------


def test_the_guard_reads_options_as_getopt_long_does() -> None:
    """Every prefix of every long option, alone, with a value and before a word; every short
    letter bundled after each other one, with a value attached: the guard's reader and glibc's
    getopt_long agree on the options, their values, the program and the refusals."""
    longs = sorted({row[0] for row in guard.OPTIONS})
    shorts = sorted({row[2] for row in guard.OPTIONS if row[2]})
    tried = 0
    for command in ("srun", "sbatch", "salloc"):
        cases = [[f"--{n[:k]}", *tail] for n in longs for k in range(1, len(n) + 1)
                 for tail in ([], ["prog"])]  # fmt: skip
        cases += [[f"--{n}=v", "prog"] for n in longs]
        cases += [[f"-{a}{b}/v", "prog"] for a in shorts for b in shorts]
        for words in cases:
            theirs = slurm_getopt.read(command, words)
            try:
                mine, end = guard.read_slurm_options(words, command)
            except guard.NotAnOption:
                assert theirs.error, (command, words, theirs)
                continue
            assert not theirs.error, (command, words, mine)
            key = _letters(command)
            assert [(key.get(o.name, o.name), o.value) for o in mine] == [
                (key.get(n, n), v) for n, v in theirs.options
            ], (command, words)
            assert words[end:] == theirs.program, (command, words)
            tried += 1
    assert tried > 5000


def _letters(command: str) -> dict[str, str]:
    """long name -> its short letter in this command: getopt_long gives a short option's
    letter, whichever long name it was spelt as (-K is --kill-on-bad-exit to srun)."""
    return {
        name: short for name, _a, short, cmds in guard.OPTIONS if short and command in cmds.split()
    }


BUILT_IN = sorted(p.stem for p in site_loader.BUILTIN_DIR.glob("*.yaml"))


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_written_line_is_read_by_srun_as_the_tool_meant(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step's srun line and the script's #SBATCH lines, read by the stand-in: options the
    guard allows or the tool sets, never one that chooses a program, file or environment, and
    srun runs the runtime's program with the script after it."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    site = site_loader.load_site(name)
    image = (
        "x.sif" if site.runtime.kind in ("apptainer", "singularity", "charliecloud") else "u/i:t"
    )
    given = LaunchOptions(
        site=name, image=image, nodes="2", controller="torch", account="a1",
        srun_options=["-uK1", "--mem-bind=local"], sbatch_options=["--mail-type=END"], mem=None if name == "neuron" else "64G",
        comment="field=ai;appl=pytorch" if name == "neuron" else None,
    )  # fmt: skip
    _site, request = request_from_options("train.py", ["--lr", "0.1"], given)
    plan = plan_launch(_site, request)
    spank = {"pyxis": slurm_getopt.PYXIS, "container-engine": slurm_getopt.CONTAINER_ENGINE}
    at = plan.step.index("srun")  # after a controller's sh wrapper, if it has one
    assert at == 0 or plan.step[:2] == ["sh", "-c"], plan.step
    step = slurm_getopt.read("srun", plan.step[at + 1 :], spank.get(site.runtime.kind, []))
    assert not step.error, plan.step
    tool_sets = {"nodes", "ntasks", "ntasks-per-node", "gpus-per-node", "gpus-per-task",
                 "cpus-per-task", "mpi", "kill-on-bad-exit", "environment", "container-image",
                 "container-mounts", "container-workdir", "container-env", "export", "network",
                 "label", "unbuffered", "cpu-bind", "gres", "no-kill", "overlap"}  # fmt: skip
    for option, _value in step.options:
        assert option in guard.PROFILE_OPTIONS or option in tool_sets, (option, plan.step)
    assert step.program[-3:] == ["train.py", "--lr", "0.1"], step.program
    assert plan.script is not None
    for line in plan.script.splitlines():
        if line.startswith("#SBATCH "):
            shifter = slurm_getopt.SHIFTER if site.runtime.kind == "shifter" else []
            read = slurm_getopt.read("sbatch", line[len("#SBATCH ") :].split(), shifter)
            assert not read.error and read.program == [], line
            for option, _value in read.options:
                assert option in guard.PROFILE_OPTIONS or option in guard.TOOL_OPTIONS or option in (
                    "ntasks-per-node", "gres", "export", "signal", "open-mode", "output", "error",
                    "image", "module"
                ), line  # fmt: skip


# --- one rule for binds, in validate and in a launch --------------------------------------


@pytest.mark.parametrize("bind", ["$SCRATCH:/scratch", "~/data:/data", "${SCRATCH}/ds:/ds:ro"])
def test_a_bind_validate_accepts_is_one_every_launch_takes(
    tmp_path: Path, bind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCRATCH", "/scratch/u")
    monkeypatch.setenv("HOME", "/home/u")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(_profile("apptainer", "binds", [bind])))
    assert _cli("sites", "validate", str(path))[0] == 0
    given = LaunchOptions(site=str(path), image="x.sif", nodes="2", controller="torch")
    site, request = request_from_options("train.py", [], given)
    step = plan_launch(site, request).step
    expanded = bind.replace("${SCRATCH}", "/scratch/u").replace("$SCRATCH", "/scratch/u")
    assert expanded.replace("~", "/home/u") in " ".join(step), step
    monkeypatch.delenv("SCRATCH")
    if "SCRATCH" in bind:
        code, err = _cli(
            "run", "--site", str(path), "--image", "x.sif", "-N", "2", "--dry-run", "t.py"
        )
        assert code == 2 and "$SCRATCH is not set in your environment" in err, err


# --- 5. the tool's folders: the user's own, 0700, never through a link ----------------------

# every mode of a folder that lets its group or others write (with and without the sticky bit)
_SHARED_MODES = [m for m in range(0o700, 0o1000) if m & 0o022]
SHARED_PLACES: list[tuple[str, int]] = [
    *((".hvd-container", m) for m in _SHARED_MODES),
    *((".hvd-container/stacks", m) for m in _SHARED_MODES[::2]),
    *((".hvd-container", m | 0o1000) for m in _SHARED_MODES[::4]),
]


@pytest.mark.parametrize(
    ("place", "mode"), SHARED_PLACES, ids=lambda v: oct(v) if isinstance(v, int) else v
)
def test_a_tool_folder_others_can_write_is_refused_with_the_fix(
    tmp_path: Path, place: str, mode: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hvd_container.launcher.run import hang

    monkeypatch.chdir(tmp_path)
    folder = tmp_path / place
    folder.mkdir(parents=True, mode=0o700)
    folder.chmod(mode)
    with pytest.raises(UserError, match=r"is writable by others .*remove it \(rm -r "):
        hang.write_watcher()
    assert not (tmp_path / ".hvd-container" / "stacks" / "sitecustomize.py").exists()


def test_the_stacks_folder_and_the_ask_file_are_never_followed_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hvd_container.launcher.run import hang

    monkeypatch.chdir(tmp_path)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (tmp_path / ".hvd-container").mkdir(mode=0o700)
    (tmp_path / ".hvd-container" / "stacks").symlink_to(theirs)
    with pytest.raises(UserError, match="symbolic link"):
        hang.write_watcher()
    with pytest.raises(UserError, match="symbolic link"):
        hang.ask_for_stacks(tmp_path / ".hvd-container" / "stacks", "7")
    assert list(theirs.iterdir()) == []
    (tmp_path / ".hvd-container" / "stacks").unlink()
    stacks = tmp_path / ".hvd-container" / "stacks"
    stacks.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("mine")
    (stacks / "ask-7").symlink_to(victim)
    with pytest.raises(UserError, match="cannot ask for the stacks"):
        hang.ask_for_stacks(stacks, "7")
    assert victim.read_text() == "mine"


def test_hang_after_acts_on_the_user_s_own_jobs_only(fake_slurm: FakeSlurm) -> None:
    from hvd_container.launcher import slurm
    from hvd_container.launcher.report import Reporter
    from hvd_container.launcher.run import hang

    someone = slurm.Job(job_id="9", name="t", state="RUNNING", exit_status=None, signal=None,
                        user="someone-else", workdir="/home/them")  # fmt: skip
    fake_slurm.records["9"] = someone
    with pytest.raises(UserError, match="belongs to someone-else: --hang-after asks only your own"):
        hang.follow_job("9", Reporter(), after=60, cancel=False)
    assert fake_slurm.asked == ["9"] and fake_slurm.cancelled == []  # asked once, not followed


# --- 6. no tracebacks: every bad value is one line naming its flag ---------------------------

_NOT_UTF8 = [
    "A=\udcff",
    "A=x\udcc3(",
    "A=\udce9t\udce9",
]  # bytes as argv gives them (surrogateescape)
_REORDERING = [
    "\u200e",
    "\u200f",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
]
# an image each site runs (a SIF where the runtime runs files, else a registry image)
_IMAGE = {"cscs-clariden": "u/i:t", "cscs-daint": "u/i:t", "perlmutter": "u/i:t"}
_ONE_LINE_FLAGS = ["--partition", "--account", "--qos", "--job-name", "--comment"]
ONE_LINE_ERRORS: list[tuple[str, list[str]]] = [
    *((site, ["-e", value]) for site in BUILT_IN if site != "local" for value in _NOT_UTF8),
    *(("np", [f"{flag}=de{mark}bug"]) for flag in _ONE_LINE_FLAGS for mark in _REORDERING),
]


@pytest.mark.parametrize(("site", "argv"), ONE_LINE_ERRORS, ids=ascii)
def test_a_bad_value_is_one_line_naming_its_flag(
    tmp_path: Path, site: str, argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "np.yaml").write_text("name: np\nruntime: {kind: apptainer}\n")
    where = "./np.yaml" if site == "np" else site
    extra = (
        ["--comment", "field=ai;appl=pytorch"]
        if site == "neuron" and "--comment" not in argv[0]
        else []
    )
    code, err = _cli("batch", "--site", where, "--image", _IMAGE.get(site, "x.sif"), "--account", "a1", "-N", "2",
                     *extra, *argv, "t.py")  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    flag = "--env" if argv[0] == "-e" else argv[0].split("=")[0]
    assert err.removeprefix("hvd-container: error: ").split(":")[0].find(flag.lstrip("-")) >= 0, err


@pytest.mark.parametrize("busbw", ["1.2.3", ".", "..", "1..2", "1.2.", "..5", "0.0.0.0"])
def test_a_smoke_line_of_a_malformed_figure_is_not_read_as_one(busbw: str) -> None:
    from hvd_container.launcher.run.doctor import parse_smoke

    text = f"SMOKE rank 0 op sum allreduce ok busbw {busbw} MB/s\n"
    assert parse_smoke(text) == ([], {})  # the op is missing: judged as a rank that said nothing


def test_each_kind_of_traceback_has_fifty_cases() -> None:
    assert len(ONE_LINE_ERRORS) >= 50


@pytest.mark.parametrize("job", ["../escape", "..", ".", "a/b", "x\n", ""])
def test_a_job_id_that_is_not_a_plain_name_names_no_file(job: str) -> None:
    from hvd_container.launcher.run.commands import exclude_file_name

    assert exclude_file_name(job) == "hvd-screen-job.exclude"
    assert exclude_file_name("4242") == "hvd-screen-4242.exclude"


# --- round one's hostile profiles that still load, read back as Slurm reads them ----------

_CORPUS_A = yaml.safe_load(
    (Path(__file__).with_name("hostile") / "a_site_profiles.yaml").read_text()
)
LOADING = [c for c in _CORPUS_A["cases"] if c["refused"] is None]


@pytest.mark.parametrize("case", LOADING, ids=lambda c: f"{c['at']}={c['value']}")
def test_a_hostile_profile_that_loads_writes_lines_srun_reads_as_meant(
    tmp_path: Path, case: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.unit.test_trust_boundaries import _profile as corpus_profile

    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(corpus_profile(case)))
    image = "u/i:t" if case.get("runtime") in ("shifter", "podman-hpc") else "x.sif"
    given = LaunchOptions(site=str(path), image=image, nodes="2", controller="mpi")
    site, request = request_from_options("train.py", ["a b"], given)
    plan = plan_launch(site, request)
    step = slurm_getopt.read("srun", plan.step[plan.step.index("srun") + 1 :])
    assert not step.error and step.program[-2:] == ["train.py", "a b"], plan.step
    assert step.program[0] == site.runtime.kind or site.runtime.kind == "none", step.program
    for option, _value in step.options:
        assert option in guard.PROFILE_OPTIONS or option in (
            "ntasks",
            "nodes",
            "mpi",
            "ntasks-per-node",
        ), option


# --- 7. --stage rewrites the runtime's image word only, never the script's arguments ----------

_ARG_FORMS = ["{}", "--compare={}", "k={}", "--a=b={}", "={}", "--image={}", "x=y={}"]
REWRITES: list[tuple[str, bool, str, bool]] = [
    (kind, absolute, form, after_others)
    for kind in ("apptainer", "singularity")
    for absolute in (False, True)
    for form in _ARG_FORMS
    for after_others in (False, True)
]


@pytest.mark.parametrize(("kind", "absolute", "form", "after_others"), REWRITES)
def test_a_staged_launch_hands_the_script_its_arguments_as_given(
    tmp_path: Path, kind: str, absolute: bool, form: str, after_others: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The planned step runs for real under sh, with stand-ins for srun (its options left out:
    `sh` runs, anything else prints its words) and sbcast (a copy)."""
    import os
    import subprocess

    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.sif").write_text("IMAGE")
    local = tmp_path / "local"
    local.mkdir()
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(_profile(kind, "images.stage_dir", str(local))))
    image = str(tmp_path / "x.sif") if absolute else "./x.sif"
    args = [*(["--lr", "0.1"] if after_others else []), form.format(image), "--epochs=3"]
    given = LaunchOptions(site=str(path), image=image, nodes="2", controller="mpi", stage=True)
    site, request = request_from_options("train.py", args, given)
    step = plan_launch(site, request).step
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbcast").write_text('#!/bin/sh\n[ "$1" = --force ] && shift\ncp "$1" "$2"\n')
    (bin_dir / "srun").write_text(
        '#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do shift; done\n'
        '[ "$1" = sh ] && exec "$@"\nprintf "%s\\0" "$@"\n'
    )
    for tool in ("sbcast", "srun"):
        (bin_dir / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "42"}
    done = subprocess.run(step, capture_output=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    words = done.stdout.decode().split("\0")[:-1]
    (copy,) = local.glob("hvd-stage-42-*/x.sif")
    assert words[-len(args) :] == args, words  # the script's own, as given
    assert str(copy) in words[: -len(args)], words  # the runtime runs the copy


@pytest.mark.parametrize("name", BUILT_IN)
def test_a_built_in_profile_sets_nothing_outside_the_allow_list(name: str) -> None:
    """So that a profile of the user's that extends it loads without being trusted."""
    files, found = site_loader.outside_allow_list(site_loader.BUILTIN_DIR / f"{name}.yaml")
    assert (files, found) == ([], [])
