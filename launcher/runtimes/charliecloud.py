"""Charliecloud: `ch-run [-b SRC:DST] [-c DIR] IMAGE -- CMD`, and its image cache.

ch-run runs a directory (or a plain SquashFS file), not a SIF. A SIF's root filesystem is a
SquashFS partition at an offset, so it is unpacked once with `unsquashfs -o OFFSET` into a
cache directory keyed by the SIF's digest (its id, root-filesystem offset and size); later
runs reuse it. ch-run cannot create bind destinations in a read-only image, so the directories
the launch binds (the working directory) are created in the cached copy beforehand.

ch-run passes the host environment in unchanged (PATH included): the program names the
image's python by path, and the image's own environment (containers/sif/environment.py reads
it) becomes a KEY=VALUE file for `ch-run --set-env` (empty when the image declares none, so
that the launch line does not depend on what is inside the image); --env-no-expand, because
every value is worked out there. It needs $USER, and mounts nothing on its own: the working
directory is bound in. It has no GPU option (`ch-fromhost --nvidia` injects the driver).

A dry run names the directory and env file a launch will use without touching anything (the
SIF header is enough); a launch or a batch script makes them exist. Each unpack records the
SIF it came from (KEY.source): converting again overwrites that SIF, its old copy can never be
used again, and `cache prune --stale` removes exactly those. The cache directory comes from a
profile or the environment and may hold other things: every name the tool makes there is
recorded first (RECORDS), and prune removes nothing else, never following a link.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from hvd_container.containers.sif.environment import image_env
from hvd_container.containers.sif.format import has_sif_magic
from hvd_container.containers.sif.reader import read_sif
from hvd_container.launcher.guard import Flag
from hvd_container.launcher.plan.binds import dest_of, split_binds
from hvd_container.launcher.plan.launch import Launch
from hvd_container.launcher.runtimes import (
    TOOL_FOLDER,
    Invocation,
    Prepared,
    Runtime,
    RuntimeProfile,
    Wrapped,
    bind_working_directory,
    tool_folder,
    working_directory,
)
from hvd_container.launcher.slurm import current_user

from hvd_container.core.atomic import write_text
from hvd_container.core.errors import StepFailed, UserError, source_checkout_hint
from hvd_container.core.files import not_a_file, read_limited_text, user_path


class CharliecloudProfile(RuntimeProfile):
    # ch-run(1) of Charliecloud 0.38: binds, the private /tmp, the fake writes, joining
    known_flags = {
        "--bind": Flag("bind", "-b"), "--home": Flag("none"), "--no-passwd": Flag("none"),
        "--private-tmp": Flag("none", "-t"), "--write-fake": Flag("none", "-W"),
        "--quiet": Flag("none", "-q"), "--verbose": Flag("none", "-v"),
        "--join": Flag("none", "-j"), "--join-ct": Flag("value"), "--join-tag": Flag("value"),
        "--env-no-expand": Flag("none"),
    }  # fmt: skip
    kind: Literal["charliecloud"]


class Charliecloud(Runtime):
    kinds = ("charliecloud",)
    programs = {"charliecloud": "ch-run"}
    probe_rank = 3

    @classmethod
    def probed_entry(cls, kind: str, gpu: bool) -> dict[str, Any]:
        # ch-run passes the host's PATH: the python of hvd-container's images, by its path
        return {"kind": kind, "gpu": gpu, "python": "/opt/venv/bin/python"}

    profile_model = CharliecloudProfile
    image_files = True

    def image_path(self, ref: str) -> str | None:
        return os.path.abspath(os.path.expanduser(ref))  # a directory or a file, always

    def unusable_image(self, ref: str) -> str | None:
        problem = super().unusable_image(ref)
        path = user_path(ref)
        if problem or not path.is_file():
            return problem  # a directory is an image, a missing one is said by missing_image
        try:
            _file_kind(path, ref)
        except UserError as exc:
            return str(exc)
        return None

    def needs_image_here(self, launch: Launch) -> bool:
        return True  # a SIF is unpacked here, even for a batch script

    def prepare(self, launch: Launch, *, dry_run: bool) -> Prepared:
        where = bind_working_directory(launch)
        env = {"USER": launch.request.env.get("USER") or current_user()}  # ch-run needs it
        image, flags, notes = launch.image, [], []
        folders: list[str] = []
        binds = [one for item in launch.request.binds for one in split_binds(item)]
        binds += where.binds
        if image and self.missing_image(image, "") is None and self.unusable_image(image) is None:
            cache = launch.site.images.cache_dir
            if dry_run:
                ready = planned(image, cache)
            else:
                mount_points = [dest_of(b) for b in binds]
                ready = prepare_image(image, mount_points=mount_points, site_dir=cache)
            if ready is not None:
                image, flags, notes = str(ready.root), ready.ch_run_flags(), list(ready.warnings)
            else:  # a SquashFS file, which ch-run mounts
                point = squashfs_mount_point(dry_run=dry_run or launch.mode == "batch")
                flags, folders = ["-m", point], [point]
        return Prepared(
            image, flags=flags, env=env, binds=where.binds, workdir=where.workdir,
            script=where.script, notes=[*where.notes, *notes], folders=folders,
        )  # fmt: skip

    def gpu_gap(self, launch: Launch) -> str | None:
        return "ch-run has no GPU option, so the container lacks the host's NVIDIA driver libraries; inject them with `ch-fromhost --nvidia IMAGE`, or pick --runtime apptainer"

    def wrap(self, inv: Invocation) -> Wrapped:
        argv = ["ch-run"]
        for bind in inv.binds:
            argv += ["-b", bind]
        if inv.workdir:
            argv += ["-c", inv.workdir]
        argv += [*self.profile.flags, *inv.flags]
        argv += [inv.image or "", "--"]
        return Wrapped([], argv + inv.program)


MOUNT_FOLDER = "ch-mnt"  # in the working directory's .hvd-container


def squashfs_mount_point(*, dry_run: bool) -> str:
    """Where ch-run mounts a SquashFS image: a folder made before the ranks start. Left to
    itself each ch-run makes /var/tmp/$USER.ch/mnt, and two starting at once on a node race
    (Charliecloud 0.31: `can't mkdir: /var/tmp/USER.ch/mnt: File exists`). Each ch-run mounts
    in its own mount namespace, so the ranks of every node share this one folder."""
    if dry_run:
        return str(Path(working_directory()) / TOOL_FOLDER / MOUNT_FOLDER)
    folder = tool_folder("ch-run's SquashFS mount point") / MOUNT_FOLDER
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    if folder.is_symlink() or not folder.is_dir():
        raise UserError(f"{folder}: ch-run's SquashFS mount point is not a folder of its own")
    return str(folder)


# ------------------------------------------------------------------------ the image cache


@dataclass(frozen=True)
class PreparedImage:
    """An image ready for ch-run: its root directory and environment file."""

    root: Path  # the directory ch-run runs
    env_file: Path  # KEY=VALUE lines for --set-env (empty if the image declares none)
    source: str  # what the user passed
    warnings: tuple[str, ...] = ()  # environment lines that were skipped

    def ch_run_flags(self) -> list[str]:
        # values are literal (Docker expanded them at build time): no $-expansion by ch-run
        return ["--env-no-expand", f"--set-env={self.env_file}"]


def cache_dir(site_dir: str | None = None) -> Path:
    """$HVD_CONTAINER_CACHE/images, else the site profile's images.cache_dir (`site_dir`,
    with ~ and $VARS expanded)/images, else $XDG_CACHE_HOME (~/.cache)/hvd-container/images."""
    explicit = os.environ.get("HVD_CONTAINER_CACHE")
    if explicit:
        return Path(explicit) / "images"
    if site_dir:
        return Path(os.path.expandvars(os.path.expanduser(site_dir))) / "images"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hvd-container" / "images"


# The names this tool made in the cache, an empty file each in this directory of it: prune
# removes only those (a cache_dir from a profile or $HVD_CONTAINER_CACHE may name a directory
# that holds other things), and only what is still a real directory or file there.
RECORDS = ".hvd-container-made"
# KEY (an unpacked image), KEY.env, KEY.source, KEY.part-PID-TOKEN (an unpack under way) and
# dir-KEY.env (an image directory's environment)
_OWN_NAME = re.compile(r"(dir-)?[0-9a-f]{24}(\.env|\.source|\.part-[0-9]+-[0-9a-f]{8})?")


def _record(base: Path, name: str) -> None:
    """Say that `name` in the cache is this tool's, before it is made (a process that dies
    between the two leaves a record of nothing, which prune drops)."""
    try:
        (base / RECORDS).mkdir(parents=True, exist_ok=True)
        fd = os.open(base / RECORDS / name, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        os.close(fd)
    except OSError as exc:
        raise _cache_problem(base, exc) from None


def _recorded(base: Path) -> set[str]:
    """The names the tool recorded as its own in the cache (none when the record directory is
    missing, or is a link: a record elsewhere says nothing about this directory)."""
    records = base / RECORDS
    try:
        if not stat.S_ISDIR(os.lstat(records).st_mode):
            return set()
        return {name for name in os.listdir(records) if _OWN_NAME.fullmatch(name)}
    except OSError:
        return set()


def _forget(base: Path, name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(base / RECORDS / name)


def _remove(path: Path) -> bool:
    """Remove a directory tree or a file the tool made; a link (even to a directory), or
    anything else put in its place, is left. rmtree never follows links inside the tree."""
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISDIR(mode):
            shutil.rmtree(path)  # raises, without removing anything, if swapped for a link
        elif stat.S_ISREG(mode):
            path.unlink()
        else:
            return False
    except FileNotFoundError:
        return False
    except OSError:
        return not os.path.lexists(path)
    return True


def sif_digest(path: Path) -> str:
    """A cache key that changes whenever the SIF's root filesystem does."""
    info = read_sif(path)
    if not info.rootfs_size:
        raise UserError(f"{path}: the SIF has no root filesystem partition")
    key = f"{info.uuid}:{info.rootfs_offset}:{info.rootfs_size}:{info.modified}"
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def _cache_problem(path: Path, exc: OSError) -> UserError:
    return UserError(
        f"image cache {path}: {exc.strerror or exc}: set $HVD_CONTAINER_CACHE to a writable "
        "directory (unpacked images go to $HVD_CONTAINER_CACHE/images)"
    )


