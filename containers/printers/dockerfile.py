"""Instruction records -> Dockerfile text.

Forms: shell-form RUN (one command per continuation line), one `ENV K=v` and one `LABEL k="v"`
per instruction, absolute COPY destinations, `FROM image AS name` and `COPY --from=name` between
the stages of a multi-stage build. Help and Test records have no Dockerfile form (the checks
block also yields a RUN for each Test).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from hvd_container.containers.instructions import (
    Arg,
    Block,
    Copy,
    CopyFrom,
    Env,
    From,
    Help,
    Instruction,
    Label,
    Run,
    Stage,
    Test,
)
from hvd_container.containers.printers import one_line, shell_command

MARKER_PREFIX = "# hvd-container phase: "


def quote(value: str, what: str) -> str:
    """A double-quoted one-line value (backslash and quote escaped, as JSON does). A line break
    is refused even here: Docker and sh would keep an escaped one as a backslash and a letter."""
    return json.dumps(one_line(value, what), ensure_ascii=False)


def instruction(item: Instruction) -> str | None:
    """The Dockerfile text of one record (None: no Dockerfile form)."""
    if isinstance(item, From):
        platform = f"--platform={item.platform} " if item.platform else ""
        named = f" AS {item.stage}" if item.stage else ""
        return f"FROM {platform}{one_line(item.image, 'base image')}{named}"
    if isinstance(item, Arg):
        return f"ARG {item.name}={one_line(item.default, item.name)}"
    if isinstance(item, Run):
        return "RUN " + " \\\n    && ".join(shell_command(c, "RUN") for c in item.commands)
    if isinstance(item, Env):
        value = quote(item.value, item.key) if item.quoted else one_line(item.value, item.key)
        return f"ENV {one_line(item.key, 'env')}={value}"
    if isinstance(item, Label):
        return f"LABEL {one_line(item.key, 'labels')}={quote(item.value, item.key)}"
    if isinstance(item, Copy):
        return f"COPY {item.source} {item.dest}"
    if isinstance(item, CopyFrom):
        return f"COPY --from={item.stage} {item.source} {item.dest}"
    if isinstance(item, (Help, Test)):
        return None
    raise TypeError(f"not an instruction: {item!r}")


def block_text(block: Block) -> str:
    """A block: its phase marker line, then its instructions, each ending with a newline."""
    lines = [MARKER_PREFIX + block.phase]
    lines += [text for text in map(instruction, block.items) if text is not None]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Dockerfile:
    """The Dockerfile text, with what the printer knew writing it: the image's FROM name and
    each instruction's phase, all stages in order (index = the classic builder's step - 1)."""

    text: str
    base: str
    phases: tuple[str, ...]
    stage_sizes: tuple[int, ...] = ()  # each stage's instructions, in order (buildah's counts)


def dockerfile(header: Iterable[str], stages: Iterable[Stage]) -> Dockerfile:
    """The Dockerfile: comment lines, then each stage's blocks, a blank line between blocks;
    each stage starts from one FROM (an image, or an earlier stage by its name), and a stage is
    named when a later one starts or copies from it. The base is the first stage's image."""
    top = "".join(f"# {line}\n" for line in header)
    stages = list(stages)
    bases = []
    for stage in stages:
        froms = [i for block in stage.blocks for i in block.items if isinstance(i, From)]
        if len(froms) != 1 or froms[0].stage != stage.name:
            raise ValueError(f"stage {stage.name or 'of the image'} needs one FROM of its name")
        bases.append(froms[0].image)
    blocks = [block for stage in stages for block in stage.blocks]
    phases = tuple(
        block.phase for block in blocks for item in block.items if instruction(item) is not None
    )
    sizes = tuple(
        sum(1 for block in stage.blocks for item in block.items if instruction(item) is not None)
        for stage in stages
    )
    return Dockerfile(top + "\n".join(block_text(b) for b in blocks), bases[0], phases, sizes)
