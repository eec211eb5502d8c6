"""containers/convert/publisher.py: the site runtimes `convert --to` publishes to, each
declared in its own module and found there."""

from __future__ import annotations

import pytest
from hvd_container.containers.convert import podman_hpc, shifter
from hvd_container.containers.convert.options import check_flags
from hvd_container.containers.convert.publisher import publishers
from hvd_container.containers.convert.targets import TARGETS

from hvd_container.core.errors import UserError


def test_each_site_runtime_declares_its_target_tool_and_fetch_in_its_module() -> None:
    found = publishers()
    assert found == {"podman-hpc": podman_hpc.PUBLISHER, "shifter": shifter.PUBLISHER}
    assert (found["shifter"].tool, found["podman-hpc"].tool) == ("shifterimg", "podman-hpc")
    assert found["shifter"].fetch is shifter.fetch


def test_the_targets_and_the_site_flags_come_from_the_publishers() -> None:
    assert TARGETS == ("sif", "podman-hpc", "shifter", "def")
    for target in publishers():
        check_flags(target, "native", {"--site": "s", "--registry": "r", "--login-host": "h"})
    with pytest.raises(UserError, match=r"^--registry: not used with --to sif --engine native \(only with --to podman-hpc or --to shifter\)"):  # fmt: skip
        check_flags("sif", "native", {"--registry": "r"})
