"""The checks `doctor` and every launch share (launcher/checks/registry.py), on the sites' profiles:
MPI ABI against what the runtime injects, CUDA against the nodes' driver, NCCL's network,
the Gloo controller, where the image lies, and the arch of a SIF made without our labels."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from _launch_helpers import isolated, plan_launch  # noqa: F401
from hvd_container.containers.sif import format as fmt
from hvd_container.containers.sif.layout import DataObject, sif_prefix
from hvd_container.launcher.checks.registry import Result, driver_at_least
from hvd_container.launcher.plan.image import read_facts
from hvd_container.launcher.plan.planner import plan as planned
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.sites.loader import load_site
from hvd_container.launcher.sites.model import Site

from hvd_container.core.errors import UserError
from hvd_container.facts import ImageFacts, facts_from_labels

OMPI = ImageFacts(
    source="image ompi.sif", arch="amd64", mpi_pmi=("pmix",), controllers=("mpi", "gloo"),
    mpi_family="openmpi", gpu=True, cuda="13.0",
)  # fmt: skip
MPICH = dataclasses.replace(OMPI, source="image mpich.sif", mpi_pmi=("pmi2",), mpi_family="mpich")


def plan(site: str, **fields: Any):  # type: ignore[no-untyped-def]
    fields = {"script": "train.py", **fields}
    return plan_launch(load_site(site), LaunchRequest(**fields))


def doctor_results(site: str | Site, **fields: Any) -> dict[str, Result]:
    """Every check's result for the launch, as doctor sees them (it goes on past failures)."""
    fields = {"script": "train.py", **fields}
    profile = load_site(site) if isinstance(site, str) else site
    done = planned(profile, LaunchRequest(**fields), dry_run=True, keep_going=True)
    return {r.check: r for r in done.results}


def with_values(site: str, **values: Any) -> Site:
    """A built-in profile with some of its values changed (as a user's own copy would)."""
    return load_site(site).model_copy(update=values)


def test_cray_mpich_does_not_replace_open_mpi() -> None:
    found = doctor_results("perlmutter", image="u/i:t", nodes=2, account="m1_g", facts=OMPI)
    abi = found["mpi-abi"]
    assert abi.status == "warn"
    assert (
        "has openmpi (libmpi.so.40), so its ranks use the image's own MPI over TCP" in abi.message
    )
    # an MPICH image is what Cray MPICH replaces; a Gloo launch uses no MPI at all
    mpich = doctor_results("perlmutter", image="u/i:t", nodes=2, account="m1_g", facts=MPICH)
    assert mpich["mpi-abi"].status == "pass"
    gloo = doctor_results(
        "perlmutter", image="u/i:t", nodes=2, account="m1_g", facts=OMPI, controller="gloo"
    )
    assert gloo["mpi-abi"] == Result("mpi-abi", "skip", "the launch uses no MPI between tasks")


def test_cuda_13_image_on_an_older_driver_is_refused() -> None:
    site = load_site("zih-alpha")
    assert site.gpu_driver is None  # not published: doctor asks nvidia-smi where it can
    old = with_values("zih-alpha", name="old", gpu_driver="535.104")  # CUDA 12.2's driver
    request = LaunchRequest(script="t.py", image="/data/x.sif", nodes=1, facts=OMPI)
    with pytest.raises(UserError) as info:
        plan_launch(old, request)
    assert str(info.value) == (
        "image ompi.sif is built for CUDA 13.0, which needs NVIDIA driver >= 580.65.06; site "
        "old's profile (gpu_driver) has 535.104: build the image for CUDA 12"
    )
    new = with_values("zih-alpha", gpu_driver="580")
    assert (
        doctor_results(new, image="/data/x.sif", nodes=1, facts=OMPI)["cuda-driver"].status
        == "pass"
    )
    cpu_site = with_values("local", gpu_driver="535.104")
    no_gpus = doctor_results(cpu_site, image="/data/x.sif", nodes=1, facts=OMPI)
    assert no_gpus["cuda-driver"] == Result("cuda-driver", "n/a", "the job asks for no GPUs")
    unknown = doctor_results("zih-alpha", image="/data/x.sif", nodes=1, facts=OMPI)
    assert unknown["cuda-driver"].status == "skip"  # no driver known: not judged, not passed
    assert driver_at_least("525.60.13", "525.60.13")
    assert not driver_at_least("450.80.01", "450.80.02")


