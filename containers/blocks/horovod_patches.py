"""Source patches for Horovod releases that no longer build against current frameworks.

Each patch is a list of shell commands run inside the unpacked sdist; the last one checks
that the patch took, so a changed upstream file fails the build instead of being skipped.
"""

from __future__ import annotations

# Horovod <= 0.28.1 sets C++14 in these two files; torch >= 2.1 headers need C++17
# (`#error C++17 or later compatible compiler is required`), torch >= 2.14 headers C++20
# (`#error C++20 or later compatible compiler is required to use ATen`). TensorFlow's file
# already says 17 and is left alone: TensorFlow 2.15's headers are not checked against C++20.
CXX_FILES = ("CMakeLists.txt", "horovod/torch/CMakeLists.txt")
_FILES = " ".join(CXX_FILES)

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
}


def commands(name: str) -> list[str]:
    return PATCHES[name]
