"""The table of known-bad library versions."""

from __future__ import annotations

from hvd_container import known_bad


def test_nccl_before_2_29_7_is_known_bad_for_average() -> None:
    # 2.28.9: what torch 2.11 carried on the H200 where the Average lost its tail
    [(entry, version)] = known_bad.problems({"nccl": "2.28.9"})
    assert entry is known_bad.NCCL_AVG and version == "2.28.9"
    assert "NVIDIA/nccl issue 1950" in entry.source


def test_fixed_and_unknown_versions_are_not_flagged() -> None:
    assert known_bad.problems({"nccl": "2.29.7"}) == []
    assert known_bad.problems({"nccl": "2.30.7"}) == []  # the project's GPU images
    assert known_bad.problems({"nccl": ""}) == []  # no NCCL in the image
    assert known_bad.problems({"nccl": "unknown"}) == []  # not a version: not judged here
    assert known_bad.problems({}) == []


def test_every_entry_names_its_source_and_fix() -> None:
    for entry in known_bad.TABLE:
        assert entry.source and entry.fix and entry.effect
        assert entry.affects(entry.below) is False


def test_nccl_2_28_3_to_2_28_8_is_known_bad_for_nvidias_in_process_restart() -> None:
    """nvidia-resiliency-ext's platform table: avoid NCCL 2.28.3-2.28.8."""
    for version in ("2.28.3", "2.28.8"):
        found = [entry for entry, _v in known_bad.problems({"nccl": version})]
        assert found == [known_bad.NCCL_AVG, known_bad.NCCL_INPROCESS], version
    for version in ("2.28.2", "2.28.9"):  # on either side: the Average's entry only
        assert [e for e, _v in known_bad.problems({"nccl": version})] == [known_bad.NCCL_AVG]
    assert "nvidia-resiliency-ext" in known_bad.NCCL_INPROCESS.source
