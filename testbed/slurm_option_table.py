"""Write launcher/slurm_option_table.py from Slurm's own option table.

Usage: python testbed/slurm_option_table.py SLURM_SOURCE_DIR > launcher/slurm_option_table.py

Slurm's srun, sbatch and salloc read their options with getopt_long over the table
`common_options[]` in src/common/slurm_opt.c: each entry's name, has_arg and val (a short
letter, or a LONG_OPT_* number for long-only options), and the commands whose set_func it has.
This reads that table as it is written there (set_func: every command; set_func_srun and its
kin: that command) and prints it as data.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ARG = {"no_argument": "none", "required_argument": "required", "optional_argument": "optional"}
COMMANDS = ("salloc", "sbatch", "srun")


def read_table(source: Path) -> list[tuple[str, str, str, str]]:
    text = (source / "src/common/slurm_opt.c").read_text()
    blocks = dict(re.findall(r"static slurm_cli_opt_t (slurm_opt_\w+) = \{(.*?)\n\};", text, re.S))
    order = re.search(r"common_options\[\] = \{(.*?)\};", text, re.S)
    if order is None:
        raise SystemExit("common_options[] not found: is this Slurm's source?")
    rows = []
    for ident in re.findall(r"&(slurm_opt_\w+)", order.group(1)):
        body = blocks[ident]
        name = re.search(r'\.name = "([^"]+)"', body)
        if name is None:
            continue  # an option that is only an environment variable
        has_arg = re.search(r"\.has_arg = (\w+)", body)
        val = re.search(r"\.val = '(.)'", body)
        if re.search(r"\.set_func = ", body):
            commands = COMMANDS
        else:
            commands = tuple(c for c in COMMANDS if re.search(rf"\.set_func_{c} = ", body))
        if commands and has_arg is not None:
            rows.append((name.group(1), ARG[has_arg.group(1)], val.group(1) if val else "",
                         " ".join(commands)))  # fmt: skip
    return rows


def main() -> None:
    source = Path(sys.argv[1])
    meta = (source / "META").read_text()
    version = re.search(r"Version:\s*(\S+)", meta)
    release = re.search(r"Release:\s*(\S+)", meta)
    print('"""Slurm\'s option table for srun, sbatch and salloc: written by')
    print("testbed/slurm_option_table.py from src/common/slurm_opt.c (common_options[]) of Slurm")
    print(
        f"{version.group(1) if version else '?'}-{release.group(1) if release else '?'}; do not edit."
    )
    print("")
    print("Each row: the long name, its argument (none, required, optional), its short letter")
    print('(empty: long only) and the commands that read it."""')
    print("")
    print("SLURM_VERSION = " + repr(version.group(1) if version else "?"))
    print("")
    print("OPTIONS: tuple[tuple[str, str, str, str], ...] = (")
    for row in read_table(source):
        print(f"    {row!r},")
    print(")  # fmt: skip")


if __name__ == "__main__":
    main()
