"""What a building block yields: instruction records, not text.

One recipe renders to native text in each output format: containers/printers/dockerfile.py
writes a Dockerfile, containers/printers/singularity.py a Singularity/Apptainer definition, each
quoting what it writes (hpc-container-maker's model). A record holds plain values only.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class From:
    """The base: a Docker image, or a Debian suite bootstrapped from the mirror."""

    image: str  # the Docker reference (debootstrap: the local image testbed/base-image.sh makes)
    platform: str | None = None  # linux/<arch> when not the builders' amd64
    debootstrap_suite: str | None = None
    stage: str | None = None  # the name later stages copy from (a stage of a multi-stage build)


@dataclass(frozen=True)
class Arg:
    """A build-time variable; passthrough: its value comes from the builder's environment."""

    name: str
    default: str = ""
    passthrough: bool = False


@dataclass(frozen=True)
class Run:
    """Shell commands run in order, all of them or the build fails (one layer)."""

    commands: tuple[str, ...]


@dataclass(frozen=True)
class Env:
    """A variable of the image; quoted: its value is a double-quoted string (`$NAME` expands),
    else written as is (values of our own, such as PATH=/opt/venv/bin:$PATH)."""

    key: str
    value: str
    quoted: bool = True


@dataclass(frozen=True)
class Label:
    key: str
    value: str


@dataclass(frozen=True)
class Copy:
    """A file of the build context, placed at an absolute path; data: its bytes (a definition
    file writes it from a here-document, needing no context next to it)."""

    source: str
    dest: str
    data: bytes = field(repr=False)


@dataclass(frozen=True)
class CopyFrom:
    """A file or folder made by an earlier stage of the same build, placed at an absolute path."""

    stage: str
    source: str
    dest: str


@dataclass(frozen=True)
class Help:
    """What the image is, for `apptainer run-help` (no Dockerfile instruction)."""

    text: str


@dataclass(frozen=True)
class Test:
    """A check of the finished image, for `apptainer test` (the Dockerfile RUNs it at build)."""

    command: str


Instruction = From | Arg | Run | Env | Label | Copy | CopyFrom | Help | Test


@dataclass(frozen=True)
class Block:
    """One building block's instructions, tagged with the build phase they belong to."""

    phase: str
    items: tuple[Instruction, ...]


@dataclass(frozen=True)
class Stage:
    """One stage of a build: its blocks, from its own From; named when a later stage copies
    from it (the image is the last stage)."""

    name: str | None
    blocks: tuple[Block, ...]
