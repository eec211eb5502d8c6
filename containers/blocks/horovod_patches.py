"""Source patches for Horovod releases that no longer build against current frameworks.

Each patch is a list of shell commands run inside the unpacked sdist; the last one checks
that the patch took, so a changed upstream file fails the build instead of being skipped.
"""

from __future__ import annotations

# Horovod <= 0.28.1 sets C++14 in these two files; torch >= 2.1 headers need C++17
# (`#error C++17 or later compatible compiler is required`). TensorFlow's file already says 17.
CXX17_FILES = ("CMakeLists.txt", "horovod/torch/CMakeLists.txt")

PATCHES: dict[str, list[str]] = {
    "cxx17": [
        "sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "
        + " ".join(CXX17_FILES),
        "! grep -n 'CMAKE_CXX_STANDARD 14' " + " ".join(CXX17_FILES),
    ],
}


def commands(name: str) -> list[str]:
    return PATCHES[name]
