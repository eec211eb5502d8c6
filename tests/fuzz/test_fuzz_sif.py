"""Mutated SIF files through `hvd-container inspect`: exit 0 or 2, one line on error, no
traceback, nothing raw on the terminal. Seeds: a SIF from the project's own writer and one
made by siftool (tests/fuzz/data/siftool-small.sif: a squashfs partition and a labels object)."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import time
import uuid
from pathlib import Path

from hvd_container.containers.sif import format as fmt
from hvd_container.containers.sif.layout import DataObject, sif_prefix
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hvd_container.cli.app import main

UNSAFE = [chr(c) for c in [*range(0, 9), *range(11, 32), 127, *range(0x80, 0xA0)]] + ["\u202e"]


def _own_writer_seed() -> bytes:
    labels = {"org.hvd-container.recipe.name": "cpu-bookworm", "team": "ml"}
    objects = [
        DataObject(fmt.DATA_DEFFILE, b"bootstrap: docker-daemon\nfrom: x:1\n"),
        DataObject(fmt.DATA_LABELS, json.dumps(labels).encode(), name="labels.json"),
    ]
    prefix = sif_prefix(
        objects, partition_size=64, arch="amd64", created=1, image_id=uuid.UUID(int=7)
    )
    return prefix + b"\0" * 64


SEEDS = [_own_writer_seed(), (Path(__file__).parent / "data" / "siftool-small.sif").read_bytes()]
HEADER_AND_TABLE = 4096  # where mutations matter most: the header and the descriptor table

mutation = st.tuples(
    st.integers(0, HEADER_AND_TABLE * 2),
    st.one_of(
        st.binary(min_size=1, max_size=8),
        st.sampled_from([b"\xff" * 8, b"\x00" * 8, (2**63 - 1).to_bytes(8, "little"), b"\x1b]0;x\x07", b'"\\ud800"', b"9" * 8]),
    ),
)  # fmt: skip


def _inspect(data: bytes, *extra: str) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.sif"
        path.write_bytes(data)
        out, err = io.StringIO(), io.StringIO()
        started = time.monotonic()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["inspect", str(path), *extra])
        assert time.monotonic() - started < 10, "inspect must end in bounded time"
        return code, out.getvalue(), err.getvalue()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.sampled_from(range(len(SEEDS))),
    mutations=st.lists(mutation, max_size=6),
    cut=st.one_of(st.none(), st.integers(0, 40000)),
    as_json=st.booleans(),
)
def test_a_mutated_sif_is_read_or_refused_in_one_line(
    seed: int, mutations: list[tuple[int, bytes]], cut: int | None, as_json: bool
) -> None:
    data = bytearray(SEEDS[seed])
    for offset, chunk in mutations:
        data[offset : offset + len(chunk)] = chunk
    if cut is not None:
        del data[cut:]
    code, out, err = _inspect(bytes(data), *(["--json"] if as_json else []))
    assert code in (0, 2), err
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("hvd-container: error: "), err
    assert not any(c in out + err for c in UNSAFE), (out, err)
    if code == 0 and as_json:
        json.loads(out)


def test_both_seeds_are_read() -> None:
    for seed in SEEDS:
        code, out, err = _inspect(seed)
        assert code == 0 and "arch:   amd64" in out, err


label_values = st.recursive(
    st.one_of(
        st.text(st.characters(codec=None, categories=None), max_size=12),
        st.integers(min_value=-(10**30), max_value=10**30),
        st.floats(allow_nan=True),
        st.booleans(),
        st.none(),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    labels=st.dictionaries(st.text(max_size=8), label_values, max_size=4),
    name=st.text(max_size=10),
    as_json=st.booleans(),
)
def test_any_labels_are_printed_safely(labels: dict, name: str, as_json: bool) -> None:  # type: ignore[type-arg]
    body = json.dumps(labels, ensure_ascii=True).encode()  # surrogates travel as \ud800 escapes
    safe_name = name.encode("utf-8", "surrogatepass")[:100]
    objects = [DataObject(fmt.DATA_LABELS, body, name=safe_name.decode("utf-8", "replace"))]
    prefix = sif_prefix(
        objects, partition_size=4, arch="amd64", created=1, image_id=uuid.UUID(int=1)
    )
    code, out, err = _inspect(prefix + b"root", *(["--json"] if as_json else []))
    assert code in (0, 2), err
    assert not any(c in out + err for c in UNSAFE), (out, err)
