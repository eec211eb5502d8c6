"""The image's bill of materials (containers/bom.py): what it lists, valid on CycloneDX's own
schema (cyclonedx-python-lib's validator, the schema it ships), and written into the image by
the build with its digest in a label (through the FAKE protocol-level engine)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from _fakes import BASE, FakeEngine, good_image
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from hvd_container.containers.blocks import horovod, horovod_patches
from hvd_container.containers.bom import (
    BOM_FILE,
    DebPackage,
    bill_of_materials,
    installed_debs,
    os_release,
)
from hvd_container.containers.build import BOM_LABEL, BuildOptions, build_recipe
from hvd_container.containers.lockfile import parse_lock
from hvd_container.containers.recipe_loader import load_recipe

STATUS = """Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u13
Description: GNU C Library: Shared libraries
 Contains the standard libraries that are used by nearly all programs on
 Version: 0 (a continuation line, not a field)

Package: libgomp1
Status: deinstall ok config-files
Architecture: amd64
Version: 12.2.0-14

Package: openmpi-bin
Status: install ok installed
Architecture: amd64
Version: 4.1.4-3+b1
"""
DEBIAN = os_release('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n')
VERSIONS = {"nccl": "2.21.5", "mpi": "Open MPI 4.1.4", "python": "3.11.2"}


def document(versions: dict[str, str] | None = None) -> dict[str, Any]:
    recipe = load_recipe("cpu-bookworm")
    text = bill_of_materials(
        recipe, BASE, "sha256:base", installed_debs(STATUS), DEBIAN, versions or VERSIONS
    )
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    return dict(json.loads(text))


def by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in doc["components"]}


def test_installed_packages_are_read_from_dpkgs_status() -> None:
    assert installed_debs(STATUS) == [
        DebPackage("libc6", "2.36-9+deb12u13", "amd64"),
        DebPackage("openmpi-bin", "4.1.4-3+b1", "amd64"),
    ]
    assert installed_debs("") == []


def test_the_document_is_valid_cyclonedx_and_lists_every_part() -> None:
    doc = document()
    parts = by_name(doc)
    assert doc["specVersion"] == "1.6" and doc["metadata"]["component"]["name"] == "cpu-bookworm"
    recipe = load_recipe("cpu-bookworm")
    assert {"name": "hvd-container:recipe.digest", "value": recipe.digest()} in (
        doc["metadata"]["component"]["properties"]
    )
    assert parts[BASE]["type"] == "container" and parts[BASE]["version"] == "sha256:base"
    assert (
        parts["libc6"]["purl"]
        == "pkg:deb/debian/libc6@2.36-9%2Bdeb12u13?arch=amd64&distro=debian-12"
    )
    assert "libgomp1" not in parts  # removed, only its configuration left
    assert recipe.lock is not None
    for name, package in parse_lock(recipe.lock).items():
        assert parts[name]["version"] == package.version and parts[name]["hashes"], name
    assert parts["nccl"]["version"] == "2.21.5" and parts["mpi"]["version"] == "Open MPI 4.1.4"
    assert "python" not in parts  # the lock and dpkg say what the image holds; not every fact
    # every part is a dependency of the image: the graph is complete
    (root,) = [
        d for d in doc["dependencies"] if d["ref"] == doc["metadata"]["component"]["bom-ref"]
    ]
    assert set(root["dependsOn"]) == {c["bom-ref"] for c in doc["components"]}


def test_horovod_is_listed_as_compiled_from_its_sdist_with_the_patches_applied() -> None:
    compiled = by_name(document())["horovod"]
    recipe = load_recipe("cpu-bookworm")
    assert recipe.lock is not None and recipe.horovod is not None
    sdist = recipe.lock.split("horovod==")[1].split("--hash=sha256:")[1].split()[0]
    assert compiled["hashes"] == [{"alg": "SHA-256", "content": sdist}]
    props = {p["name"]: p["value"] for p in compiled["properties"]}
    applied = horovod.patches(recipe)  # the recipe's, and those its release always needs
    assert applied and len(compiled["pedigree"]["patches"]) == len(applied)
    for name in applied:
        text = "\n".join(horovod_patches.PATCHES[name])
        assert props[f"hvd-container:patch.{name}"] == (
            "sha256:" + hashlib.sha256(text.encode()).hexdigest()
        )
    assert props["hvd-container:build.HOROVOD_WITH_MPI"] == "1"


def test_the_same_inputs_give_the_same_serial_number() -> None:
    assert document()["serialNumber"] == document()["serialNumber"]
    assert document()["serialNumber"] != document({"nccl": "2.22.3"})["serialNumber"]


def test_the_build_writes_it_into_the_image_with_its_digest_in_a_label() -> None:
    def image(argv: list[str]) -> tuple[int, str]:
        if argv == ["cat", "/var/lib/dpkg/status"]:
            return 0, STATUS
        if argv == ["cat", "/etc/os-release"]:
            return 0, 'ID=debian\nVERSION_ID="12"\n'
        return good_image(argv)

    engine = FakeEngine({BASE: {"Id": "sha256:base"}}, run=image)
    result = build_recipe(
        load_recipe("cpu-bookworm"),
        lambda *_: None,
        BuildOptions(use_host_pip=False),
        engine=engine,
    )
    labelling = engine.sent[-1]
    (copied,) = [
        line.split()
        for line in labelling["Dockerfile"].decode().splitlines()
        if line.startswith("COPY")
    ]
    written = labelling[copied[1]]
    assert copied[2] == BOM_FILE
    assert result.labels[BOM_LABEL] == "sha256:" + hashlib.sha256(written).hexdigest()
    assert (
        engine.images["cpu-bookworm:1"]["Config"]["Labels"][BOM_LABEL] == result.labels[BOM_LABEL]
    )
    assert "openmpi-bin" in by_name(json.loads(written))


def test_an_up_to_date_image_without_one_is_made_again() -> None:
    """An image an earlier release built (the same build digest, verified, no bill of
    materials) is not a cache hit: the build runs again (its layers come from the cache)."""
    engine = FakeEngine({BASE: {"Id": "sha256:base"}}, run=good_image)
    options = BuildOptions(use_host_pip=False)
    first = build_recipe(load_recipe("cpu-bookworm"), lambda *_: None, options, engine=engine)
    labels = engine.images["cpu-bookworm:1"]["Config"]["Labels"]
    assert build_recipe(load_recipe("cpu-bookworm"), lambda *_: None, options, engine=engine).cached
    labels.pop(BOM_LABEL)  # as an earlier release labelled it
    again = build_recipe(load_recipe("cpu-bookworm"), lambda *_: None, options, engine=engine)
    assert not again.cached and again.labels[BOM_LABEL] == first.labels[BOM_LABEL]


def test_without_the_build_extra_the_build_side_still_imports_and_says_what_to_install() -> None:
    """A launch-only install has no cyclonedx: `build` must still import and end in the one
    line naming the build extra (tests/e2e/test_packaging.py runs the real install)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('cyclonedx', 'packageurl'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import hvd_container.containers.build\n"
        "from hvd_container.containers.bom import bill_of_materials\n"
        "from hvd_container.containers.recipe_loader import load_recipe\n"
        "try:\n"
        "    bill_of_materials(load_recipe('cpu-bookworm'), 'b', None, [], {}, {})\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("UserError cyclonedx-python-lib, which writes the bill of")
    assert "pip install 'hvd-container[build]'" in done.stdout
