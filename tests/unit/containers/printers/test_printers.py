"""The two printers write the same instruction records natively, each refusing what would leave
its line (a line break in a one-line value)."""

from __future__ import annotations

import pytest
from hvd_container.containers.instructions import (
    Arg,
    Block,
    Copy,
    Env,
    From,
    Help,
    Label,
    Run,
    Stage,
)
from hvd_container.containers.instructions import Test as CheckRecord  # not a test class
from hvd_container.containers.printers import LINE_BREAKS
from hvd_container.containers.printers.dockerfile import dockerfile
from hvd_container.containers.printers.singularity import definition
from hvd_container.containers.recipe_loader import load_recipe
from hvd_container.containers.render import render_definition

from hvd_container.core.errors import UserError

BASE = Block("base", (From("debian:bookworm"), Arg("DEBIAN_FRONTEND", "noninteractive")))


def blocks(*items: object) -> list[Block]:
    return [BASE, Block("extras", tuple(items))]  # type: ignore[arg-type]


def test_one_set_of_records_in_both_formats() -> None:
    records = blocks(
        Help("an image"),
        Copy("tool", "/usr/local/bin/tool", b"#!/bin/sh\necho hi\n"),
        Run(("apt-get update", "true")),
        Env("A", "x y"),
        Env("PATH", "/opt/bin:$PATH", quoted=False),
        Label("team", "ml infra"),
        CheckRecord("tool"),
    )
    assert dockerfile(["made here"], [Stage(None, tuple(records))]).text == (
        "# made here\n"
        "# hvd-container phase: base\nFROM debian:bookworm\nARG DEBIAN_FRONTEND=noninteractive\n"
        "\n# hvd-container phase: extras\nCOPY tool /usr/local/bin/tool\n"
        "RUN apt-get update \\\n    && true\n"
        'ENV A="x y"\nENV PATH=/opt/bin:$PATH\nLABEL team="ml infra"\n'
    )
    assert definition(["made here"], records) == (
        "Bootstrap: docker\nFrom: debian:bookworm\n\n%help\n    an image\n\n"
        "%labels\nteam ml infra\n\n"
        '%environment\nexport A="x y"\nexport PATH=/opt/bin:$PATH\n\n'
        "%post\nset -e\nmkdir -p /usr/local/bin\ncat > /usr/local/bin/tool <<'HVD_CONTAINER_EOF'\n#!/bin/sh\necho hi\n"
        "HVD_CONTAINER_EOF\n# made here\n"
        "# hvd-container phase: base\nexport DEBIAN_FRONTEND=noninteractive\n\n"
        "# hvd-container phase: extras\napt-get update \\\n&& true\n"
        'export A="x y"\nexport PATH=/opt/bin:$PATH\n\n'
        '%runscript\nif [ "$#" -eq 0 ]; then\n    exec /bin/bash\nfi\nexec "$@"\n\n%test\ntool\n'
    )


@pytest.mark.parametrize("brk", LINE_BREAKS)
@pytest.mark.parametrize(
    "record",
    [
        lambda v: Run((f"echo {v}",)),
        lambda v: Label("k", v),
        lambda v: Label(v, "x"),
        lambda v: Env(v, "x"),
        lambda v: Env("K", v, quoted=False),
        lambda v: Env("K", v),
        lambda v: Help(v),
        lambda v: CheckRecord(v),
    ],
)
def test_a_line_break_in_a_one_line_value_is_refused_by_both(brk: str, record: object) -> None:
    item = record(f"a{brk}%setup")  # type: ignore[operator]
    printers = (lambda found: dockerfile([], [Stage(None, tuple(found))]), definition)
    for printer in printers:
        try:
            text = printer([], blocks(item)) if printer is definition else printer(blocks(item))
        except UserError as exc:
            assert "line break" in str(exc)
            continue
        # only where the format has no such line (a Help or Test in a Dockerfile)
        assert printer is not definition and isinstance(item, (Help, CheckRecord)), text


def test_a_copied_file_with_the_heredoc_end_line_is_refused() -> None:
    item = Copy("f", "/f", b"x\nHVD_CONTAINER_EOF\ny\n")
    with pytest.raises(UserError, match="HVD_CONTAINER_EOF"):
        definition([], blocks(item))


def test_debootstrap_base_and_its_docker_bootstrap() -> None:
    recipe = load_recipe("cpu-bookworm")
    assert render_definition(recipe).startswith(
        "Bootstrap: debootstrap\nOSVersion: bookworm\nMirrorURL: http://deb.debian.org/debian\n\n"
    )
    docker = render_definition(recipe, docker_bootstrap=True)
    assert docker.startswith("Bootstrap: docker\nFrom: debian:bookworm\n\n%help\n")
    assert docker.split("\n", 3)[3] == render_definition(recipe).split("\n", 4)[4]