def test_gpu_image_without_gpus_is_warned() -> None:
    result = plan("local", image="/srv/x.sif", nodes=1, facts=OMPI)
    assert any("is a CUDA image but the job asks for no GPUs" in w for w in result.warnings)


def test_forced_nccl_net_without_the_plugin_module_fails_at_once() -> None:
    # Perlmutter's shifter names an NCCL module, which brings the plugin: nothing to say
    found = doctor_results("perlmutter", image="u/i:t", nodes=2, account="m1_g", facts=MPICH)
    assert found["nccl-network"].status == "n/a"
    forced = {"NCCL_NET": "AWS Libfabric"}
    found = doctor_results(
        "perlmutter", image="u/i:t", nodes=2, account="m1_g", facts=MPICH, env=forced
    )
    assert found["nccl-network"].status == "pass"
    runtime = load_site("perlmutter").runtime.model_copy(update={"modules": ["gpu"]})
    no_plugin = with_values("perlmutter", runtime=runtime)
    missing = doctor_results(
        no_plugin, image="u/i:t", nodes=2, account="m1_g", facts=MPICH, env=forced
    )
    assert missing["nccl-network"].status == "fail"
    assert "shifter gets no nccl module" in missing["nccl-network"].message
    undeclared = with_values("neuron", nccl_finds_network=False)
    unforced = doctor_results(undeclared, image="x.sif", nodes=2, comment="field=ai;appl=pytorch")[
        "nccl-network"
    ]
    assert unforced.status == "warn" and "sets no NCCL_NET" in unforced.message
    said = doctor_results("neuron", image="x.sif", nodes=2, comment="field=ai;appl=pytorch")
    assert said["nccl-network"].status == "n/a"
    assert (
        "NCCL finds its network there by itself (Neuron's user guide"
        in said["nccl-network"].message
    )
    one_node = doctor_results("neuron", image="x.sif", nodes=1, comment="field=ai;appl=pytorch")
    assert one_node["nccl-network"] == Result("nccl-network", "n/a", "a single-node launch")


def test_gloo_launch_of_an_image_without_gloo_is_refused() -> None:
    no_gloo = dataclasses.replace(OMPI, controllers=("mpi",))
    with pytest.raises(UserError) as info:
        plan("local", image="/srv/x.sif", nodes=2, controller="gloo", facts=no_gloo)
    assert str(info.value).startswith(
        "image ompi.sif builds Horovod without the Gloo controller (it has mpi): pass "
        "--controller mpi"
    )


