"""A recipe that names several architectures: one recipe, one lock and one tag an image, and a
digest over them all; the OCI image index that names them in a registry."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from _recipe_helpers import CPU_RECIPE, write
from hvd_container.containers.image_index import (
    INDEX,
    RECIPE_DIGEST,
    Entry,
    index_document,
    plain_http,
)
from hvd_container.containers.lockfile import header
from hvd_container.containers.recipe import LockedRecipe, MultiArch
from hvd_container.containers.recipe_loader import (
    image_arches,
    load_images,
    load_recipe,
    lock_inputs_digest,
    read_recipe,
    recipe_lock_file,
)

from hvd_container.core.errors import UserError

# no pip parts to lock: the recipe loads without a lock file
PLAIN = {**CPU_RECIPE, "mpi": None, "pytorch": None, "horovod": None}
LOCK = "numpy==2.4.6 \\\n    --hash=sha256:" + "0" * 64 + "\n"


def pair(tmp_path: Path, **changes: object) -> Path:
    return write(tmp_path, {**PLAIN, "arch": ["amd64", "arm64"], **changes})


def test_a_list_of_architectures_makes_an_image_each_tagged_by_its_architecture(
    tmp_path: Path,
) -> None:
    images = load_images(pair(tmp_path))
    assert isinstance(images, MultiArch)
    assert images.index_tag == "t:1"
    assert [(r.arch, r.image_tag) for r in images.images] == [
        ("amd64", "t:1-amd64"),
        ("arm64", "t:1-arm64"),
    ]
    assert [r.pip_platform for r in images.images] == [
        "x86_64-manylinux_2_36",
        "aarch64-manylinux_2_36",
    ]


def test_a_recipe_of_one_architecture_is_one_image_under_its_own_tag(tmp_path: Path) -> None:
    path = write(tmp_path, {**PLAIN, "arch": "arm64"})
    assert image_arches(path) == [None]
    images = load_images(path)
    assert isinstance(images, LockedRecipe) and images.image_tag == "t:1"
    # asking for its own architecture is the same image; another makes one more
    assert load_recipe(path, "arm64").image_tag == "t:1"
    other = load_images(path, ["arm64", "amd64"])
    assert isinstance(other, MultiArch)
    assert [r.image_tag for r in other.images] == ["t:1", "t:1-amd64"]


def test_each_image_has_its_own_lock_and_the_recipes_digest_covers_every_one(
    tmp_path: Path,
) -> None:
    path = pair(tmp_path)
    _recipe, amd64_lock = recipe_lock_file(path, "amd64")
    _recipe, arm64_lock = recipe_lock_file(path, "arm64")
    assert (amd64_lock.name, arm64_lock.name) == ("r.amd64.lock", "r.arm64.lock")
    before = load_images(path)
    assert isinstance(before, MultiArch)
    arm64 = read_recipe(path, "arm64")
    lock = header("t", "1-arm64", str(path), "3.11", arm64.pip_platform,
                  lock_inputs_digest(arm64), None) + LOCK  # fmt: skip
    arm64_lock.write_text(lock)
    after = load_images(path)
    assert isinstance(after, MultiArch)
    assert after.images[1].lock == lock and after.images[0].lock is None
    # the arm64 image is another; the amd64 one is the same; the pair is another
    assert after.images[0].digest() == before.images[0].digest()
    assert after.images[1].digest() != before.images[1].digest()
    assert after.digest() != before.digest()


def test_one_image_of_a_pair_must_be_named_where_one_is_wanted(tmp_path: Path) -> None:
    path = pair(tmp_path)
    with pytest.raises(UserError, match=r"r.yaml:\d+: recipe t makes an image for each of "
                       r"amd64, arm64: name one \(--arch\)"):  # fmt: skip
        load_recipe(path)
    assert read_recipe(path, "arm64").version == "1-arm64"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "arch: an empty list (allowed: one or more of amd64, arm64, ppc64le)"),
        (
            ["amd64", "sparc"],
            "arch: 'sparc' is not an architecture (allowed: amd64, arm64, ppc64le)",
        ),
        (["arm64", "arm64"], "arch: each architecture may appear once"),
    ],
)
def test_a_bad_list_of_architectures_is_one_line_naming_the_line(
    tmp_path: Path, value: list[str], message: str
) -> None:
    path = write(tmp_path, {**PLAIN, "arch": value})
    with pytest.raises(UserError) as info:
        load_images(path)
    assert str(info.value) == f"{path}:{_line_of_arch(path)}: {message}"


def test_an_unknown_architecture_asked_for_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--arch sparc: not an architecture \(allowed: amd64"):
        load_images(pair(tmp_path), ["sparc"])


def _line_of_arch(path: Path) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if "arch" in line)


def test_the_index_names_each_image_with_its_platform_and_the_recipes_digest() -> None:
    entries = [
        Entry("amd64", "application/vnd.docker.distribution.manifest.v2+json", "sha256:" + "a" * 64, 528),
        Entry("arm64", "application/vnd.oci.image.manifest.v1+json", "sha256:" + "b" * 64, 612),
    ]  # fmt: skip
    document = json.loads(index_document(entries, "c" * 64))
    assert document["mediaType"] == INDEX and document["schemaVersion"] == 2
    assert [(m["platform"], m["size"]) for m in document["manifests"]] == [
        ({"architecture": "amd64", "os": "linux"}, 528),
        ({"architecture": "arm64", "os": "linux"}, 612),
    ]
    assert document["manifests"][1]["mediaType"] == entries[1].media_type
    assert document["annotations"] == {RECIPE_DIGEST: "sha256:" + "c" * 64}
    # the same entries, the same bytes: the same index digest
    again = index_document(entries, "c" * 64)
    assert (
        hashlib.sha256(again).digest() == hashlib.sha256(index_document(entries, "c" * 64)).digest()
    )


@pytest.mark.parametrize(
    ("host", "plain"),
    [
        ("127.0.0.1:5000", True),
        ("localhost:5000", True),
        ("[::1]:5000", True),
        ("registry.example.org", False),
        ("10.0.0.5:5000", False),
        ("ghcr.io", False),
    ],
)
def test_only_a_loopback_registry_is_spoken_to_over_plain_http(host: str, plain: bool) -> None:
    assert plain_http(host) is plain
