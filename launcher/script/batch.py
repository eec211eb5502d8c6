"""The sbatch script of a launch: one pure function from plain data to text.

#SBATCH lines ask for the resources; the module loads and exports set up the job's shell;
the srun line is the step the plan composed (the one `run` runs inside an allocation).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from hvd_container.launcher.script import shell

from hvd_container.core.atomic import write_output
from hvd_container.core.errors import UserError
from hvd_container.core.programs import handed_program
from hvd_container.core.text import has_line_ends, is_utf8

OUTPUT_PATTERN = "%x_%j.out"
ERROR_PATTERN = "%x_%j.err"


# what a script run --until-done reads: the signal that asks for a checkpoint and the seconds
# left then (the contract; examples/_synthetic.py honours it)
CHECKPOINT_SIGNAL = "HVD_CHECKPOINT_SIGNAL"
CHECKPOINT_GRACE = "HVD_CHECKPOINT_GRACE"
SEGMENT = "HVD_SEGMENT"  # the segment a job that depends on the last one is (0 the first)
PREVIOUS_JOB = "HVD_PREVIOUS_JOB"  # the job of the segment before it (jobs show links them)
EXCLUDED = "HVD_EXCLUDED"  # the nodes the run lost so far, left out of its next segments
# the step loop's exit when it lost nodes it could not spare (launcher/run/restarts.py says it)
NODES_LOST_EXIT = 79


@dataclass(frozen=True)
class UntilDone:
    """--until-done: Slurm warns the script `grace` seconds before its time limit, and the job
    goes on in a next segment, at most `max_restarts` times: `requeue` (scontrol requeue),
    `dependency` (a new job after this one) or `program` (the program requeues its own job on
    the signal, as Lightning does: the script only hands the signal on)."""

    grace: int
    max_restarts: int
    how: Literal["requeue", "dependency", "program"]


@dataclass(frozen=True)
class BatchScript:
    """What a batch script says, as plain data."""

    options: list[str]  # each an #SBATCH line: the allocation, then the site's sbatch_options
    site: str
    runtime: str
    controller: str  # its name and why it was chosen
    modules: list[str]  # `module load` before the step
    env: dict[str, str]  # exported before the step
    step: list[str]  # the srun line
    files: dict[str, str] = field(default_factory=dict)  # written before the step: path -> text
    folders: list[str] = field(default_factory=list)  # made (owner-only) before the step
    until_done: UntilDone | None = None
    # why the tool wrote an #SBATCH option of its own choosing: option -> reason, a comment
    option_notes: dict[str, str] = field(default_factory=dict)
    staged: StagedImage | None = None  # --stage: the copy the srun line names
    pinned: PinnedImage | None = None  # the image file as its signature was checked


@dataclass(frozen=True)
class StagedImage:
    """--stage in a batch script: `command` copies the image to the nodes and prints the
    copy's path, which the srun line names in place of `image` in its word `at`."""

    command: list[str]
    image: str
    at: int


@dataclass(frozen=True)
class PinnedImage:
    """The image file whose signature the launch checked, and its sha256 then: the job stops
    before its step if the file on the cluster is no longer that one."""

    path: str
    sha256: str


def pin_lines(pinned: PinnedImage) -> list[str]:
    path = shell.quote(pinned.path, one_line=True)
    message = shell.quote(
        f"hvd-container: {pinned.path} changed since its signature was checked: not run",
        one_line=True,
    )
    return [
        "# the image as its signature was checked: a file changed since stops the job here",
        f'[ "$(sha256sum < {path} | cut -d" " -f1)" = {pinned.sha256} ] || '
        f"{{ echo {message} >&2; exit 1; }}",
        "",
    ]


STAGED = "hvd_staged"  # the variable that holds the staged copy's path


# characters sbatch takes as they are in an #SBATCH word; any other makes the value quoted
_PLAIN = frozenset(string.ascii_letters + string.digits + "_./:=,;+@%^-")


