"""Test helper: the words bash makes of a command line (bash reads $'...', shlex does not)."""

from __future__ import annotations

import subprocess


def bash_words(line: str) -> list[str]:
    done = subprocess.run(
        ["/bin/bash", "-c", f'set -- {line}\nfor w in "$@"; do printf \'%s\\0\' "$w"; done'],
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().split("\0")[:-1]
