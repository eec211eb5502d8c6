"""launcher/guard.py: the allow-lists' own rules, beside the hostile cases of
tests/unit/test_trust_round_two.py."""

from __future__ import annotations

import pytest
from hvd_container.launcher import guard


@pytest.mark.parametrize(
    "name",
    ["NCCL_SOCKET_IFNAME", "NCCL_NET", "NCCL_IB_HCA", "FI_CXI_RX_MATCH_MODE", "FI_PROVIDER",
     "UCX_TLS", "CUDA_VISIBLE_DEVICES", "HOROVOD_LOG_LEVEL", "HOROVOD_FUSION_THRESHOLD",
     "OMPI_MCA_btl", "OMPI_MCA_btl_tcp_if_include", "PMIX_MCA_gds", "MPICH_GPU_SUPPORT_ENABLED",
     "OMP_NUM_THREADS", "GLOO_SOCKET_IFNAME", "SINGULARITYENV_NCCL_DEBUG"],
)  # fmt: skip
def test_tuning_variables_are_allowed(name: str) -> None:
    assert guard.env_refusal(name) is None


@pytest.mark.parametrize(
    ("name", "trustable"),
    [("NCCL_NET_PLUGIN", True), ("HOROVOD_AUTOTUNE_LOG", True), ("OMPI_MCA_plm_rsh_agent", True),
     ("MASTER_ADDR", False), ("APPTAINERENV_MASTER_PORT", False), ("OMPI_MCA_btlx", True)],
)  # fmt: skip
def test_other_variables_are_refused_and_the_rendezvous_even_when_trusted(
    name: str, trustable: bool
) -> None:
    refusal = guard.env_refusal(name)
    assert refusal is not None and refusal.trustable is trustable


@pytest.mark.parametrize(
    ("entry", "command", "why"),
    [("-ED/dir", "srun", "--preserve-env"), ("-vo/x", "srun", "--output is set by the tool"),
     ("--expo=ALL", "srun", "--export"), ("--c=1", "srun", "ambiguous"),
     ("--mem", "srun", "takes a value"), ("-w", "sbatch", "takes a value"),
     ("--exclusive=user", "srun", None), ("-K1", "srun", None), ("-vK", "srun", None),
     ("--wrap=id", "srun", "has no option"), ("--mem-bind=local extra", "srun", None)],
)  # fmt: skip
def test_an_entry_is_read_whole_as_getopt_long_reads_it(
    entry: str, command: str, why: str | None
) -> None:
    refusal = guard.slurm_entry_refusal(entry, command)
    if why is None:
        assert refusal is None, refusal
    else:
        assert refusal is not None and why in refusal.why, refusal


@pytest.mark.parametrize(
    ("dest", "refused"),
    [("/scratch", False), ("/data/x", False), ("/home/u", False), ("/usr", True),
     ("/usr/local/bin", True), ("/opt/venv", True), ("/etc/ld.so.preload", True), ("/", True),
     ("//usr", True), ("/usr/../usr/bin", True), ("/optx", False), ("/lib64", True)],
)  # fmt: skip
def test_a_bind_may_not_cover_the_image_s_program_folders(dest: str, refused: bool) -> None:
    assert (guard.bind_refusal("/src", dest) is not None) is refused


@pytest.mark.parametrize(
    ("python", "refused"),
    [("python", False), ("python3.12", False), ("/opt/venv/bin/python", False),
     ("/usr/bin/python3", False), ("/tmp/python", True), ("/opt/../tmp/python", True),
     ("/usr/bin/bash", True), ("~/python", True)],
)  # fmt: skip
def test_runtime_python_is_the_image_s(python: str, refused: bool) -> None:
    assert (guard.image_python_refusal(python) is not None) is refused


@pytest.mark.parametrize(
    ("flags", "trustable", "why"),
    [(["--overlay=/x.img"], True, "not an option of apptainer"),
     (["--overlay", "/x.img"], False, "'/x.img': not an option"),
     (["--unknown", "--bind"], False, "--bind needs a value"),
     (["--unknown", "--bind", "/x:/usr"], True, "not an option of apptainer"),
     (["--nv", "image.sif"], False, "'image.sif': not an option")],
)  # fmt: skip
def test_every_runtime_flag_is_judged_and_what_no_trust_allows_wins(
    flags: list[str], trustable: bool, why: str
) -> None:
    from hvd_container.launcher.runtimes.apptainer import ApptainerProfile

    refusal = guard.runtime_flags_refusal(flags, ApptainerProfile.known_flags, "apptainer")
    assert refusal is not None and refusal.trustable is trustable and why in refusal.why, refusal


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ("/etc/hvd/site-keys.asc", False),
        ("/apps/keys/team+ml@site.gpg", False),
        ("keys/site.asc", True),  # relative: read from wherever the launch starts
        ("~/site.asc", True),
        ("$HOME/site.asc", True),
        ("/etc/../root/key.asc", True),
        ("/etc/hvd/key.asc\n--import=/x", True),
        ("/etc/hvd/key .asc", True),
        ("/etc/hvd/key.asc;rm -rf /", True),
        ("/etc/passwd", True),  # not a key file's name
        ("-/x.asc", True),
        ("/etc/hvd/cosign.pem", False),  # a registry image's signer (cosign's PEM key)
        ("cosign.pem", True),
        ("/etc/hvd/cosign.pem;id", True),
        ("/etc/hvd/cosign.pem.sh", True),
    ],
)
def test_a_trusted_key_is_an_absolute_key_file_path_of_plain_characters(
    path: str, refused: bool
) -> None:
    assert (guard.key_file_refusal(path) is not None) == refused