def sbatch_word(option: str) -> str:
    """`--flag=value` written so that sbatch reads back exactly `value`.

    sbatch reads an #SBATCH line word by word (src/sbatch/opt.c, _get_argument): whitespace
    ends a word unless quoted, `'` and `"` group, a backslash takes the next character as it
    is, an unquoted `#` ends the line. A value with anything but plain characters is written
    in double quotes with `\\` and `"` escaped; a line break or NUL cannot be written at all."""
    name, eq, value = option.partition("=")
    if has_line_ends(option):
        raise UserError(f"#SBATCH {name}: {value!r} has line breaks or control characters")
    if not is_utf8(option):
        raise UserError(f"#SBATCH {name}: {ascii(value)} is not UTF-8 text")
    if not eq:
        return option if set(option) <= _PLAIN else _quoted(option)
    return f"{name}={value if value and set(value) <= _PLAIN else _quoted(value)}"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _sbatch_line(option: str) -> str:
    return f"#SBATCH {sbatch_word(option)}"


def _option_note(option: str) -> list[str]:
    """A comment under an #SBATCH line whose meaning there is not what its name says."""
    name, _, value = option.partition("=")
    if name == "--mincpus" and value.isascii() and value.isdigit():
        # layout.allocation_tasks: ZIH's form of the ranks a node in GPU jobs
        return [
            f"# (--mincpus={value} with --ntasks: {value} ranks on each node, the site's form "
            "for GPU jobs in place of --ntasks-per-node)"
        ]
    return []


def script_text(script: BatchScript) -> str:
    """The script, every command one line or one line continued (quoted so that no value can
    start another). Where the job runs helper programs of the tool's, the job comes first, in
    a function, and the programs and files it reads are written in one block at the end."""
    lines = ["#!/bin/bash"]
    for option in script.options:
        lines += [_sbatch_line(option), *_option_note(option)]
        if option in script.option_notes:
            lines.append(f"# ({_one_line(script.option_notes[option])})")
    lines.append(f"# hvd-container: site {script.site}, runtime {script.runtime}")
    lines.append(f"# controller {_one_line(script.controller)}")
    lines.append("")
    if script.modules:
        lines.append(shell.join(["module", "load", *script.modules], one_line=True))
    for name, value in script.env.items():
        lines.append(f"export {name}={shell.quote(value, one_line=True)}")
    if script.modules or script.env:
        lines.append("")
    for folder in script.folders:
        lines += [
            "# a folder the srun line below needs",
            f"(umask 077 && mkdir -p {shell.quote(folder, one_line=True)})",
            "",
        ]
    files = [line for path, text in script.files.items() for line in file_lines(path, text)]
    helpers: dict[str, list[str]] = {}
    job: list[str] = pin_lines(script.pinned) if script.pinned else []
    if script.staged is not None:
        found, copy = _words(script.staged.command, one_line=True, staged=None)
        helpers.update(found)
        job += [
            f"# --stage: sbcast copies {_one_line(script.staged.image)} into a folder of this job's own on every node;",
            "# the srun line below runs that copy",
            f"{STAGED}=$({' '.join(copy)}) || exit 1",
            "",
        ]
    found, command = command_lines(script.step, staged=script.staged)
    helpers.update(found)
    job += command if script.until_done is None else segment_lines(command, script.until_done)
    if not helpers:
        return "\n".join([*lines, *files, *job]) + "\n"
    names = ", ".join(helpers)
    return "\n".join([
        *lines,
        f"# the job; the helper programs it runs ({names})",
        "# and the files it reads are written at the end of this script, before the job runs",
        f"{JOB_FUNCTION}() {{",
        *(f"    {line}" if line else "" for line in job),
        "}",
        "",
        "# ---- written by hvd-container for the job above: its helper programs and files ----",
        "",
        *(line for lines_of in helpers.values() for line in lines_of),
        *files,
        JOB_FUNCTION,
    ]) + "\n"  # fmt: skip


JOB_FUNCTION = "hvd_run_job"  # the job's function, where its helpers follow it
WIDTH = 96  # a command is continued on the next line beyond this


