"""The `hvd-container` console script.

`run --dry-run` is answered by hvd_container/cli/quick_dry_run.py without loading typer (it
must stay fast); every other command line goes to the full CLI (hvd_container/cli/app.py).
"""

from __future__ import annotations

import sys

from hvd_container.cli.terminal import guarded


def main(argv: list[str] | None = None) -> int:
    """Console entry point."""
    args = sys.argv[1:] if argv is None else list(argv)
    return guarded(lambda: _answer(args))


def _answer(args: list[str]) -> int:
    from hvd_container.cli import quick_dry_run

    values = quick_dry_run.parse(args)
    if values is not None:
        return quick_dry_run.show(values)
    from hvd_container.cli.app import main as full_cli

    return full_cli(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
