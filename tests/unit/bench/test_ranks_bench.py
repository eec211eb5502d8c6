"""bench/_ranks.py: what the launch benchmark reads of a running rank, and how it says where
the container's rank and the host's differ. The watch itself is run on a real process here."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from _bench_scripts import load_bench

MAPS = """\
7f00-7f01 r-xp 00000000 08:01 11 /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_pml_ob1.so
7f01-7f02 r--p 00000000 08:01 12 /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_tcp.so
7f02-7f03 r--p 00001000 08:01 12 /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_tcp.so
7f03-7f04 rw-p 00000000 00:00 0 [heap]
7f04-7f05 r--p 00000000 08:01 13 /opt/venv/lib/python3.11/site-packages/torch/lib/libc10.so
7f05-7f06 r--p 00000000 08:01 14 /usr/bin/python3.11
7f06-7f07 r--p 00000000 00:01 15 /dev/shm/vader_segment.node1.0 (deleted)
7f07-7f08 r--p 00000000 08:01 16 /etc/ld.so.cache
"""


@pytest.fixture(scope="module")
def ranks() -> ModuleType:
    return load_bench("_ranks.py")


def test_the_shared_objects_of_a_maps_text_by_name(ranks: ModuleType) -> None:
    found = ranks.mapped_objects(MAPS)
    assert found == {
        "mca_pml_ob1.so": "/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_pml_ob1.so",
        "mca_btl_tcp.so": "/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_btl_tcp.so",
        "libc10.so": "/opt/venv/lib/python3.11/site-packages/torch/lib/libc10.so",
    }


def test_the_view_is_the_set_that_lasted_longest_not_init_or_finalize(ranks: ModuleType) -> None:
    view = ranks.RankView(
        seen={"libmpi.so": "1:a", "mca_pml_ob1.so": "2:b", "mca_pml_cm.so": "3:c"}
    )
    selecting = {"libmpi.so": "/x", "mca_pml_ob1.so": "/y", "mca_pml_cm.so": "/z"}
    training = {"libmpi.so": "/x", "mca_pml_ob1.so": "/y"}
    finalized = {"libmpi.so": "/x"}
    for objects in [selecting, training, training, training, finalized, finalized]:
        ranks.keep_longest(view, objects)
    assert set(view.libraries) == {"libmpi.so", "mca_pml_ob1.so"}


def test_a_rank_is_python_running_the_script_not_the_programs_that_name_it(
    ranks: ModuleType,
) -> None:
    assert ranks.is_rank(
        b"/opt/venv/bin/python\0examples/ddp_synthetic.py\0--epochs\0", "ddp_synthetic.py"
    )
    assert ranks.is_rank(b"python3.11\0-u\0/scratch/u/ddp_synthetic.py\0", "ddp_synthetic.py")
    assert not ranks.is_rank(b"srun\0--mpi=pmix\0python\0ddp_synthetic.py\0", "ddp_synthetic.py")
    assert not ranks.is_rank(
        b"/usr/bin/ch-run\0/img\0--\0python\0ddp_synthetic.py\0", "ddp_synthetic.py"
    )
    assert not ranks.is_rank(b"python\0bench/launch.py\0", "ddp_synthetic.py")


def view(ranks: ModuleType, libraries: dict[str, str], **kw: object) -> object:
    base = {"threads": 4, "cpus": "0-1", "env": {"OMP_NUM_THREADS": "1"}}
    return ranks.RankView(libraries=libraries, **{**base, **kw})


def test_two_alike_ranks_are_said_to_be_alike(ranks: ModuleType) -> None:
    libs = {"mca_pml_ob1.so": "10:aa", "mca_btl_tcp.so": "20:bb", "libc10.so": "30:cc"}
    lines = ranks.compare(view(ranks, libs), view(ranks, dict(libs)))
    assert lines[0].startswith("shared objects: container 3, host 3; 3 the same file")
    assert "0 of the same name differ, 0 only in the container, 0 only on the host" in lines[0]
    assert (
        "Open MPI transport components in use: container btl tcp, pml ob1; host btl tcp, pml ob1"
        in lines
    )
    assert "threads: container 4, host 4; CPUs allowed: container 0-1, host 0-1" in lines
    assert not any("differs:" in line for line in lines)


def test_each_difference_is_named(ranks: ModuleType) -> None:
    container = view(ranks, {"mca_pml_ob1.so": "10:aa", "libc10.so": "30:cc"})
    host = view(
        ranks,
        {"mca_pml_cm.so": "11:dd", "mca_mtl_ofi.so": "12:ee", "libc10.so": "31:ff"},
        threads=6,
        env={"OMP_NUM_THREADS": "2"},
    )
    text = "\n".join(ranks.compare(container, host))
    assert "  differ: libc10.so" in text
    assert "  container only: mca_pml_ob1.so" in text
    assert "  host only: mca_mtl_ofi.so, mca_pml_cm.so" in text
    assert "components in use: container pml ob1; host mtl ofi, pml cm" in text
    assert "threads: container 4, host 6" in text
    assert "differs: OMP_NUM_THREADS: container '1', host '2'" in text


def test_a_variable_named_as_the_same_by_design_is_not_a_difference(ranks: ModuleType) -> None:
    libs = {"libc10.so": "30:cc"}
    host = view(ranks, libs, env={"OMP_NUM_THREADS": "1", "OMPI_MCA_mca_base_param_files": "/x"})
    lines = ranks.compare(
        view(ranks, libs), host, same_by=frozenset({"OMPI_MCA_mca_base_param_files"})
    )
    assert not any("differs" in line for line in lines)
    assert not any("differs" not in line and "mca_base_param_files" in line for line in lines)


def test_an_unread_side_is_not_called_alike(ranks: ModuleType) -> None:
    lines = ranks.compare(ranks.RankView(), view(ranks, {"libc10.so": "30:cc"}))
    assert lines == ["could not read a rank of each side from /proc: nothing compared"]


def test_only_the_steering_variables_are_kept(ranks: ModuleType) -> None:
    environ = b"OMPI_MCA_pml=ob1\0PMIX_RANK=0\0OMP_NUM_THREADS=1\0HOME=/root\0NCCL_DEBUG=INFO\0"
    assert ranks.steering_env(environ) == {
        "OMPI_MCA_pml": "ob1",
        "OMP_NUM_THREADS": "1",
        "NCCL_DEBUG": "INFO",
    }


def test_the_watch_reads_a_real_running_python(ranks: ModuleType, tmp_path: Path) -> None:
    script = tmp_path / "rank_under_watch.py"
    script.write_text(
        "import ctypes, threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()\ntime.sleep(60)\n"
    )
    with ranks.RankWatch(script.name) as watch:
        proc = subprocess.Popen([sys.executable, str(script)], env={"OMP_NUM_THREADS": "3"})
        deadline = time.monotonic() + 30

        def settled() -> bool:  # the set of the running script has lasted the most reads
            view = watch.view
            return view.threads >= 2 and any(n.startswith("_ctypes") for n in view.libraries)

        while time.monotonic() < deadline and not settled():
            time.sleep(0.2)
        proc.kill()
        proc.wait()
    seen = watch.view
    assert seen.threads == 2
    assert seen.env == {"OMP_NUM_THREADS": "3"}
    assert any(name.startswith("_ctypes") for name in seen.libraries)
    size, digest = seen.libraries[next(n for n in seen.libraries if n.startswith("_ctypes"))].split(
        ":"
    )
    assert int(size) > 0 and len(digest) == 16