def _one_line(text: str) -> str:
    """A comment of one line, whatever the text holds (a script's name)."""
    return "".join(c if c.isprintable() else "?" for c in text)


def until_done_options(until: UntilDone) -> list[str]:
    """#SBATCH options of a job that goes on in segments: the warning signal to this script
    (B:) `grace` seconds before the limit, the log kept across segments, requeue allowed."""
    return [
        f"--signal=B:USR1@{until.grace}",
        "--open-mode=append",
        "--requeue" if until.how != "dependency" else "--no-requeue",
    ]


def segment_lines(command: list[str], until: UntilDone) -> list[str]:
    """The step (its command's lines) run in the background, so that the script's trap of
    Slurm's warning (USR1) hands it to the step's ranks (srun passes it to every task); when
    the step then ends non-zero, the job goes on in the next segment from the script's last
    checkpoint."""
    limit = until.max_restarts
    given = checkpoint_time(until.grace)
    on_warning = (
        'hvd_warned=1; echo "hvd-container: segment $hvd_segment: the time limit is near: '
        'the ranks are told to write a checkpoint (SIGUSR1)" >&2; kill -USR1 "$hvd_step" 2>/dev/null'
    )
    if until.how == "program":  # it requeues itself: the signal goes on only while it may
        on_warning = (
            f'if [ "$hvd_segment" -lt {limit} ]; then {on_warning}; else echo "hvd-container: '
            f"segment $hvd_segment: {limit} restarts (--max-restarts): the program is not told "
            'to requeue" >&2; fi'
        )
    lines = [
        "# --until-done: Slurm warns this script (USR1) before the time limit; the ranks get the",
        f"# signal (${CHECKPOINT_SIGNAL}), write a checkpoint and exit non-zero; the job then goes",
        f"# on from that checkpoint ({_HOW[until.how]}), at most {limit} times; a job that lost",
        f"# nodes it could not spare (the step loop exits {NODES_LOST_EXIT}) goes on as a job of its own without them",
        # a job of a later segment may be requeued too: the two counts add up
        f"hvd_segment=$(( ${{SLURM_RESTART_COUNT:-0}} + ${{{SEGMENT}:-0}} ))",
        "hvd_warned=",
        f"trap {shell.quote(on_warning)} USR1",
        *command[:-1],
        f"{command[-1]} &",
        "hvd_step=$!",
        "# a trap ends `wait` early: wait again while the step runs; warned, the step has",
        f"# {given} s to write its checkpoint and end{_OWN_REQUEUE.get(until.how, '')}, then this script ends it",
        "hvd_ended= hvd_cut=",
        "while :; do",
        '    wait "$hvd_step"; hvd_rc=$?',
        '    [ "$hvd_rc" -gt 128 ] && kill -0 "$hvd_step" 2>/dev/null || break',
        '    if [ -n "$hvd_warned" ] && [ -z "$hvd_ended" ]; then',
        f"        hvd_ended=$((SECONDS + {given}))",
        '        while kill -0 "$hvd_step" 2>/dev/null && [ "$SECONDS" -lt "$hvd_ended" ]; do sleep 1; done',
        '        if kill -0 "$hvd_step" 2>/dev/null; then',
        f'            echo "hvd-container: segment $hvd_segment: the step still runs {given} s after the warning: it is ended" >&2',
        '            hvd_cut=1; kill -TERM "$hvd_step"',
        "        fi",
        "    fi",
        "done",
        "# a step this script ended is not done, whatever its program's exit (Lightning's is 0)",
        'if [ -n "$hvd_cut" ] && [ "$hvd_rc" -eq 0 ]; then hvd_rc=143; fi',
        'hvd_lost_file=.hvd-container/runs/"$SLURM_JOB_ID".lost',
        "hvd_lost=",
        f'if [ "$hvd_rc" -eq {NODES_LOST_EXIT} ] && [ -s "$hvd_lost_file" ]; then hvd_lost=$(cat "$hvd_lost_file"); fi',
        'if [ "$hvd_rc" -eq 0 ] || { [ -z "$hvd_warned" ] && [ -z "$hvd_lost" ]; }; then exit "$hvd_rc"; fi',
    ]
    if until.how == "program":
        lines += [
            "# the program requeues its job itself (Slurm then ends this script); where it could",
            "# not (no scontrol in the container), this script goes on with a job of its own",
            'if [ -z "$hvd_lost" ]; then',
            '    hvd_state=$(scontrol show job "$SLURM_JOB_ID" 2>/dev/null) || {',
            '        echo "hvd-container: segment $hvd_segment: scontrol show job failed: whether the program requeued its job is not known: stopping" >&2',
            '        exit "$hvd_rc"',
            "    }",
            "    case $hvd_state in",
            '    *"JobState=RUNNING"*"Restarts=${SLURM_RESTART_COUNT:-0} "*) echo "hvd-container: segment $hvd_segment: the program did not requeue its job: this script goes on" >&2 ;;',
            '    *) exit "$hvd_rc" ;;',
            "    esac",
            "fi",
        ]
    lines += [
        f'if [ "$hvd_segment" -ge {limit} ]; then',
        f'    echo "hvd-container: segment $hvd_segment ended after {limit} restarts (--max-restarts): stopping" >&2',
        '    exit "$hvd_rc"',
        "fi",
    ]
    if until.how == "requeue":
        lines += [
            'if [ -z "$hvd_lost" ]; then',
            '    echo "hvd-container: segment $hvd_segment ended at the time limit: requeued; segment $((hvd_segment + 1)) resumes from the last checkpoint" >&2',
            '    scontrol requeue "$SLURM_JOB_ID" || exit "$hvd_rc"',
            "    exit 0",
            "fi",
        ]
    return [
        *lines,
        "# the next segment: this script again, as a job of its own after this one (Slurm's",
        "# variables of this job left out of its environment), without the nodes lost so far",
        "hvd_job=$SLURM_JOB_ID",
        f"hvd_excluded=${{{EXCLUDED}:-}}",
        'if [ -n "$hvd_lost" ]; then hvd_excluded=${hvd_excluded:+$hvd_excluded,}$hvd_lost; fi',
        'hvd_exclude=(); if [ -n "$hvd_excluded" ]; then hvd_exclude=(--exclude="$hvd_excluded"); fi',
        'hvd_next=$(for v in $(compgen -e); do case $v in SLURM_*|SBATCH_*|SRUN_*|SALLOC_*) unset "$v";; esac; done',
        f'    {SEGMENT}=$((hvd_segment + 1)) {PREVIOUS_JOB}="$hvd_job" {EXCLUDED}="$hvd_excluded" sbatch --parsable "${{hvd_exclude[@]}}" --dependency=afterany:"$hvd_job" "$0") || exit "$hvd_rc"',
        'hvd_why="at the time limit"; if [ -n "$hvd_lost" ]; then hvd_why="with nodes lost ($hvd_lost)"; fi',
        'echo "hvd-container: segment $hvd_segment ended $hvd_why: segment $((hvd_segment + 1)) is job ${hvd_next%%;*}, from the last checkpoint${hvd_excluded:+, without $hvd_excluded}" >&2',
        "exit 0",
    ]