def test_image_outside_the_shared_file_systems(tmp_path: Path) -> None:
    shared, other = tmp_path / "shared", tmp_path / "other"
    for folder in (shared, other):
        folder.mkdir()
        (folder / "x.sif").write_bytes(b"")
    site = with_values("zih-alpha", name="s", shared_paths=[str(shared)])
    outside = str(other / "x.sif")
    with pytest.raises(UserError, match=rf"^image {outside} is outside site s's shared file"):
        plan_launch(site, LaunchRequest(script="t.py", image=outside, nodes=1))
    assert plan_launch(site, LaunchRequest(script="t.py", image=str(shared / "x.sif"), nodes=1))
    # unknown shared places: the usual node-local ones (this test's folder is in /tmp)
    result = plan("zih-alpha", image=outside, nodes=1)
    assert any(f"image {outside} is in a node-local place" in w for w in result.warnings)
    # an image that is not here is not judged (a dry run may name one on the cluster)
    assert not any("node-local" in w for w in plan("zih-alpha", image="/tmp/nope.sif").warnings)
    # the local cluster's nodes share this machine's files
    assert load_site("local").shared_paths == ["/"]


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        (
            "gpu_driver",
            '"abc"',
            'not allowed (allowed: an NVIDIA driver version such as "535" or "550.127.05") (got \'abc\')',
        ),
        (
            "gpu_driver",
            '"5"',
            'not allowed (allowed: an NVIDIA driver version such as "535" or "550.127.05") (got \'5\')',
        ),
        ("shared_paths", "[data]", "absolute paths, not 'data'"),
    ],
)
def test_site_fields_are_checked(tmp_path: Path, key: str, value: str, why: str) -> None:
    profile = tmp_path / "bad.yaml"
    profile.write_text(f"name: bad\nruntime: {{kind: apptainer}}\n{key}: {value}\n")
    with pytest.raises(UserError) as info:
        load_site(str(profile))
    assert str(info.value) == f"{profile}:3: {key}: {why}"


def _bare_sif(path: Path, arch: str) -> Path:
    """A SIF as siftool makes it: a partition and its arch, no labels of ours."""
    payload = b"hsqs" + bytes(4092)
    prefix = sif_prefix(
        [DataObject(fmt.DATA_GENERIC, b"x", name="note")],
        partition_size=len(payload), arch=arch, created=1700000000, image_id=uuid.UUID(int=5),
    )  # fmt: skip
    path.write_bytes(prefix + payload)
    return path


def test_arch_of_a_sif_without_labels_is_read_from_its_descriptor(tmp_path: Path) -> None:
    sif = _bare_sif(tmp_path / "p9.sif", "ppc64le")
    facts = read_facts(str(sif), ask_docker=False)
    assert facts is not None and facts.arch == "ppc64le" and facts.mpi_pmi is None
    request = LaunchRequest(script="t.py", image=str(sif), nodes=1)  # facts from the file
    with pytest.raises(UserError, match=r"p9.sif is built for ppc64le but site zih-alpha runs"):
        plan_launch(load_site("zih-alpha"), request)


def test_gpu_launch_of_horovod_without_nccl_is_warned() -> None:
    no_nccl = dataclasses.replace(OMPI, tensor_ops=("gloo", "mpi"))
    found = doctor_results("zih-alpha", image="/data/x.sif", nodes=1, facts=no_nccl)
    assert found["gpu-operations"].status == "warn"
    assert "has Horovod without NCCL" in found["gpu-operations"].message
    nccl = dataclasses.replace(OMPI, tensor_ops=("nccl",))
    found = doctor_results("zih-alpha", image="/data/x.sif", nodes=1, facts=nccl)
    assert found["gpu-operations"].status == "pass"
    cpu_only = doctor_results("local", image="/srv/x.sif", nodes=1, facts=no_nccl)
    assert cpu_only["gpu-operations"].status == "n/a"  # no GPUs asked for: the rule does not apply
    labels = {
        "org.hvd-container.horovod.tensor_ops": "gloo,mpi,nccl",
        "org.hvd-container.arch": "amd64",
    }
    facts = facts_from_labels(labels, "image x")
    assert facts is not None and facts.tensor_ops == ("gloo", "mpi", "nccl")


