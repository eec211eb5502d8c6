"""Hostile site profiles and launch arguments through `run --dry-run` and `batch`: exit 0 or 2
in one line, no traceback; a batch script keeps its shape (one option per #SBATCH line, then
module/export lines and one srun line, all valid bash); the script's own arguments reach it
unchanged."""

from __future__ import annotations

import contextlib
import io
import shlex
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from _shell import bash_words, sbatch_words
from hvd_container.launcher.plan.planner import SCRIPT_END
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hvd_container.cli.app import main

FRAGMENTS = [
    "\n", "\r", "\u2028", "\x1b[2J", "\t", " ", "'", '"', "$(id)", "`id`", ";", "&&", "|", "#",
    "%", "\\", "-", "--", "--mpi=none", "=", ":", ",", "/", "~", "$HOME", "*", "{name}",
    "{0.__class__}", "x", "8", "a b", "#SBATCH --uid=0",
]  # fmt: skip
hostile = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), min_size=1, max_size=5
).map("".join)

PROFILE_FIELDS: list[tuple[str | int, ...]] = [
    ("description",), ("login_host",), ("jupyter_interface",), ("mpi",), ("modules", 0),
    ("env", "NAME"), ("binds", 0), ("scheduler", "partition"), ("scheduler", "account"),
    ("scheduler", "qos"), ("scheduler", "constraint"), ("scheduler", "time"),
    ("scheduler", "srun_options", 0), ("scheduler", "sbatch_options", 0), ("runtime", "python"),
    ("runtime", "flags", 0), ("runtime", "modules", 0), ("images", "template"),
    ("images", "registry"), ("images", "dir"),
]  # fmt: skip


BOUND = 10.0  # seconds a single command may take, however hostile its input (no hangs)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    assert time.monotonic() - started < BOUND, argv
    return code, out.getvalue(), err.getvalue()


def _profile(path: tuple[str | int, ...], value: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "fuzz",
        "runtime": {"kind": "shifter", "flags": [], "modules": ["gpu"], "python": "python"},
        "scheduler": {"gpus_per_node": 4, "gpu_request": "gpus-per-node", "srun_options": [], "sbatch_options": []},
        "modules": [], "env": {}, "binds": [], "images": {},
    }  # fmt: skip
    *parents, last = path
    node: Any = data
    for part in parents:
        node = node[part]
    if isinstance(node, list):
        node.append(value)
    else:
        node[last] = value
    return data


def _check_batch_shape(text: str, script_args: list[str] | None = None) -> None:
    """One option per #SBATCH line; run by bash with stand-ins for srun and module on PATH (and
    nothing else), the script runs srun once, module at most once and no other command."""
    lines = text.split("\n")
    assert lines[0] == "#!/bin/bash" and lines[-1] == ""
    for line in lines:
        if line.startswith("#SBATCH"):
            assert len(sbatch_words(line[len("#SBATCH") :])) == 1, line  # one option
    # nothing a terminal acts on is left raw (newline and tab inside quotes are the shell's)
    assert not any(ord(c) < 32 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F for c in text), text
    with tempfile.TemporaryDirectory() as tmp:
        bindir, calls_dir = Path(tmp) / "bin", Path(tmp) / "calls"
        bindir.mkdir()
        calls_dir.mkdir()
        for tool in ("srun", "module"):  # each call: a file of NUL-ended arguments
            stub = bindir / tool
            target = shlex.quote(str(calls_dir / tool))
            stub.write_text(
                f'#!/bin/sh\nfor a in "$@"; do printf \'%s\\0\' "$a"; done > {target}.$$\n'
            )
            stub.chmod(0o755)
        done = subprocess.run(
            ["/bin/bash", "-c", text], env={"PATH": str(bindir)}, capture_output=True, text=True
        )
        assert "command not found" not in done.stderr and done.returncode == 0, done.stderr
        calls = {p.name: p.read_bytes().decode().split("\0")[:-1] for p in calls_dir.iterdir()}
    srun = [args for name, args in calls.items() if name.startswith("srun.")]
    modules = [args for name, args in calls.items() if name.startswith("module.")]
    assert len(srun) == 1 and len(modules) <= 1, calls
    if script_args is not None:
        argv = srun[0]
        assert argv[len(argv) - len(script_args) :] == script_args, argv