def checkpoint_time(grace: int) -> int:
    """The seconds a warned step has to write its checkpoint and end: the grace less the time
    this script needs to end the step and queue the next segment (5 s, or a quarter)."""
    return max(1, grace - max(5, grace // 4))


# what a program that requeues itself may do within that time
_OWN_REQUEUE = {"program": " (or requeue the job)"}

_HOW = {
    "requeue": "this job requeued",
    "dependency": "a new job that depends on this one",
    "program": "the program requeues the job itself, else a new job that depends on this one",
}


def step_lines(step: list[str], *, one_line: bool = True) -> list[str]:
    """The srun line as a shell runs it, each of the tool's helper programs in it written
    once above it, as its file has it, and named by a variable there: the line stays short
    enough to read, and srun receives the same words. one_line: each other word on the line
    too (a script's line breaks are its own)."""
    found, words = _words(step, one_line=one_line, staged=None)
    return [*(line for lines in found.values() for line in lines), " ".join(words)]


def command_lines(
    step: list[str], *, staged: StagedImage | None = None
) -> tuple[dict[str, list[str]], list[str]]:
    """A batch script's command for `step`: the lines that set each helper program's variable
    (by its name), and the command: one line, or where it runs helpers, a line for srun and
    for each helper, continued at WIDTH characters where its words allow. staged: the word
    that names the image names the staged copy instead."""
    found, words = _words(step, one_line=True, staged=staged)
    if not found:  # no helper: the one line the site's guide would show
        return found, [" ".join(words)]
    lines = [""]
    for at, word in enumerate(words):
        # a new line for srun and for each helper it runs, and where a line grows too long
        starts = word == "srun" or (word == "sh" and words[at + 1 : at + 2] == ["-c"])
        if lines[-1].strip() and (starts or len(lines[-1]) + 1 + len(word) > WIDTH):
            lines[-1] += " \\"
            lines.append("    ")
        lines[-1] += word if not lines[-1].strip() else f" {word}"
    return found, lines


def _words(
    step: list[str], *, one_line: bool, staged: StagedImage | None
) -> tuple[dict[str, list[str]], list[str]]:
    helpers: dict[str, tuple[str, str]] = {}
    words = []
    for at, word in enumerate(step):
        if staged is not None and at == staged.at:
            words.append(_staged_word(word, staged.image))
            continue
        file = handed_program(word)
        if file is None:
            words.append(shell.quote(word, one_line=one_line))
            continue
        name = "hvd_" + re.sub(r"\W", "_", Path(file).stem)
        helpers[name] = (file, word)
        words.append(f'"${name}"')
    return {name: _helper_lines(name, *found) for name, found in helpers.items()}, words


def _staged_word(word: str, image: str) -> str:
    """The step's word that names the image (`IMAGE` or `--flag=IMAGE`), naming the copy."""
    if word == image:
        return f'"${STAGED}"'
    if not word.endswith("=" + image):
        raise UserError(f"--stage: the step's word {word!r} does not name the image {image!r}")
    return shell.quote(word[: -len(image)], one_line=True) + f'"${STAGED}"'


_END = "HVD_PROGRAM_END"
_FILE_END = "HVD_FILE_END"


def file_lines(path: str, text: str) -> list[str]:
    """Lines that write `text` to `path` (owner-only, its folder made), byte for byte: a
    here-document read as it is, so the script carries what its step reads."""
    body = text.removesuffix("\n")
    if not text.endswith("\n") or body.endswith("\n") or _FILE_END in body.split("\n"):
        raise UserError(f"{path}: its text cannot be written by a batch script's here-document")
    folder = shell.quote(str(Path(path).parent), one_line=True)
    target = shell.quote(path, one_line=True)
    return [
        f"# {Path(path).name}, read by the srun line",
        f"(umask 077 && mkdir -p {folder} && cat > {target}) <<'{_FILE_END}'",
        *body.split("\n"),
        _FILE_END,
        "",
    ]


def _helper_lines(name: str, file: str, text: str) -> list[str]:
    """`name` set to the helper's text exactly: a here-document read as it is (no expansion),
    or a quoted word where a here-document could not give the text back byte for byte."""
    body = text.removesuffix("\n")
    if body.endswith("\n") or not text.endswith("\n") or _END in body.split("\n"):
        return [f"# {file}, run by the srun line", f"{name}={shell.quote(text)}", ""]
    return [
        f"# {file}, run by the srun line",
        f"IFS= read -r -d '' {name} <<'{_END}' || :",
        *body.split("\n"),
        _END,
        "",
    ]


# the script can carry --env values: readable and runnable by its owner only
SCRIPT_MODE = 0o700


def write_batch_script(target: str, text: str) -> None:
    """Write the script atomically, owner-only, replacing a regular file; a symbolic link is
    refused rather than followed or replaced (either would surprise someone)."""
    write_output(target, "-o/--output", text, SCRIPT_MODE)
