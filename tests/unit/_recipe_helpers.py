"""Helpers for recipe tests: write YAML text to a file and find the line a key sits on."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

CPU_RECIPE: dict[str, Any] = {
    "name": "t",
    "version": "1",
    "base": {"image": "debootstrap:bookworm"},
    "python": {"version": "3.11"},
    "mpi": {"flavor": "openmpi"},
    "pytorch": {"version": "2.13.0", "cuda_tag": "cpu", "wheel_index": "pip"},
    "horovod": {"version": "0.28.1", "frameworks": ["pytorch"], "patches": ["cxx17"]},
}

GPU_RECIPE: dict[str, Any] = {
    "name": "g",
    "version": "1",
    "base": {"image": "nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04"},
    "python": {"version": "3.10"},
    "cuda": {"version": "11.8"},
    "nccl": {"version": "2.15.5"},
    "mpi": {"flavor": "openmpi"},
    "tensorflow": {"version": "2.10.1"},
    "pytorch": {"version": "1.13.1", "torchvision": "0.14.1", "cuda_tag": "cu117"},
    "horovod": {
        "version": "0.28.1",
        "frameworks": ["tensorflow", "keras", "pytorch"],
        "gpu_operations": "nccl",
        "nccl_link": "shared",
        "cuda_cc": ["80"],
    },
}


def _wheels_recipe() -> dict[str, Any]:
    # CUDA 13 and NCCL from NVIDIA's wheels on a Debian base (gpu-bookworm's shape)
    return merged(
        CPU_RECIPE,
        cuda={"version": "13.0", "source": "pip"},
        nccl={"version": "2.30.7", "source": "pip"},
        pytorch={"version": "2.14.1", "cuda_tag": "cu130", "wheel_index": "pypi"},
        horovod={
            "version": "0.28.1",
            "frameworks": ["pytorch"],
            "gpu_operations": "nccl",
            "nccl_link": "shared",
            "cuda_cc": ["80", "90"],
            "patches": ["cxx20"],
        },
    )


def merged(recipe: dict[str, Any], /, **changes: Any) -> dict[str, Any]:
    """A copy of recipe with top-level sections replaced, or dropped when the value is None."""
    out = copy.deepcopy(recipe)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def write(directory: Path, data: dict[str, Any] | str, name: str = "r.yaml") -> Path:
    path = directory / name
    text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
    path.write_text(text)
    return path


def line_of(path: Path, *keys: str) -> int:
    """1-based line of the nested key keys[0].keys[1]... in a block-style YAML file."""
    lines = path.read_text().splitlines()
    start, depth = 0, 0
    found = 0
    for key in keys:
        for i in range(start, len(lines)):
            if lines[i].startswith("  " * depth + f"{key}:"):
                found, start, depth = i + 1, i + 1, depth + 1
                break
        else:
            raise AssertionError(f"{'.'.join(keys)} not in {path}")
    return found


WHEELS_RECIPE = _wheels_recipe()