def test_an_image_older_than_the_injected_libraries_is_refused() -> None:
    """Perlmutter's glibc (2.31) rests on an unconfirmed source: a warning there, not a
    refusal (tests/unit/launcher/sites/test_unconfirmed_facts.py has the refusal of a confirmed one)."""
    perlmutter = load_site("perlmutter")
    assert perlmutter.runtime.injects_glibc == "2.31"
    old = dataclasses.replace(MPICH, glibc="2.28")  # Debian 10, CentOS 8
    found = doctor_results("perlmutter", image="u/i:t", nodes=2, account="m1_g", facts=old)
    assert found["glibc"].status == "warn" and found["glibc"].message.startswith(
        "image mpich.sif has glibc 2.28, but the libraries shifter injects need glibc >= 2.31"
    )
    assert found["glibc"].message.endswith(
        "(unconfirmed: `hvd-container sites show perlmutter --sources`)"
    )
    new = dataclasses.replace(MPICH, glibc="2.36")
    found = doctor_results("perlmutter", image="u/i:t", nodes=2, account="m1_g", facts=new)
    assert found["glibc"].status == "pass"
    found = doctor_results("perlmutter", image="u/i:t", nodes=2, account="m1_g", facts=MPICH)
    assert found["glibc"].status == "skip"  # not known: not judged


