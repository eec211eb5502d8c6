"""The /.singularity.d/ tree Apptainer expects inside a SIF's root filesystem.

Generated from the Docker image config: the runscript follows OCI semantics (arguments replace
CMD, ENTRYPOINT stays; neither set and no arguments: a shell), the env script exports the
image's ENV, labels.json holds the image labels (including the build facts).
"""

from __future__ import annotations

import json
import shlex
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hvd_container.containers.sif.tarstream import normalize, tar_entries

SINGULARITY_DIR = ".singularity.d"
# Root-level links Apptainer's own build creates; an image's copies are replaced.
ROOT_LINKS = {
    "singularity": ".singularity.d/runscript",
    "environment": ".singularity.d/env/90-environment.sh",
    ".exec": ".singularity.d/actions/exec",
    ".run": ".singularity.d/actions/run",
    ".shell": ".singularity.d/actions/shell",
    ".test": ".singularity.d/actions/test",
}

_SOURCE_ENV = """for script in /.singularity.d/env/*.sh; do
    if [ -f "$script" ]; then
        . "$script"
    fi
done
"""

ACTIONS = {
    "exec": _SOURCE_ENV + 'exec "$@"\n',
    "run": _SOURCE_ENV
    + 'if [ -x /.singularity.d/runscript ]; then\n    exec /.singularity.d/runscript "$@"\nfi\n'
    + 'echo "There is no runscript in this container" >&2\nexit 1\n',
    "shell": _SOURCE_ENV + 'exec /bin/sh "$@"\n',
    "start": _SOURCE_ENV
    + 'if [ -x /.singularity.d/startscript ]; then\n    exec /.singularity.d/startscript "$@"\nfi\n',
    "test": _SOURCE_ENV
    + 'if [ -x /.singularity.d/test ]; then\n    exec /.singularity.d/test "$@"\nfi\n'
    + 'echo "There is no test script in this container" >&2\n',
}

ENV_BASE = {
    "01-base.sh": "#!/bin/sh\n#\n",
    "90-environment.sh": "#!/bin/sh\n# Custom environment shell code should follow\n",
    "95-apps.sh": "#!/bin/sh\n# No SCIF apps in images converted by hvd-container\n",
    "99-base.sh": (
        "#!/bin/sh\n"
        'if [ -z "$LD_LIBRARY_PATH" ]; then\n'
        '    LD_LIBRARY_PATH="/.singularity.d/libs"\n'
        "else\n"
        '    LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/.singularity.d/libs"\n'
        "fi\n"
        'PS1="Apptainer> "\n'
        "export LD_LIBRARY_PATH PS1\n"
    ),
}


@dataclass(frozen=True)
class ImageConfig:
    """The parts of a Docker image config that matter inside a SIF."""

    env: tuple[str, ...] = ()
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    working_dir: str = ""
    user: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_docker(cls, config: Mapping[str, Any] | None) -> ImageConfig:
        config = config or {}
        return cls(
            env=tuple(config.get("Env") or ()),
            entrypoint=tuple(config.get("Entrypoint") or ()),
            cmd=tuple(config.get("Cmd") or ()),
            working_dir=config.get("WorkingDir") or "",
            user=config.get("User") or "",
            labels=dict(config.get("Labels") or {}),
        )

    def oci_config(self) -> dict[str, Any]:
        """The OCI image-spec `config` object (what Apptainer stores as oci-config.json)."""
        out: dict[str, Any] = {}
        if self.user:
            out["User"] = self.user
        if self.env:
            out["Env"] = list(self.env)
        if self.entrypoint:
            out["Entrypoint"] = list(self.entrypoint)
        if self.cmd:
            out["Cmd"] = list(self.cmd)
        if self.working_dir:
            out["WorkingDir"] = self.working_dir
        if self.labels:
            out["Labels"] = dict(sorted(self.labels.items()))
        return out


def render_runscript(entrypoint: Sequence[str], cmd: Sequence[str]) -> str:
    """A POSIX sh runscript with Docker's rules: args replace CMD, ENTRYPOINT is kept."""
    lines = [
        "#!/bin/sh",
        "# From the image's ENTRYPOINT/CMD: arguments replace CMD, ENTRYPOINT is kept.",
    ]
    default = list(cmd) if cmd else ([] if entrypoint else ["/bin/sh"])
    if default:
        lines += ["if [ $# -eq 0 ]; then", f"    set -- {shlex.join(default)}", "fi"]
    if entrypoint:
        lines.append(f'set -- {shlex.join(list(entrypoint))} "$@"')
    lines.append('exec "$@"')
    return "\n".join(lines) + "\n"


def render_env_script(env: Sequence[str]) -> str:
    """Export the image's ENV (values are literal: Docker expanded them at build time)."""
    lines = ["#!/bin/sh", "# The image's ENV, as Docker would set it."]
    for item in env:
        key, sep, value = item.partition("=")
        if not sep or not key.replace("_", "a").isalnum():
            continue
        lines.append(f"export {key}={shlex.quote(value)}")
    return "\n".join(lines) + "\n"


def render_labels(labels: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(labels.items())), indent=4) + "\n"


def is_replaced(name: str) -> bool:
    """True for image entries that the generated metadata replaces."""
    name = normalize(name)
    return name == SINGULARITY_DIR or name.startswith(SINGULARITY_DIR + "/") or name in ROOT_LINKS


def singularity_files(config: ImageConfig, labels: Mapping[str, str]) -> dict[str, str]:
    """Path (relative to /) -> content of every generated file."""
    files = {
        f"{SINGULARITY_DIR}/runscript": render_runscript(config.entrypoint, config.cmd),
        f"{SINGULARITY_DIR}/startscript": "#!/bin/sh\n",
        f"{SINGULARITY_DIR}/labels.json": render_labels(labels),
        f"{SINGULARITY_DIR}/env/10-docker2singularity.sh": render_env_script(config.env),
    }
    files.update({f"{SINGULARITY_DIR}/env/{name}": text for name, text in ENV_BASE.items()})
    files.update(
        {
            f"{SINGULARITY_DIR}/actions/{name}": "#!/bin/sh\n" + text
            for name, text in ACTIONS.items()
        }
    )
    return dict(sorted(files.items()))


def singularity_tar(config: ImageConfig, labels: Mapping[str, str], mtime: int) -> bytes:
    """Raw tar entries (no end marker) for /.singularity.d/ and the root-level links."""
    members: list[tuple[tarfile.TarInfo, bytes]] = []

    def entry(name: str, kind: bytes, mode: int, linkname: str = "") -> tarfile.TarInfo:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.mode = mode
        info.mtime = mtime
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.linkname = linkname
        return info

    for directory in ("", "/actions", "/env", "/libs"):
        members.append((entry(SINGULARITY_DIR + directory, tarfile.DIRTYPE, 0o755), b""))
    for path, text in singularity_files(config, labels).items():
        executable = not path.endswith(".json")
        members.append(
            (entry(path, tarfile.REGTYPE, 0o755 if executable else 0o644), text.encode())
        )
    for link, target in sorted(ROOT_LINKS.items()):
        members.append((entry(link, tarfile.SYMTYPE, 0o777, target), b""))
    return tar_entries(members)