def _unpack_sif(sif: Path, target: Path) -> None:
    """Unpack the SIF's root filesystem into target; another process doing the same is fine."""
    info = read_sif(sif)
    if shutil.which("unsquashfs") is None:
        raise UserError(
            "unsquashfs not found: install squashfs-tools (the package of that name; "
            f"{source_checkout_hint('sif-tools.sh up')})"
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cache_problem(target.parent, exc) from None
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise _cache_problem(target.parent, PermissionError(13, "Permission denied"))
    # Concurrent runs each unpack into their own directory; the first rename wins.
    partial = target.with_name(f"{target.name}.part-{os.getpid()}-{secrets.token_hex(4)}")
    _record(target.parent, partial.name)
    argv = ["unsquashfs", "-q", "-n", "-o", str(info.rootfs_offset), "-d", str(partial), str(sif)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            raise StepFailed(
                f"unsquashfs {sif}: {detail[-1] if detail else f'exit {proc.returncode}'}"
            )
        try:
            os.rename(partial, target)
        except OSError:
            if not target.is_dir():
                raise
            # another run finished first: its copy is the same image
    except OSError as exc:
        raise _cache_problem(target.parent, exc) from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
        _forget(target.parent, partial.name)


def _write_source(base: Path, key: str, sif: Path) -> None:
    """Record which SIF file the unpacked copy `key` came from (for `cache prune --stale`)."""
    where = str(sif.resolve())
    if "\n" in where:  # one path per file, read back as one line
        return
    with contextlib.suppress(OSError, UserError):  # only a hint: the copy is fine without it
        _record(base, f"{key}.source")
        write_text(base / f"{key}.source", where + "\n")


def _older_copies(base: Path, key: str, sif: Path) -> int:
    """How many other cached copies were unpacked from the same SIF path (the file gives `key`
    now, so nothing can use them again)."""
    where = str(sif.resolve())
    count = 0
    for record in base.glob("*.source"):
        other = record.name[: -len(".source")]
        if other == key or not (base / other).is_dir():
            continue
        count += _recorded_source(record) == where
    return count


def _recorded_source(record: Path) -> str | None:
    """The SIF path in a KEY.source file, or None when there is none to read."""
    try:  # a pipe or a huge file planted under its name is not read
        return read_limited_text(record, "a record file", 4096, "a path").rstrip("\n")
    except UserError:
        return None


def _write_env_file(target: Path, env: dict[str, str]) -> None:
    lines = "".join(f"{k}={v}\n" for k, v in env.items() if "\n" not in v)
    _record(target.parent, target.name)
    try:
        write_text(target, lines)
    except OSError as exc:
        raise _cache_problem(target.parent, exc) from None


# What ch-run binds into every container: it fails when the image lacks them.
CH_RUN_DIRS = ("dev", "proc", "sys", "tmp", "home")
CH_RUN_FILES = ("etc/passwd", "etc/group", "etc/hosts", "etc/resolv.conf")


def ensure_mount_points(root: Path, paths: list[str]) -> None:
    """Create bind destinations inside an image directory (ch-run cannot)."""
    for rel in CH_RUN_FILES:
        target = root / rel
        if not target.exists() and not target.is_symlink():
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.touch()
            except OSError as exc:
                raise UserError(
                    f"{root}: ch-run needs /{rel} in the image and it cannot be created ({exc.strerror})"
                ) from None
    for dest in [*CH_RUN_DIRS, *paths]:
        inside = root / dest.lstrip("/")
        if inside.is_dir():
            continue
        try:
            inside.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(
                f"{root}: cannot create the bind destination {dest} in the image ({exc.strerror}): "
                "create it in the image or bind to a directory that exists"
            ) from None


def _image_path(image: str) -> Path:
    path = user_path(image)
    if not path.exists():
        raise UserError(
            f"--image {image}: no such file or directory (build and convert it first: `hvd-container convert ... --to sif`)"
        )
    return path


SQUASHFS_MAGIC = b"hsqs"  # a SquashFS file's first bytes (little-endian superblock)


def _file_kind(path: Path, image: str) -> str:
    """ "sif" or "squashfs" for an image file ch-run can be given; anything else is refused."""
    try:
        if has_sif_magic(path):
            return "sif"
        with path.open("rb") as fh:
            if fh.read(4) == SQUASHFS_MAGIC:
                return "squashfs"
    except OSError as exc:
        raise UserError(f"--image {image}: cannot read it ({exc.strerror})") from None
    raise UserError(
        f"--image {image}: not a SIF file, a SquashFS file or an image directory (allowed: .sif, .sqfs, directories)"
    )


def planned(image: str, site_dir: str | None = None) -> PreparedImage | None:
    """The directory and env file `prepare_image(image)` will use, computed without side
    effects; None for a SquashFS file, which ch-run mounts as it is."""
    path = _image_path(image)
    base = cache_dir(site_dir)
    if path.is_dir():
        root = path.resolve()
        key = hashlib.sha256(str(root).encode()).hexdigest()[:24]
        return PreparedImage(root, base / f"dir-{key}.env", image)
    if _file_kind(path, image) == "squashfs":
        return None
    key = sif_digest(path)
    return PreparedImage(base / key, base / f"{key}.env", image)


def prepare_image(
    image: str, *, mount_points: list[str] | None = None, site_dir: str | None = None
) -> PreparedImage | None:
    """A directory ch-run can run for a SIF file or an image directory (unpacked if needed);
    None for a SquashFS file, which ch-run mounts as it is."""
    plan = planned(image, site_dir)
    if plan is None:
        return None
    warnings: list[str] = []
    if user_path(image).is_dir():
        # the directory may change between runs: its environment is read every time
        _write_env_file(plan.env_file, image_env(plan.root, warnings))
    else:
        if not plan.root.is_dir():
            _record(plan.root.parent, plan.root.name)
            _unpack_sif(user_path(image), plan.root)
            _write_source(plan.root.parent, plan.root.name, user_path(image))
            older = _older_copies(plan.root.parent, plan.root.name, user_path(image))
            if older:
                warnings.append(
                    f"{older} older unpacked {'copy' if older == 1 else 'copies'} of {image} "
                    f"(converted again since) {'is' if older == 1 else 'are'} still in "
                    f"{plan.root.parent}: "
                    "`hvd-container cache prune --stale` removes them"
                )
        if not plan.env_file.is_file():
            _write_env_file(plan.env_file, image_env(plan.root, warnings))
    ensure_mount_points(plan.root, mount_points or [])
    return replace(plan, warnings=tuple(warnings))


@dataclass(frozen=True)
class CacheEntry:
    """One unpacked image of the cache (its env file counts with it)."""

    key: str
    path: Path
    size: int  # bytes of the files (not following links)
    modified: float  # when it was published (mtime)
    partial: bool  # an unpack that never finished (its process died): prune removes it
    source: str | None = None  # the SIF it was unpacked from (None: not recorded)
    stale: bool = False  # that SIF is gone or is another image now: nothing can use the copy


def _source_of(base: Path, key: str) -> tuple[str | None, bool]:
    """The SIF an entry was unpacked from, and whether that file no longer gives this key."""
    source = _recorded_source(base / f"{key}.source")
    if source is None:
        return None, False
    try:
        return source, sif_digest(Path(source)) != key
    except (OSError, UserError):  # gone, unreadable or no longer a SIF
        return source, True


def _tree_size(path: Path) -> int:
    total = 0
    for root, dirs, files in os.walk(path):
        for name in [*files, *dirs]:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def entries(site_dir: str | None = None) -> list[CacheEntry]:
    """The cache's unpacked images that the tool recorded as its own, newest first."""
    base = cache_dir(site_dir)
    found = []
    for name in _recorded(base):
        entry = base / name
        try:
            info = os.lstat(entry)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or name.endswith((".env", ".source")):
            continue
        key, _, rest = name.partition(".part-")
        source, stale = (None, False) if rest else _source_of(base, key)
        found.append(
            CacheEntry(
                key,
                entry,
                _tree_size(entry),
                info.st_mtime,
                partial=bool(rest),
                source=source,
                stale=stale,
            )  # fmt: skip
        )
    return sorted(found, key=lambda e: e.modified, reverse=True)


def key_of(image: str) -> str:
    """The cache key of a SIF file (what `cache prune --keep` keeps)."""
    path = _image_path(image)
    problem = not_a_file(path, "a SIF file")
    if problem:
        raise UserError(f"--keep {image}: {problem}")
    try:
        sif = path.is_file() and has_sif_magic(path)
    except OSError as exc:
        raise UserError(f"--keep {image}: cannot read it ({exc.strerror})") from None
    if not sif:
        raise UserError(f"--keep {image}: not a SIF file (only SIFs are unpacked into the cache)")
    return sif_digest(path)


# an unfinished unpack younger than this may still be running in another process
PARTIAL_GRACE_S = 3600


@dataclass(frozen=True)
class Pruned:
    removed: list[Path]
    not_ours: int  # names in the cache directory that the tool did not record: left alone


def prune(
    keep: set[str] | None = None, site_dir: str | None = None, *, stale_only: bool = False
) -> Pruned:
    """Remove cached unpacked images (all, all but the given keys, or with `stale_only` those
    whose SIF is gone or was replaced) and unpacks that never finished. Only what the tool
    recorded as its own goes; anything else in the directory is counted and left."""
    base = cache_dir(site_dir)
    own = _recorded(base)
    # an unpacked copy is a recorded name without a suffix; asking its source is enough
    # (entries() would also walk every tree for its size)
    stale = {n for n in own if "." not in n and _source_of(base, n)[1]} if stale_only else set()
    now = time.time()
    removed: list[Path] = []
    for name in sorted(own):
        entry = base / name
        key = name.split(".", 1)[0]
        if ".part-" in name:
            # an unpack may still be running (its record comes before its directory)
            made = next((p for p in (entry, base / RECORDS / name) if os.path.lexists(p)), None)
            with contextlib.suppress(OSError):
                if made and now - os.lstat(made).st_mtime < PARTIAL_GRACE_S:
                    continue
        elif (keep and key in keep) or (stale_only and key not in stale):
            continue
        if _remove(entry):
            removed.append(entry)
        if not os.path.lexists(entry):
            _forget(base, name)
    try:
        names = set(os.listdir(base)) - {RECORDS}
    except OSError:
        names = set()
    return Pruned(removed, len(names - own))