def _submitted_script(out: str) -> str:
    """The script a dry run outside an allocation shows on sbatch's standard input."""
    first, _, rest = out.partition("\n")
    words = bash_words(first.removesuffix(f" <<'{SCRIPT_END}'"))
    assert words[:2] == ["sbatch", "--parsable"] and first.endswith(f"<<'{SCRIPT_END}'"), first
    body, end = rest.rsplit(f"{SCRIPT_END}", 1)
    assert end == "\n", out
    return body


def _one_line_error(code: int, err: str) -> None:
    assert code in (0, 2), err
    if code == 2:
        errors = [line for line in err.splitlines() if line.startswith("hvd-container: error: ")]
        assert len(errors) == 1 and "Traceback" not in err, err


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(range(len(PROFILE_FIELDS))), value=hostile)
def test_a_hostile_site_profile_is_refused_or_gives_a_well_formed_launch(
    field: int, value: str
) -> None:
    path = PROFILE_FIELDS[field]
    with tempfile.TemporaryDirectory() as tmp:
        profile = Path(tmp) / "fuzz.yaml"
        profile.write_text(yaml.safe_dump(_profile(path, value)))
        common = ["--site", str(profile), "--image", "u/i:t", "-n", "8", "t.py", "--lr", "a b"]
        code, out, err = _cli("run", "--dry-run", *common)
        _one_line_error(code, err)
        if code == 0:
            _check_batch_shape(_submitted_script(out), ["t.py", "--lr", "a b"])
        code, out, err = _cli("batch", *common)
        _one_line_error(code, err)
        if code == 0:
            _check_batch_shape(out, ["t.py", "--lr", "a b"])


LAUNCH_OPTIONS = [
    "-n", "-N", "--ntasks-per-node", "-c", "--partition", "--account", "--comment", "--qos",
    "--constraint", "-t", "-J", "--mpi", "--controller", "--module", "-e", "-B", "--image",
    "--workdir", "--runtime", "--spare-nodes", "--max-restarts", "--grace", "--screen-policy",
]  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    options=st.lists(st.tuples(st.sampled_from(LAUNCH_OPTIONS), hostile), max_size=4),
    script_args=st.lists(hostile, max_size=3),
)
# found by this test: each was a traceback, or a line that was not the line run
@example(options=[("--image", "~ ")], script_args=[])  # Path.expanduser raised RuntimeError
@example(options=[], script_args=["\x00"])  # execve cannot pass a NUL
@example(options=[], script_args=["\x1b[2J"])  # click's echo stripped it from the line shown
@example(options=[("--partition", "\x08")], script_args=[])  # raw in a #SBATCH line
@example(options=[], script_args=["\n#SBATCH --uid=0"])  # a line of the script of its own
@example(options=[], script_args=["--", "--dry-run", "--"])  # the first `--` alone is dropped
def test_hostile_launch_arguments_are_refused_or_reach_the_script_unchanged(
    options: list[tuple[str, str]], script_args: list[str]
) -> None:
    argv = ["--site", "perlmutter", "--image", "u/i:t", "--account", "m1_g"]
    for flag, value in options:
        argv += [f"{flag}={value}"] if flag.startswith("--") else [flag, value]
    code, out, err = _cli("run", "--dry-run", *argv, "t.py", *script_args)
    _one_line_error(code, err)
    if code == 0:
        assert not any(ord(c) < 32 and c not in "\n\t" for c in out), out
        shown = _submitted_script(out)
        # a `--` among them says that the rest is the script's, and is dropped
        cut = script_args.index("--") if "--" in script_args else len(script_args)
        _check_batch_shape(shown, ["t.py", *script_args[:cut], *script_args[cut + 1 :]])
        code, out, err = _cli("batch", *argv, "t.py", *script_args)
        _one_line_error(code, err)
        if code == 0:
            assert out == shown  # the script `batch` writes is the one `run` submits


def test_the_shape_check_sees_an_injected_line() -> None:
    bad = "#!/bin/bash\n#SBATCH --job-name=x\nid\nsrun true\n"  # an injected `id`
    try:
        _check_batch_shape(bad)
    except AssertionError:
        return
    raise AssertionError("an injected command passed the shape check")
