"""Test helper: the words bash makes of a command line (bash reads $'...', shlex does not)."""

from __future__ import annotations

import re
import subprocess


def bash_words(line: str) -> list[str]:
    done = subprocess.run(
        ["/bin/bash", "-c", f'set -- {line}\nfor w in "$@"; do printf \'%s\\0\' "$w"; done'],
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().split("\0")[:-1]


def snippet_words(text: str) -> list[str]:
    """The words of a snippet's last line as bash gives them to the program it starts, the
    lines above it (the helpers a dry run writes once) run first."""
    *head, last = text.rstrip("\n").split("\n")
    done = subprocess.run(
        [
            "/bin/bash",
            "-c",
            "\n".join([*head, f"set -- {last}", 'for w in "$@"; do printf \'%s\\0\' "$w"; done']),
        ],
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().split("\0")[:-1]


def sbatch_words(line: str) -> list[str]:
    """The words sbatch reads from an #SBATCH line's rest, as its _get_argument does
    (src/sbatch/opt.c): whitespace ends a word unless quoted, ' and " group, a backslash
    takes the next character, an unquoted # ends the line. An unmatched quote: ValueError
    (sbatch exits "Unmatched"). tests/e2e/test_sbatch_values.py holds it to the real sbatch."""
    words: list[str] = []
    i = 0
    while i < len(line):
        while i < len(line) and line[i].isspace():
            i += 1
        if i >= len(line):
            break
        word, quote, escaped = [], "", False
        while i < len(line) and (quote or not line[i].isspace()):
            c = line[i]
            i += 1
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
                continue
            elif quote:
                if c == quote:
                    quote = ""
                    continue
            elif c in "'\"":
                quote = c
                continue
            elif c == "#":
                return words + (["".join(word)] if word else [])
            word.append(c)
        if quote:
            raise ValueError(f"Unmatched {quote} in {line!r}")
        words.append("".join(word))
    return words


def job_command(script: str) -> str:
    """A batch script's command that runs the job, as one line: its continuations joined, read
    from the function the job sits in where the tool's helper programs follow it."""
    lines = re.sub(r" \\\n\s*", " ", script).rstrip("\n").split("\n")
    if JOB_START in lines:
        body = lines[lines.index(JOB_START) + 1 : lines.index("}", lines.index(JOB_START))]
        return [
            line.strip() for line in body if line.strip() and not line.lstrip().startswith("#")
        ][-1]
    return lines[-1]


JOB_START = "hvd_run_job() {"  # launcher/script/batch.py's JOB_FUNCTION
