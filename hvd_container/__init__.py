"""hvd-container: Horovod/Lightning images and launch lines for HPC sites."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    # The version has one source, pyproject.toml, read from the installed metadata; looked up
    # only when asked for, so that the dry run does not pay for importlib.metadata.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("hvd-container")
        except PackageNotFoundError:  # running from a source tree that was never installed
            return "0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
