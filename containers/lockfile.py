"""The lock file: NAME.lock next to a recipe, what it may say, and reading it.

containers/lock.py writes it (uv resolves, this module's header goes on top); a build installs
it with `pip install --require-hashes --no-deps -r`. pip's requirements format can say far
more than a lock needs, and a lock may come from someone else, so a lock is read only when
every line is one of these (and it is refused with the line number otherwise):

    # any comment                          (the header, and uv's `# via` notes, indented)
    NAME==VERSION \\                        an entry: a project name, a plain version, and a
                                           backslash: its hashes follow
        --hash=sha256:<64 hex digits> \\    more hashes of the same entry follow
        --hash=sha256:<64 hex digits>       the entry's last hash
                                           (blank lines)

Nothing else: no options (-r, -e, -c, --index-url, --trusted-host, --config-settings), no
direct URLs (`name @ https://...`), no extras or environment markers, no `${VAR}`, no control
characters, no entry without a hash, no backslash that continues into nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from hvd_container.containers.base_pin import BasePin, read_pin
from packaging.utils import canonicalize_name

from hvd_container.core.errors import UserError
from hvd_container.core.files import read_limited_text

MAX_LOCK_BYTES = 1 << 20
ROOT = "-r -"  # uv's `# via` name for the recipe's own requirements (read from stdin)

# glibc of the base images' distributions: the manylinux level of the wheels they can run
_GLIBC = {
    "bookworm": "2_36", "bullseye": "2_31", "trixie": "2_41",
    "ubuntu24.04": "2_39", "ubuntu22.04": "2_35", "ubuntu20.04": "2_31",
}  # fmt: skip
_MACHINE = {"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "powerpc64le"}
# uv (0.13) names manylinux platforms up to 2_40 and refuses a newer one (trixie's 2_41); a
# wheel for glibc 2.40 runs on any newer glibc, and none is tagged newer yet
UV_NEWEST_GLIBC = 40

# the grammar above, one expression a kind of line
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_VERSION = r"[0-9][0-9A-Za-z.+!_-]*"
ENTRY = re.compile(rf"^({_NAME})==({_VERSION})(?: \\)?$")
_HASH = re.compile(r"^ +--hash=sha256:[0-9a-f]{64}( \\)?$")
_COMMENT = re.compile(r"^ *#[^\x00-\x08\x0a-\x1f\x7f]*$")
_VIA = re.compile(r"#\s*via\s+(.*)$")


@dataclass(frozen=True)
class Package:
    name: str  # canonical
    version: str
    via: tuple[str, ...]  # canonical names of what pulls it in; ROOT for the recipe itself


def grammar_problem(text: str) -> str | None:
    """The first line of `text` that is not the lock grammar (see above), with its number."""
    expecting_hash = False  # the line before ended in a backslash
    previous_entry = False  # an entry whose hashes have not yet ended
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # the newline ends the last line; it does not start another
    for number, line in enumerate(lines, 1):
        where = f"line {number}"
        if "\x00" in line or "\r" in line:
            return f"{where}: a control character (allowed: entries, their hashes, comments)"
        if _HASH.match(line):
            if not expecting_hash:
                return f"{where}: a hash that follows no entry"
            expecting_hash = line.endswith("\\")
            previous_entry = False
            continue
        if expecting_hash:
            return f"{where}: the line before ends in a backslash, but this is not its hash"
        if not line.strip() or _COMMENT.match(line):
            if previous_entry:
                return f"{where}: an entry without its --hash line"
            continue
        entry = ENTRY.match(line)
        if entry is None:
            return (
                f"{where}: not a locked package, hash or comment: {line.strip()[:60]!r} "
                "(allowed: NAME==VERSION \\ followed by --hash=sha256:... lines; pip options, "
                "URLs, extras, markers and variables are not)"
            )
        if not line.endswith("\\"):
            return f"{where}: an entry without its --hash line"
        expecting_hash, previous_entry = True, True
    if expecting_hash:
        return "the last line ends in a backslash that continues into nothing"
    return None


def parse_lock(text: str) -> dict[str, Package]:
    """name -> Package of a lock (uv's `# via a, b` notes after an entry)."""
    packages: dict[str, Package] = {}
    current: tuple[str, str] | None = None
    for line in text.splitlines():
        entry = ENTRY.match(line)
        if entry:
            current = (str(canonicalize_name(entry[1])), entry[2])
            packages[current[0]] = Package(current[0], current[1], ())
            continue
        via = _VIA.search(line)
        if via and current is not None:
            names = tuple(
                v if v == ROOT else str(canonicalize_name(v))
                for v in (part.strip() for part in via[1].split(","))
                if v
            )
            packages[current[0]] = Package(current[0], current[1], names)
    return packages


def without(text: str, name: str) -> tuple[str, str]:
    """(the lock without package name's entry, that entry alone with its hashes)."""
    kept: list[str] = []
    taken: list[str] = []
    target = kept
    for line in text.splitlines(keepends=True):
        entry = ENTRY.match(line.rstrip("\n"))
        if entry:
            target = taken if canonicalize_name(entry[1]) == canonicalize_name(name) else kept
        target.append(line)
    return "".join(kept), "".join(taken)


def entries(text: str) -> dict[str, str]:
    """name -> that entry's lines (NAME==VERSION and its hashes), without the comments."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        entry = ENTRY.match(line)
        if entry:
            current = found.setdefault(str(canonicalize_name(entry[1])), [])
        elif not (_HASH.match(line) and current is not None):
            current = None  # a comment or a blank line ends the entry's hashes
            continue
        current.append(line + "\n")
    return {name: "".join(lines) for name, lines in found.items()}


def closure(text: str, roots: list[str]) -> str:
    """The entries of `roots` and of everything they pull in (uv's `# via` notes, followed
    down), in the lock's order, with their hashes and without comments: the same text for two
    locks that pin the same closure, whatever else either holds or its header says."""
    packages = parse_lock(text)
    wanted = {str(canonicalize_name(r)) for r in roots} & packages.keys()
    grew = True
    while grew:
        more = {name for name, pkg in packages.items() if wanted.intersection(pkg.via)} - wanted
        wanted |= more
        grew = bool(more)
    return "".join(lines for name, lines in entries(text).items() if name in wanted)


def inputs_digest(requirements: list[str], python_version: str, platform: str) -> str:
    """What was asked for, for which target: the indexes (this machine's pip configuration)
    say only where the files come from, and the lock holds every file's hash."""
    asked = {"requirements": requirements, "python_version": python_version, "platform": platform}
    blob = json.dumps(asked, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def lock_digest(text: str) -> str | None:
    """The inputs digest a lock file was made from (its header), or None."""
    match = re.search(r"inputs sha256:([0-9a-f]{64})", text)
    return match[1] if match else None


def platform_of(base: str, arch: str) -> str:
    """uv's --python-platform for an image of `base` (a Docker reference or a debootstrap
    suite): MACHINE-manylinux_GLIBC of the base's distribution."""
    glibc = next((v for k, v in _GLIBC.items() if k in base), "2_28")
    minor = min(int(glibc.split("_")[1]), UV_NEWEST_GLIBC)
    return f"{_MACHINE[arch]}-manylinux_2_{minor}"


def header(
    name: str, version: str, ref: str, python: str, platform: str, digest: str, base: BasePin | None
) -> str:
    return (
        f"# hvd-container lock of recipe {name} {version}: refresh with `hvd-container lock {ref}`\n"
        f"# python {python}, {platform}; inputs sha256:{digest}\n" + (base.line() if base else "")
    )


def read_lock(path: Path, wanted_digest: str, base_image: str, ref: str) -> str | None:
    """The lock at `path` (None if there is none). A lock made for other inputs, or for another
    base, is refused with the command that refreshes it (the build would install packages the
    recipe no longer asks for); a lock that says more than a lock may is refused with the line."""
    if not path.exists():
        return None
    text = read_limited_text(path, "a lock file", MAX_LOCK_BYTES, "a lock")
    if lock_digest(text) != wanted_digest:
        raise UserError(
            f"{path}: stale: the recipe asks for other packages or another target than it was "
            f"locked for; refresh it with `hvd-container lock {ref}`"
        )
    pin = read_pin(text)
    if pin is not None and pin.image != base_image:
        raise UserError(
            f"{path}: stale: it pins the base {pin.image}, the recipe's base.image is "
            f"{base_image}; refresh it with `hvd-container lock {ref}`"
        )
    problem = grammar_problem(text)
    if problem:
        raise UserError(f"{path}: {problem}")
    return text