def test_the_general_checks_come_first_whichever_module_loads_first() -> None:
    """The site model loads the runtimes (and so their checks) before launcher/checks/registry.py:
    the order of the checks, and so which failure a launch reports first, stays general, then the
    runtimes', then the controllers'."""
    code = (
        "import hvd_container.launcher.sites.model\n"
        "from hvd_container.launcher.checks import registry\n"
        "print(*[c.owner.split('.')[2] for c in registry.registry()])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    owners = done.stdout.split()
    groups = [0 if o == "checks" else 1 if o == "runtimes" else 2 for o in owners]
    assert groups == sorted(groups) and groups[0] == 0 and groups[-1] == 2, owners


def test_podman_hpcs_openmpi_pmix_module_is_warned_of_with_the_pmi2_fix() -> None:
    """NERSC/podman-hpc issue 158 (open): --openmpi-pmix under srun --mpi=pmix fails at NERSC,
    --openmpi-pmi2 under --mpi=pmi2 works."""
    site = load_site("perlmutter")
    podman = next(r for r in site.other_runtimes if r.kind == "podman-hpc")
    for module, status in (("openmpi-pmix", "warn"), ("openmpi-pmi2", "n/a")):
        entry = podman.model_copy(update={"mpi_module": module})
        profile = site.model_copy(update={"runtime": entry, "other_runtimes": []})
        found = doctor_results(profile, image="u/i:t", nodes=2, account="m1_g")
        assert found["podman-hpc-mpi"].status == status, found["podman-hpc-mpi"]
    pmix = site.model_copy(
        update={"runtime": podman.model_copy(update={"mpi_module": "openmpi-pmix"})}
    )
    message = doctor_results(pmix, image="u/i:t", nodes=2, account="m1_g")["podman-hpc-mpi"].message
    assert "issues/158" in message and "mpi_module: openmpi-pmi2 (srun --mpi=pmi2)" in message


@pytest.mark.parametrize(
    "name", ["local", "neuron", "perlmutter", "zih-alpha", "zih-capella", "zih-ml"]
)
def test_a_default_job_at_a_built_in_site_hears_nothing_of_its_profile(
    name: str, tmp_path: Path
) -> None:
    """Two nodes, every controller: the only warnings are about the user's image (not here;
    Shifter's pull), none about the profile the tool ships (the NCCL ones were: neuron and the
    ZIH sites say, with a source, that NCCL finds InfiniBand there by itself)."""
    from hvd_container.launcher import controllers

    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    site = load_site(name)
    extra: dict[str, Any] = {
        "perlmutter": {"account": "m1_g", "image": "u/i:t"},
        "neuron": {"comment": "field=nlp;appl=pytorch"},
    }.get(name, {})
    for controller in controllers.names():
        request = {"image": str(tmp_path / "x.sif"), "nodes": 2, "controller": controller, **extra}
        launch = planned(site, LaunchRequest(script=str(script), **request), dry_run=True)
        warned = {r.check for r in launch.results if r.status == "warn" and not r.acknowledged}
        assert warned <= {"image", "image-pulled"}, (controller, launch.warnings)


def test_an_image_on_a_file_system_the_site_asks_not_to_work_from_is_warned_of(
    tmp_path: Path,
) -> None:
    """Capella's compendium: horse is not for work there (cat is). The built-in profile names
    /data/horse; here a folder of this machine stands in for it."""
    assert "/data/horse" in load_site("zih-capella").images.not_for_work
    image = tmp_path / "horse" / "x.sif"
    image.parent.mkdir()
    image.write_bytes(b"not judged here")
    images = load_site("zih-capella").images.model_copy(
        update={"not_for_work": {str(image.parent): "keep images on /data/cat"}}
    )
    site = with_values("zih-capella", images=images)
    found = doctor_results(site, image=str(image), nodes=1)["image-location"]
    assert found.status == "warn"
    assert found.message == (
        f"image {image} is on {image.parent}, which site zih-capella asks not to work from: "
        "keep images on /data/cat"
    )
    # the built-in list: this machine's /tmp is no horse (the node-local rule speaks there)
    elsewhere = doctor_results(with_values("zih-capella"), image=str(image), nodes=1)
    assert "asks not to work from" not in elsewhere["image-location"].message


def test_a_launch_for_one_site_from_another_clusters_slurm_is_refused(
    monkeypatch: pytest.MonkeyPatch,
    isolated: Path,  # noqa: F811
) -> None:
    """`run --site perlmutter` where Slurm says another ClusterName went on to sbatch with
    Perlmutter's options (doctor already knew): refused where it submits, a warning inside an
    allocation; where the name is not known it is not judged."""
    from hvd_container.launcher.sites.machine import ThisMachine

    machine = ThisMachine()
    # what else this machine would be asked (srun, nvidia-smi, shifterimg), answered at once
    machine.__dict__.update(srun_mpi_plugins=["pmi2"], nvidia_driver=None)
    machine.listings[("shifterimg", "images")] = None

    def judged(**fields: Any) -> Result:
        request = LaunchRequest(script="train.py", image="u/i:t", nodes=2, account="m1_g", **fields)
        done = planned(load_site("perlmutter"), request, keep_going=True, machine=machine)
        return next(r for r in done.results if r.check == "cluster")

    monkeypatch.setenv("SLURM_CLUSTER_NAME", "neuron")
    submitted = judged()
    assert submitted.status == "fail"
    assert submitted.message.startswith(
        "this machine's Slurm is cluster neuron, not site perlmutter's (perlmutter): "
    )
    assert judged(inside_allocation=True).status == "warn"
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "perlmutter")
    assert judged().status == "pass"
    monkeypatch.delenv("SLURM_CLUSTER_NAME")
    assert judged().status == "skip"  # the isolated tests' slurm.conf does not exist


def test_a_cluster_name_from_an_unconfirmed_source_warns_instead_of_refusing(
    monkeypatch: pytest.MonkeyPatch,
    isolated: Path,  # noqa: F811
) -> None:
    """JUPITER's ClusterName is not confirmed: a launch where Slurm says another is warned of,
    with how to confirm the name, never refused on the profile's guess."""
    from hvd_container.launcher.sites.machine import ThisMachine

    machine = ThisMachine()
    machine.__dict__.update(srun_mpi_plugins=["pmi2"], nvidia_driver=None)
    machine.listings[("shifterimg", "images")] = None
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "jpbooster")
    request = LaunchRequest(script="train.py", image="x.sif", nodes=2, account="p")
    done = planned(load_site("jupiter"), request, keep_going=True, machine=machine)
    found = next(r for r in done.results if r.check == "cluster")
    assert found.status == "warn"
    assert found.message.startswith(
        "this machine's Slurm is cluster jpbooster, not site jupiter's (jupiter): "
    )
    assert found.message.endswith("(unconfirmed: `hvd-container sites show jupiter --sources`)")
