"""Source patches for Horovod releases that no longer build against current frameworks.

Each patch is a list of shell commands run inside the unpacked sdist; the last one checks
that the patch took, so a changed upstream file fails the build instead of being skipped.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

# Horovod <= 0.28.1 sets C++14 in these two files; torch >= 2.1 headers need C++17
# (`#error C++17 or later compatible compiler is required`), torch >= 2.14 headers C++20
# (`#error C++20 or later compatible compiler is required to use ATen`). TensorFlow's file
# already says 17 and is left alone: TensorFlow 2.15's headers are not checked against C++20.
CXX_FILES = ("CMakeLists.txt", "horovod/torch/CMakeLists.txt")
_FILES = " ".join(CXX_FILES)

# Horovod <= 0.28.1 leans on headers that GCC < 13's libstdc++ included transitively: with GCC 13
# group_table.h fails on std::string (47 errors). Upstream's fix (horovod/horovod#3957, after
# 0.28.1, in no release) adds <string> there and <stdexcept> to common.h; <cstdint> joins them
# (GCC 13 dropped it from <string> too). Harmless on older compilers, so applied to every
# release that lacks it (`needed`).
GCC13_FILES = ("horovod/common/common.h", "horovod/common/group_table.h")
GCC13_INCLUDES = ("cstdint", "stdexcept", "string")
_GCC13_INSERT = "\\n".join(f"#include <{h}>" for h in GCC13_INCLUDES)
GCC13_FIXED_AFTER = "0.28.1"
# GCC 14 also checks template members nobody instantiates: the flatbuffers 2.0 that Horovod
# vendors assigns a const member in span::operator= ("assignment of read-only member
# 'flatbuffers::span<T, Extent>::count_'"); upstream's fix (google/flatbuffers#7227) drops the
# const. Found by tests/e2e/test_horovod_gcc14.py.
FLATBUFFERS_SPAN = "third_party/flatbuffers/include/flatbuffers/stl_emulation.h"

PATCHES: dict[str, list[str]] = {
    "cxx17": [
        f"sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' {_FILES}",
        f"! grep -n 'CMAKE_CXX_STANDARD 14' {_FILES}",
    ],
    # also after cxx17, so the two may be listed together
    "cxx20": [
        f"sed -i -E 's/set\\(CMAKE_CXX_STANDARD 1[47]\\)/set(CMAKE_CXX_STANDARD 20)/' {_FILES}",
        f"! grep -nE 'CMAKE_CXX_STANDARD 1[47]' {_FILES}",
    ],
    # before the first #include of each file (GNU sed's 0,/re/: the first match only)
    "gcc13": [
        *(f"sed -i '0,/^#include/s//{_GCC13_INSERT}\\n&/' {name}" for name in GCC13_FILES),
        *(f"grep -q '^#include <{h}>' {name}" for name in GCC13_FILES for h in GCC13_INCLUDES),
        f"sed -i 's/^  const size_type count_;$/  size_type count_;/' {FLATBUFFERS_SPAN}",
        f"grep -q '^  size_type count_;$' {FLATBUFFERS_SPAN}",
    ],
}


def needed(version: str) -> list[str]:
    """The patches a release needs whatever the recipe lists: gcc13 (GCC 13 and 14) up to
    0.28.1."""
    try:
        release = Version(version)
    except InvalidVersion:
        return []  # the recipe model lets only PEP 440 versions through
    return ["gcc13"] if release <= Version(GCC13_FIXED_AFTER) else []


def commands(name: str) -> list[str]:
    return PATCHES[name]
