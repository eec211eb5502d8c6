"""A stand-in for srun's and sbatch's own reading of their options (labelled: not Slurm, but
the same reader): glibc's getopt_long, called through ctypes with Slurm's option table
(launcher/slurm_option_table.py) and Slurm's optstring "+" (the first word that is no option
ends them). The guard's own reader (launcher/guard.py) is judged against it, and the lines the
tool writes are read back through it: what srun would take as options, and the program it
would run."""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import NamedTuple

from hvd_container.launcher.slurm_option_table import OPTIONS

_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
_HAS_ARG = {"none": 0, "required": 1, "optional": 2}


class _Option(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("has_arg", ctypes.c_int),
        ("flag", ctypes.POINTER(ctypes.c_int)),
        ("val", ctypes.c_int),
    ]


class Read(NamedTuple):
    options: list[tuple[str, str | None]]  # (long name, value)
    program: list[str]  # the words from the first non-option on
    error: bool  # getopt_long returned '?': an unknown or ambiguous option, a missing value


# the options SPANK plugins add to srun (their tables: Pyxis's README, the Container Engine's
# --environment), which srun's getopt_long reads as its own
PYXIS = [
    ("container-image", "required"), ("container-mounts", "required"),
    ("container-workdir", "required"), ("container-name", "required"),
    ("container-save", "required"), ("container-mount-home", "none"),
    ("no-container-mount-home", "none"), ("container-remap-root", "none"),
    ("no-container-remap-root", "none"), ("container-entrypoint", "none"),
    ("no-container-entrypoint", "none"), ("container-writable", "none"),
    ("container-readonly", "none"), ("container-env", "required"),
]  # fmt: skip
CONTAINER_ENGINE = [("environment", "required")]
SHIFTER = [("image", "required"), ("module", "required")]  # shifter's SPANK plugin (sbatch)


def read(command: str, words: list[str], spank: list[tuple[str, str]] = ()) -> Read:  # type: ignore[assignment]
    """What `command` (srun, sbatch, salloc) reads from words (its argv without argv[0]), with
    the options of SPANK plugins (name, argument) added."""
    rows = [r for r in OPTIONS if command in r[3].split()]
    rows += [(name, arg, "", command) for name, arg in spank]
    table = (_Option * (len(rows) + 1))()
    names: dict[int, str] = {}
    optstring = "+"
    for i, (name, arg, short, _commands) in enumerate(rows):
        val = ord(short) if short else 0x100 + i
        names[val] = name
        table[i] = _Option(name.encode(), _HAS_ARG[arg], None, val)
        if short and short not in optstring:
            optstring += short + {"none": "", "required": ":", "optional": "::"}[arg]
    table[len(rows)] = _Option(None, 0, None, 0)
    argv_words = [command.encode(), *(w.encode() for w in words)]
    argv = (ctypes.c_char_p * (len(argv_words) + 1))(*argv_words, None)
    ctypes.c_int.in_dll(_LIBC, "optind").value = 0  # glibc: start afresh
    ctypes.c_int.in_dll(_LIBC, "opterr").value = 0
    optarg = ctypes.c_char_p.in_dll(_LIBC, "optarg")
    getopt_long = _LIBC.getopt_long
    getopt_long.restype = ctypes.c_int
    out: list[tuple[str, str | None]] = []
    while True:
        got = getopt_long(len(argv_words), argv, optstring.encode(), table, None)
        if got == -1:
            break
        if got == ord("?"):
            return Read(out, [], True)
        value = optarg.value
        out.append((names[got], value.decode() if value is not None else None))
    index = ctypes.c_int.in_dll(_LIBC, "optind").value
    return Read(out, [w.decode() for w in argv_words[index:]], False)
