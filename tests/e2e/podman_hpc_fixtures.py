"""podman-hpc's stores as the e2e tests use them: its command, and the removal of what a test
module put there (each image is ~2 GB in the store plus its squashed copy, and the suite must fit
a CI machine's disk)."""

from __future__ import annotations

import getpass
import os
import subprocess


def podman_hpc_cmd(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman-hpc", *argv], capture_output=True, text=True,
        env={**os.environ, "USER": getpass.getuser()},  # podman-hpc needs one
    )  # fmt: skip


def forget(*refs: str) -> None:
    """Remove the images from both stores, then the layers only they used (a build's
    intermediate images among them). A name that is not there is fine."""
    for ref in refs:
        podman_hpc_cmd("rmsqi", ref)
        podman_hpc_cmd("rmi", "--force", ref)
    podman_hpc_cmd("image", "prune", "--force")
