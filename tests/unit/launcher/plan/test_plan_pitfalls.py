"""Every launch mistake caught without a cluster, and every request error: one line, with the fix."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from _launch_helpers import isolated, job_dir, plan_launch, words, write  # noqa: F401
from hvd_container.containers.recipe_loader import read_recipe
from hvd_container.launcher.controllers.lightning import scan_script
from hvd_container.launcher.plan.request import LaunchRequest
from hvd_container.launcher.sites.loader import load_site

from hvd_container.core.errors import UserError
from hvd_container.facts import ImageFacts, facts_from_recipe

PMIX_ONLY = ImageFacts(
    source="recipe ompi",
    name="ompi",
    version="1",
    arch="amd64",
    mpi_pmi=("pmix",),
    controllers=("mpi", "gloo"),
)
NO_MPI = ImageFacts(
    source="recipe nompi",
    name="nompi",
    version="1",
    arch="amd64",
    mpi_pmi=(),
    controllers=("gloo",),
)
NO_MPI_NO_GLOO = ImageFacts(
    source="recipe bare", name="bare", version="1", arch="amd64", mpi_pmi=(), controllers=("mpi",)
)
NO_HOROVOD = ImageFacts(
    source="recipe pl", name="pl", version="1", arch="amd64", mpi_pmi=(), controllers=None
)
GLOO_ONLY = ImageFacts(
    source="recipe gl",
    name="gl",
    version="1",
    arch="amd64",
    mpi_pmi=("pmix",),
    controllers=("gloo",),
)


def recipe_facts(name: str) -> ImageFacts:
    return facts_from_recipe(read_recipe(name))


X86 = ImageFacts(source="recipe x86", name="x86", version="1", arch="amd64")


@pytest.fixture(autouse=True)
def images_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The image files and the script the tests name exist in the working directory (as
    user u)."""
    job = tmp_path / "job"
    for name in ("x.sif", "i.sif", "hvd.sif", "pl.sif", "p.sif"):
        write(job / name, "")  # no SIF magic: a file whose facts are unknown
    for name in ("i.sqfs", "x.sqfs", "hvd.sqfs"):
        write(job / name, "hsqs")  # a SquashFS file, which ch-run mounts as it is
    write(job / "train.py", "import horovod.torch as hvd\n")  # the script the tests launch
    monkeypatch.chdir(job)
    monkeypatch.setenv("USER", "u")


def plan(site: str, **fields: Any):  # type: ignore[no-untyped-def]
    fields = {"script": "train.py", **fields}
    return plan_launch(load_site(site), LaunchRequest(**fields))


def warned(result: Any) -> list[str]:
    """The warnings of every check but where the image lies (the tests run under /tmp, which
    the image-location check rightly calls node-local: its own tests are below), whether the
    script is here and whether Shifter has pulled the image (tests/unit/launcher/checks/test_checks_script.py)."""
    mine = ("image-location", "script", "image-pulled")
    return [r.message for r in result.results if r.status == "warn" and r.check not in mine]


def fails(message: str, site: str, **fields: Any) -> None:
    with pytest.raises(UserError) as info:
        plan(site, **fields)
    text = str(info.value)
    assert "\n" not in text
    assert re.search(message, text), text


# --- pitfalls from launch-facts.md -------------------------------------------------------


def test_missing_mandatory_comment() -> None:
    fails(
        r"^site neuron takes --comment in the form field=<field>;appl=<application>, and requires it \(appl allowed: pytorch, pytorch-ddp, pytorch-fsdp, tensorflow, jax, deepspeed, megatron-lm, in_house; field: those `showappl` lists on the site\): pass --comment \"field=<your field>;appl=pytorch\", or set scheduler.comment.field in your own profile$",
        "neuron", image="x.sif", ntasks=8,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("given", "message"),
    [
        # the form used before 2026-08-12, with the fix in the new one
        (
            "pytorch",
            r"^--comment 'pytorch' is the old form, which site neuron refuses: .*; use --comment \"field=<your field>;appl=pytorch\"$",
        ),
        (
            "python",
            r"^--comment 'python' is the old form, which site neuron refuses: .*; use --comment \"field=<your field>;appl=pytorch\"$",
        ),
        (
            "field=nlp;appl=python",
            r"^--comment 'field=nlp;appl=python': appl=python \(no longer accepted\) is not an application of site neuron \(allowed: pytorch, ",
        ),
        (
            "appl=pytorch",
            r"^--comment 'appl=pytorch': site neuron takes --comment in the form field=<field>;appl=<application>; use ",
        ),
        ("field=;appl=pytorch", r"^--comment 'field=;appl=pytorch': field= is empty"),
        (
            "field=nlp;appl=pytorch;x=1",
            r"^--comment 'field=nlp;appl=pytorch;x=1': site neuron takes --comment in the form",
        ),
    ],
)
def test_neuron_takes_only_the_field_appl_comment(given: str, message: str) -> None:
    fails(message, "neuron", image="x.sif", ntasks=8, comment=given)


def test_an_application_neurons_profile_does_not_know_is_said_not_refused() -> None:
    """The site's list grows (a user's note has vllm in `showappl`): an unknown appl is a
    warning that says to run showappl; the form stays mandatory (above)."""
    given = "field=nlp;appl=vllm"
    launch = plan("neuron", image="x.sif", ntasks=8, comment=given)
    said = [
        w for w in warned(launch) if w.startswith(f"--comment {given!r}: appl=vllm is not among")
    ]
    assert said and "run `showappl` there" in said[0], launch.warnings


def test_neuron_comment_gets_the_launchs_application() -> None:
    # a field alone gets the application of the launch (Horovod with PyTorch: pytorch)
    from hvd_container.launcher.plan.request import LaunchOptions, request_from_options

    site, request = request_from_options(
        "t.py",
        options=LaunchOptions(site="neuron", recipe="cpu-bookworm", ntasks=8, comment="field=nlp"),
    )
    result = plan_launch(site, request)
    assert "--comment=field=nlp;appl=pytorch" in words(result)
    # --comment always wins
    given = plan("neuron", image="x.sif", ntasks=8, comment="field=nlp;appl=jax")
    assert "--comment=field=nlp;appl=jax" in words(given)


def test_neuron_comment_from_the_field_of_a_users_profile(tmp_path: Path) -> None:
    path = write(
        tmp_path / "neuron.yaml",
        "extends: neuron\nname: neuron\nscheduler:\n  comment: {field: bio}\n",
    )
    from hvd_container.launcher.plan.request import LaunchOptions, request_from_options

    _site, request = request_from_options(
        "t.py", options=LaunchOptions(recipe="cpu-bookworm", ntasks=8)
    )
    result = plan_launch(load_site(str(path)), request)
    assert "--comment=field=bio;appl=pytorch" in words(result)


def test_a_fields_list_is_checked(tmp_path: Path) -> None:
    """A field the profile's list lacks is said, with showappl (the list grows); not refused."""
    path = write(
        tmp_path / "n.yaml",
        "name: n\nruntime: {kind: none}\nscheduler:\n  comment: {required: true, form: field-appl, allowed: [pytorch], fields: [nlp, bio]}\n",
    )
    launch = plan_launch(
        load_site(str(path)),
        LaunchRequest(script="t.py", ntasks=1, comment="field=chem;appl=pytorch"),
    )
    assert warned(launch) == [
        "--comment 'field=chem;appl=pytorch': field=chem is not among the fields site n's profile knows (allowed: nlp, bio); the site's list grows: run `showappl` there and use a value it shows (your own profile can add it to scheduler.comment.fields)"
    ]


def test_comment_not_needed_inside_an_allocation() -> None:
    assert warned(plan("neuron", image="x.sif", ntasks=8, inside_allocation=True)) == []


def test_comment_default_from_a_profile(tmp_path: Path) -> None:
    path = write(
        tmp_path / "n.yaml",
        "name: n\nruntime: {kind: none}\nscheduler:\n  comment: {required: true, default: pytorch}\n",
    )
    result = plan_launch(load_site(str(path)), LaunchRequest(script="t.py", ntasks=1))
    assert "--comment=pytorch" in words(result)


def test_unofficial_comment_is_a_warning_in_the_word_form(tmp_path: Path) -> None:
    path = write(
        tmp_path / "w.yaml",
        "name: w\nruntime: {kind: none}\nscheduler:\n  comment: {required: true, allowed: [python, pytorch]}\n",
    )
    result = plan_launch(
        load_site(str(path)), LaunchRequest(script="t.py", ntasks=1, comment="horovod")
    )
    assert "--comment=horovod" in words(result)
    assert [w for w in result.warnings if "comment" in w] == [
        "--comment 'horovod' is not in site w's list (allowed: python, pytorch); use one of them, e.g. --comment pytorch"
    ]


def test_perlmutter_account_suffix() -> None:
    missing = plan("perlmutter", image="u/i:t", ntasks=4)
    assert warned(missing) == [
        "no --account: Slurm charges your default project, but GPU jobs on site perlmutter need <project>_g; pass e.g. --account m1234_g"
    ]
    wrong = plan("perlmutter", image="u/i:t", ntasks=4, account="m1234")
    assert warned(wrong) == [
        "--account m1234: GPU jobs on site perlmutter are charged to <project>_g; use --account m1234_g"
    ]
    assert warned(plan("perlmutter", image="u/i:t", ntasks=4, account="m1234_g")) == []
    assert warned(plan("perlmutter", image="u/i:t", ntasks=4, inside_allocation=True)) == []


def test_lightning_with_ntasks_is_refused_with_the_fix() -> None:
    fails(
        r"^train\.py uses PyTorch Lightning, which refuses srun -n/--ntasks: use -N 2 --ntasks-per-node 4 instead of -n 8$",
        "perlmutter", image="u/i:t", ntasks=8, controller="lightning",
    )  # fmt: skip
    fails(
        r"use -N 3 --ntasks-per-node 2 instead of -n 6",
        "zih-alpha",
        image="x.sif",
        ntasks=6,
        ntasks_per_node=2,
        controller="lightning",
    )


def test_lightning_job_name_bash_is_refused() -> None:
    for name in ("bash", "interactive"):
        fails(
            rf"which ignores Slurm in a job named '{name}': pass another --job-name",
            "zih-alpha", image="x.sif", nodes=1, ntasks_per_node=8, controller="lightning", job_name=name,
        )  # fmt: skip


def test_lightning_is_detected_from_the_script(tmp_path: Path) -> None:
    cases = {
        "a.py": ("import lightning as L\n", True),
        "b.py": ("from pytorch_lightning import Trainer\n", True),
        "c.py": ("import os\nfrom lightning.pytorch.callbacks import X\n", True),
        "d.py": ("import horovod.torch as hvd\n# lightning is not used here\n", False),
        "e.py": ("import lightning_utils\n", False),
        "f.sh": ("import lightning\n", False),
    }
    for name, (text, expected) in cases.items():
        assert (scan_script(write(tmp_path / name, text)) is True) is expected, name
    assert scan_script(tmp_path / "missing.py") is None  # not readable: the image decides
    script = write(tmp_path / "pl.py", "import lightning\n")
    fails(
        r"uses PyTorch Lightning",
        "zih-alpha",
        script=str(script),
        image="x.sif",
        ntasks=8,
    )


def test_gpus_per_task_is_turned_into_per_node_gpus() -> None:
    result = plan(
        "neuron", image="x.sif", nodes=2, ntasks_per_node=4, gpus_per_task=1, comment="field=ai;appl=pytorch",
        env={"NCCL_SOCKET_IFNAME": "ib0", "NCCL_NET": "IB"},
    )  # fmt: skip
    assert "--gres=gpu:4" in words(result) and "--gpu-bind=none" in words(result)
    assert not any(a.startswith("--gpus-per-task") for a in words(result))
    assert warned(result) == [
        "--gpus-per-task makes every rank see only GPU 0 (set_device(local_rank) fails, no P2P): requesting --gres=gpu:N with --gpu-bind=none instead; pass --gpus-per-node to silence this"
    ]
    inside = plan("perlmutter", image="u/i:t", ntasks=4, gpus_per_task=1, inside_allocation=True)
    assert "--gpus-per-node=4" in words(inside) and "--gpu-bind=none" in words(inside)


def test_repeated_shifter_modules_are_joined_once() -> None:
    result = plan(
        "perlmutter",
        image="u/i:t",
        ntasks=4,
        modules=["gpu", "mpich", "mpich"],
        inside_allocation=True,
    )
    assert [a for a in words(result) if a.startswith("--module")] == [
        "--module=gpu,nccl-plugin,mpich"
    ]
    assert warned(result) == [
        "shifter module(s) gpu, mpich given twice: a second --module replaces the first, so they are joined once: --module=gpu,nccl-plugin,mpich"
    ]


def test_modules_on_another_runtime_are_refused() -> None:
    fails(
        r"^--module is a shifter option; runtime singularity has no modules \(allowed with: shifter\)$",
        "neuron",
        image="x.sif",
        modules=["gpu"],
        inside_allocation=True,
    )


def test_image_arch_must_match_the_site() -> None:
    fails(
        r"^recipe x86 is built for amd64 but site zih-ml runs ppc64le: use an image built for ppc64le \(a recipe with `arch: ppc64le`\), or pick a site with amd64 nodes$",
        "zih-ml", facts=X86, ntasks=6,
    )  # fmt: skip


def test_partition_arch_overrides_site_arch(tmp_path: Path) -> None:
    path = write(
        tmp_path / "mixed.yaml",
        "name: mixed\nruntime: {kind: apptainer}\nscheduler:\n  partition: x86\n  partitions:\n    x86: {gpus_per_node: 4}\n    gh200: {gpus_per_node: 4, arch: arm64}\n",
    )
    site = load_site(str(path))
    # one rank: Apptainer converts a registry image once (more ranks would each convert it)
    ok = plan_launch(site, LaunchRequest(script="t.py", facts=X86, ntasks=1))
    assert ok.image == "x86:1"
    with pytest.raises(UserError, match=r"but partition gh200 of site mixed runs arm64"):
        plan_launch(
            site,
            LaunchRequest(script="t.py", facts=X86, ntasks=4, partition="gh200"),
        )


def test_real_recipe_arch_against_ppc64le_site() -> None:
    facts = recipe_facts("cpu-bookworm")
    assert facts.arch == "amd64" and facts.name == "cpu-bookworm"
    fails(
        r"^recipe cpu-bookworm is built for amd64 but site zih-ml runs ppc64le",
        "zih-ml",
        facts=facts,
        ntasks=6,
    )


def test_pmi_mismatch() -> None:
    # an --mpi the user gives must be one the image speaks
    fails(
        r"^srun --mpi=pmi2 does not match the image's MPI \(recipe ompi speaks pmix\): ranks would each be 'rank 0 of 1'; pass --mpi pmix$",
        "perlmutter", image="u/i:t", facts=PMIX_ONLY, ntasks=4, mpi="pmi2", inside_allocation=True,
    )  # fmt: skip
    # the site's default gives way to the one the image speaks, with a warning
    chosen = plan("perlmutter", image="u/i:t", facts=PMIX_ONLY, ntasks=4, inside_allocation=True)
    assert chosen.step[1] == "--mpi=pmix"
    assert warned(chosen) == [
        "site perlmutter launches with --mpi=pmi2, but recipe ompi speaks pmix only: using "
        "--mpi=pmix (pass --mpi to choose)"
    ]
    ok = plan(
        "perlmutter",
        image="u/i:t",
        facts=PMIX_ONLY,
        ntasks=4,
        mpi="pmix_v4",
        inside_allocation=True,
    )
    assert ok.step[1] == "--mpi=pmix_v4"


def test_horovod_without_mpi_under_srun() -> None:
    fails(
        r"^recipe nompi has no MPI: .*size-1 Horovod job; pass --controller gloo$",
        "local",
        image="i.sqfs",
        facts=NO_MPI,
        ntasks=2,
    )
    fails(
        r"^recipe bare has no MPI: .*; add `mpi:` to the recipe and rebuild$",
        "local",
        image="i.sqfs",
        facts=NO_MPI_NO_GLOO,
        ntasks=2,
    )
    fails(
        r"^recipe gl builds Horovod without the MPI controller: pass --controller gloo$",
        "local",
        image="i.sqfs",
        facts=GLOO_ONLY,
        ntasks=2,
    )
    assert (
        plan("local", image="i.sqfs", facts=NO_MPI, ntasks=2, controller="gloo", mpi="none").step[1]
        == "--mpi=none"
    )
    # No Horovod at all (a Lightning image): ranks come from Slurm's variables, not from MPI.
    assert plan("local", image="i.sqfs", facts=NO_HOROVOD, ntasks=2).step[:2] == [
        "srun",
        "--mpi=pmix",
    ]


def test_the_shipped_lightning_recipe_is_not_refused_for_lacking_mpi() -> None:
    facts = recipe_facts("lightning-pt113")
    assert facts.controllers is None and facts.mpi_pmi == ()
    result = plan(
        "neuron",
        facts=facts,
        nodes=2,
        ntasks_per_node=4,
        comment="field=ai;appl=pytorch",
        controller="lightning",
    )
    assert result.step[-4:] == ["run", "--nv", "lightning-pt113:1.sif", "python", "train.py"][-4:]
    assert "-N" in words(result) and "--ntasks-per-node=4" in words(result)


def test_a_single_task_is_not_refused_for_its_mpi_plugin() -> None:
    # One task (a notebook, a size-1 run) cannot split into independent ranks.
    for facts in (NO_MPI, PMIX_ONLY):
        assert (
            plan("local", image="i.sqfs", facts=facts, ntasks=1, mpi="none").step[1] == "--mpi=none"
        )
        assert plan("local", image="i.sqfs", facts=facts, mpi="none").step[1] == "--mpi=none"
    fails(
        r"^srun --mpi=none does not match",
        "local", image="i.sqfs", facts=PMIX_ONLY, nodes=2, mpi="none",
    )  # fmt: skip


def test_cleanenv_breaks_rank_discovery(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", "name: c\nruntime: {kind: apptainer, flags: [--cleanenv]}\n")
    with pytest.raises(
        UserError,
        match=r"^runtime\.flags: apptainer --cleanenv/--containall drops SLURM_\*, PMI_\* and PMIX_\*",
    ):
        plan_launch(
            load_site(str(path)),
            LaunchRequest(script="t.py", image="x.sif", ntasks=1),
        )


def test_image_ignored_without_a_container() -> None:
    result = plan("local", runtime="none", image="x.sqfs", ntasks=1)
    assert "x.sqfs" not in words(result)
    assert warned(result) == [
        "runtime none runs on the host: --image x.sqfs is ignored (pick a container runtime with --runtime)"
    ]


# --- request errors --------------------------------------------------------------------

ERRORS: list[tuple[str, str, dict[str, Any]]] = [
    (
        r"^site neuron runs containers with singularity: pass --image IMAGE or --recipe RECIPE$",
        "neuron",
        dict(ntasks=1, inside_allocation=True),
    ),
    (
        r"^--image: shifter runs images from its gateway, not files \('x\.sif'\)",
        "perlmutter",
        dict(image="x.sif", ntasks=1),
    ),
    (
        r"^--image: podman-hpc runs pulled images, not files \('/p/x\.sqfs'\)",
        "perlmutter",
        dict(image="/p/x.sqfs", runtime="podman-hpc", ntasks=1),
    ),
    (
        r"^-n 8 is more than -N 2 x --ntasks-per-node 3 = 6 tasks: raise -N or --ntasks-per-node, or give only two of them$",
        "zih-alpha",
        dict(image="x.sif", ntasks=8, nodes=2, ntasks_per_node=3),
    ),
    (r"^-n 2 is fewer tasks than -N 4 nodes$", "zih-alpha", dict(image="x.sif", ntasks=2, nodes=4)),
    (r"^-n/--ntasks: must be 1 to 1000000 \(got 0\)$", "zih-alpha", dict(image="x.sif", ntasks=0)),
    (r"^-N/--nodes: must be 1 to 1000000 \(got -1\)$", "zih-alpha", dict(image="x.sif", nodes=-1)),
    (
        r"^--gpus-per-node 9: partition alpha has 8 GPUs per node \(allowed: 1\.\.8\)$",
        "zih-alpha",
        dict(image="x.sif", ntasks=8, gpus_per_node=9),
    ),
    (
        r"^--gpus-per-node 5: site perlmutter has 4 GPUs per node \(allowed: 1\.\.4\)$",
        "perlmutter",
        dict(image="u/i:t", ntasks=8, gpus_per_node=5),
    ),
    (
        r"^--gpus-per-node/--gpus-per-task: site local has no GPUs \(scheduler\.gpus_per_node: 0\)$",
        "local",
        dict(image="i.sqfs", ntasks=1, gpus_per_node=1),
    ),
    (
        r"^--partition: 'gpu' is not a partition of site neuron \(allowed: amd_a100nv_8, amd_a100_4, cas_v100nv_8, cas_v100nv_4, cas_v100_4, cas_v100_2, amd_h100_2, amd_h200nv_8, eme_h200nv_8, gh200_1\)$",
        "neuron",
        dict(image="x.sif", ntasks=1, partition="gpu", comment="field=ai;appl=pytorch"),
    ),
    (
        r"^--time: '2h' is not a Slurm time \(MINUTES, HH:MM:SS or D-HH:MM:SS\)$",
        "zih-alpha",
        dict(image="x.sif", ntasks=1, time="2h"),
    ),
    (
        r"^--bind: 'data:/data' is not SRC\[:DST\[:ro\|rw\]\] with absolute paths$",
        "zih-alpha",
        dict(image="x.sif", ntasks=1, binds=["data:/data"]),
    ),
    (
        r"^--bind: '/a:/b:rx': the option must be ro or rw$",
        "zih-alpha",
        dict(image="x.sif", ntasks=1, binds=["/a:/b:rx"]),
    ),
    (
        r"^--bind: '/a:b': the destination must be an absolute path$",
        "zih-alpha",
        dict(image="x.sif", ntasks=1, binds=["/a:b"]),
    ),
    (
        r"^--env: '1X' is not a variable name \(letters, digits, _\)$",
        "zih-alpha",
        dict(image="x.sif", ntasks=1, env={"1X": "v"}),
    ),
    (
        r"^--runtime: unknown runtime 'docker'",
        "zih-alpha",
        dict(image="x.sif", ntasks=1, runtime="docker"),
    ),
]


@pytest.mark.parametrize(("message", "site", "fields"), ERRORS, ids=[e[0][:40] for e in ERRORS])
def test_request_errors(message: str, site: str, fields: dict[str, Any]) -> None:
    fails(message, site, **fields)


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{nom}.sif", "unknown placeholder {nom}"),
        ("{name!x}.sif", "unknown placeholder {name!x}"),
        ("{name.upper}.sif", "unknown placeholder {name.upper}"),
        ("{0}.sif", "unknown placeholder {0}"),
        ("{}.sif", "unknown placeholder {}"),
        ("{name:>{version}}.sif", "unknown placeholder {name:>{version}}"),
        ("{name.sif", "expected '}' before end of string"),
    ],
)
def test_unusable_template_is_refused_when_the_profile_loads(
    tmp_path: Path, template: str, problem: str
) -> None:
    path = write(
        tmp_path / "t.yaml",
        f"name: t\nruntime: {{kind: apptainer}}\nimages: {{template: '{template}'}}\n",
    )
    with pytest.raises(UserError) as info:
        load_site(str(path))
    assert str(info.value) == (
        f"{path}:3: images.template: not a usable template: {problem} "
        f"(allowed: {{name}}, {{version}}, {{registry}}, {{dir}}) (got {template!r})"
    )


def test_multi_node_gpu_launch_without_nccl_interface_is_warned() -> None:
    """A profile that neither names NCCL's interface nor says NCCL finds the network by itself
    (a user's own InfiniBand site: the built-in neuron without its statement)."""
    warning = (
        "site neuron sets no NCCL_SOCKET_IFNAME for this 2-node GPU launch: NCCL may pick the "
        "wrong interface (docker0, lo); add `NCCL_SOCKET_IFNAME: <interface>` (e.g. ib0, hsn) "
        "to the site profile's env, or pass -e NCCL_SOCKET_IFNAME=<interface>"
    )
    undeclared = load_site("neuron").model_copy(update={"nccl_finds_network": False})

    def on_it(**fields: Any) -> Any:
        return plan_launch(undeclared, LaunchRequest(script="train.py", **fields))

    # over sockets the interface carries the data (a forced IB or plugin network carries it
    # itself: nothing to say then); NCCL_NET set: not the next test's warning
    net = {"NCCL_NET": "Socket"}
    fields: dict[str, Any] = dict(
        image="x.sif", nodes=2, ntasks_per_node=8, comment="field=ai;appl=pytorch"
    )
    assert warned(on_it(**fields, env=net)) == [warning]
    # -n alone: the layout spreads 16 ranks over 2 nodes of 8 GPUs
    assert warned(on_it(image="x.sif", ntasks=16, comment="field=ai;appl=pytorch", env=net)) == [
        warning
    ]
    # set by the user, or by the profile (Perlmutter: the Slingshot NICs)
    assert warned(on_it(**fields, env={"NCCL_SOCKET_IFNAME": "ib0", **net})) == []
    assert load_site("perlmutter").env["NCCL_SOCKET_IFNAME"] == "hsn"
    assert warned(plan("perlmutter", image="u/i:t", nodes=2, account="m1_g")) == []
    assert warned(on_it(**fields, env={"NCCL_NET": "IB"})) == []
    # or said by the profile: the built-in neuron's NCCL finds InfiniBand itself
    assert warned(plan("neuron", **fields)) == []
    # one node, or no GPUs: NCCL does not cross the network
    assert warned(on_it(image="x.sif", nodes=1, comment="field=ai;appl=pytorch")) == []
    assert warned(plan("local", image="i.sqfs", nodes=2, ntasks_per_node=2)) == []


@pytest.mark.parametrize(
    ("message", "site", "fields"),
    [
        (
            r"^--ntasks-per-node 16 puts 16 ranks on a node but partition amd_a100nv_8 has 8 GPUs per node: ranks beyond 8 share a GPU \(one rank per GPU is what the examples expect\); use -N 2 --ntasks-per-node 8, or pass --gpus-per-node to share GPUs between ranks on purpose$",
            "neuron",
            dict(image="x.sif", ntasks=16, ntasks_per_node=16, comment="field=ai;appl=pytorch"),
        ),
        (
            r"^--ntasks-per-node 6 puts 6 ranks on a node but site perlmutter has 4 GPUs per node: .*; use -N 3 --ntasks-per-node 4, ",
            "perlmutter",
            dict(image="u/i:t", nodes=2, ntasks_per_node=6, account="a_g", cpus_per_task=16),
        ),
        (
            r"^-n 16 on -N 1 puts 16 ranks on a node but partition alpha has 8 GPUs per node: .*; use -N 2, or pass --gpus-per-node to share GPUs between ranks on purpose$",
            "zih-alpha",
            dict(image="x.sif", ntasks=16, nodes=1, cpus_per_task=1),
        ),
        (
            r"^--ntasks-per-node 3 puts 3 ranks on a node but partition cas_v100_2 has 2 GPUs per node",
            "neuron",
            dict(
                image="x.sif",
                nodes=1,
                ntasks_per_node=3,
                partition="cas_v100_2",
                inside_allocation=True,
            ),
        ),  # fmt: skip
        (
            r"^--ntasks-per-node 12 puts 12 ranks on a node but partition alpha has 8 GPUs per node",
            "zih-alpha",
            dict(image="x.sif", nodes=1, ntasks_per_node=12, controller="lightning"),
        ),
    ],
)
def test_more_ranks_per_node_than_gpus_is_warned_naming_both_numbers(
    message: str, site: str, fields: dict[str, Any]
) -> None:
    result = plan(site, **fields)
    crowded = [w for w in warned(result) if "share a GPU" in w]
    assert len(crowded) == 1 and re.search(message, crowded[0]), warned(result)
    assert words(result)  # the launch goes ahead


@pytest.mark.parametrize("controller", ["torch", "torchrun"])
def test_more_ranks_per_node_than_gpus_is_refused_under_torch_s_controllers(
    controller: str,
) -> None:
    """torch's scripts take cuda:LOCAL_RANK: a rank past the node's GPUs crashes there."""
    fails(
        r"^--ntasks-per-node \d+ puts 16 ranks on a node but partition amd_a100nv_8 has 8 GPUs "
        r"per node: .*share GPUs between ranks on purpose \(under controller "
        + controller
        + r" a rank whose LOCAL_RANK is past the GPUs fails on cuda:LOCAL_RANK\)$",
        "neuron", image="x.sif", ntasks=16, ntasks_per_node=16, controller=controller,
        comment="field=ai;appl=pytorch",
    )  # fmt: skip
    # sharing on purpose (--gpus-per-node) is the user's word
    shared = plan("neuron", image="x.sif", ntasks=16, ntasks_per_node=16, controller=controller,
                  gpus_per_node=8, comment="field=ai;appl=pytorch")  # fmt: skip
    assert words(shared)


def test_amd_h100_2_spreads_8_ranks_over_4_nodes() -> None:
    result = plan("neuron", image="x.sif", ntasks=8, partition="amd_h100_2",
                  comment="field=ai;appl=pytorch")  # fmt: skip
    assert result.layout.nodes == 4 and result.layout.gpus_per_node == 2
    assert "-N" in result.step and result.step[result.step.index("-N") + 1] == "4"
    assert "--nodes=4" in result.allocation and "--gres=gpu:2" in result.allocation


def test_an_amd64_image_on_grace_hopper_fails_with_the_fix() -> None:
    """A recipe that cannot make an arm64 image yet (no arm64 lock beside it)."""
    from hvd_container.launcher.plan.request import LaunchOptions, request_from_options

    site, request = request_from_options(
        "t.py", options=LaunchOptions(site="neuron", recipe="gpu-bookworm-torch-cu12", ntasks=1,
        partition="gh200_1", comment="field=ai;appl=pytorch"))  # fmt: skip
    with pytest.raises(UserError) as info:
        plan_launch(site, request)
    assert str(info.value) == (
        "recipe gpu-bookworm-torch-cu12 is built for amd64 but partition gh200_1 of site neuron "
        "runs arm64: build the recipe's arm64 image (`hvd-container build gpu-bookworm-torch-cu12 "
        "--arch arm64`, then `hvd-container convert gpu-bookworm-torch-cu12:1-arm64 --to sif`) "
        "and pass --image gpu-bookworm-torch-cu12_1-arm64.sif, or pick a site with amd64 nodes"
    )
    assert "`arch: arm64` in the recipe" not in str(info.value)  # a built-in: not editable


@pytest.mark.parametrize(
    ("site", "extra"),
    [("jupiter", dict(account="a1")),
     ("neuron", dict(partition="gh200_1", comment="field=ai;appl=pytorch"))],
)  # fmt: skip
def test_a_built_in_gpu_recipe_launches_its_arm64_image_on_grace_hopper_with_a_note(
    site: str, extra: dict[str, str]
) -> None:
    """`run --site jupiter --recipe gpu-bookworm-torch` told the user to add `arch: arm64`
    to a recipe they cannot edit: the recipe makes an arm64 image (`build --arch arm64`, its
    arm64 lock is shipped), so that image is launched, and the choice is a note, not a
    warning."""
    from hvd_container.launcher.plan.request import LaunchOptions, request_from_options

    notes: list[str] = []
    warnings: list[str] = []
    chosen, request = request_from_options(
        "t.py", options=LaunchOptions(site=site, recipe="gpu-bookworm-torch", nodes=1, **extra),
        warnings=warnings, notes=notes)  # fmt: skip
    where = f"partition {extra.get('partition') or chosen.scheduler.partition}"
    assert notes == [
        f"--recipe gpu-bookworm-torch: its arm64 image, gpu-bookworm-torch:1-arm64, for the "
        f"arm64 nodes of {where} (`hvd-container build gpu-bookworm-torch --arch arm64` makes it)"
    ]
    assert not warnings
    assert request.facts is not None and request.facts.arch == "arm64"
    result = plan_launch(chosen, request)
    assert any("gpu-bookworm-torch_1-arm64.sif" in w or "gpu-bookworm-torch:1-arm64" in w
               for w in result.step), result.step  # fmt: skip
    assert not any("is built for amd64" in w for w in result.warnings), result.warnings


@pytest.mark.parametrize(("partition", "arch"), [("gh200_1", "arm64"), (None, "amd64")])
def test_a_recipe_of_two_architectures_launches_the_image_of_the_partitions_nodes(
    tmp_path: Path, partition: str | None, arch: str
) -> None:
    from hvd_container.launcher.plan.request import LaunchOptions, request_from_options

    recipe = tmp_path / "pair.yaml"
    recipe.write_text("extends: cpu-bookworm\nname: pair\narch: [amd64, arm64]\n")
    notes: list[str] = []
    site, request = request_from_options(
        "t.py", options=LaunchOptions(site="neuron", recipe=str(recipe), ntasks=1,
        partition=partition, comment="field=ai;appl=pytorch"), notes=notes)  # fmt: skip
    where = f"partition {partition or site.scheduler.partition}"
    assert notes == [
        f"--recipe {recipe}: its {arch} image, pair:1-{arch}, for the {arch} nodes of {where}"
    ]
    assert request.facts is not None and request.facts.arch == arch
    result = plan_launch(site, request)
    assert f"pair:1-{arch}.sif" in result.step  # neuron's images.template: {name}:{version}.sif


def test_a_recipe_without_the_partitions_architecture_is_refused_with_the_fix(
    tmp_path: Path,
) -> None:
    from hvd_container.launcher.plan.request import LaunchOptions, request_from_options

    recipe = tmp_path / "arm.yaml"
    recipe.write_text("extends: cpu-bookworm\nname: arm\narch: [arm64, ppc64le]\n")
    with pytest.raises(UserError) as info:
        request_from_options("t.py", options=LaunchOptions(site="neuron", recipe=str(recipe)))
    assert str(info.value).endswith(
        "its images are for arm64, ppc64le, but partition amd_a100nv_8 runs amd64: add amd64 to "
        "the recipe's arch: list and build it"
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"time": "3-0"},
            r"^--time 3-0: site neuron runs jobs of at most 2-00:00:00: ask for --time 2-00:00:00 or less",
        ),
        ({"time": "48:00:01"}, r"^--time 48:00:01: site neuron runs jobs of at most 2-00:00:00"),
    ],
)
def test_a_time_above_the_sites_limit_is_refused(fields: dict[str, Any], message: str) -> None:
    fails(message, "neuron", image="x.sif", ntasks=8, comment="field=ai;appl=pytorch", **fields)
    assert plan(
        "neuron", image="x.sif", ntasks=8, comment="field=ai;appl=pytorch", time="48:00:00"
    ).argv


def test_more_ranks_than_gpus_is_allowed_with_explicit_gpus_or_no_gpus() -> None:
    shared = plan("neuron", image="x.sif", nodes=1, ntasks_per_node=16, gpus_per_node=8,
                  comment="field=ai;appl=pytorch")  # fmt: skip
    assert "--gres=gpu:8" in words(shared) and "--ntasks-per-node=16" in words(shared)
    # a site without GPUs, and -n alone inside an allocation (ranks per node unknown)
    assert plan("local", image="i.sqfs", nodes=1, ntasks_per_node=4).layout.gpus_per_node == 0
    assert plan("neuron", image="x.sif", ntasks=16, inside_allocation=True).step[2:4] == [
        "-n",
        "16",
    ]


def test_gloo_refuses_an_uneven_last_node() -> None:
    from hvd_container.launcher.controllers import gloo

    assert gloo.layout_problem(8, None, 4) is None
    assert gloo.layout_problem(6, None, 4) == (
        "--controller gloo needs the same number of ranks on every node: -n 6 is not a multiple of --ntasks-per-node 4"
    )


# --- a script not readable here: the image decides whether it is a Lightning one ------------

PL_IMAGE = ImageFacts(
    source="recipe pl", name="pl", version="1", arch="amd64", mpi_pmi=(), lightning=True,
    horovod=False,
)  # fmt: skip


def test_an_unreadable_script_in_a_lightning_image_is_a_lightning_script() -> None:
    remote = "/cluster/only/train.py"
    fails(
        r"^/cluster/only/train\.py \(not readable here; recipe pl has Lightning and no Horovod\) uses PyTorch Lightning, which refuses srun -n/--ntasks: use -N 2 --ntasks-per-node 4 instead of -n 8$",
        "perlmutter", script=remote, image="u/i:t", facts=PL_IMAGE, ntasks=8,
    )  # fmt: skip
    result = plan(
        "perlmutter", script=remote, image="u/i:t", facts=PL_IMAGE, nodes=2, account="a_g",
    )  # fmt: skip
    assert result.launch.controller.name == "lightning" and result.layout.job_name == "train"
    assert "-N 2 --ntasks-per-node=4" in result.shell_line() and "-n" not in words(result)
    assert warned(result) == [
        "/cluster/only/train.py (not readable here; recipe pl has Lightning and no Horovod): launched as a PyTorch Lightning script (-N, --ntasks-per-node, a job name)"
    ]


@pytest.mark.parametrize(
    "facts",
    [
        None,
        ImageFacts(source="recipe x", lightning=True, horovod=True),  # Horovod may drive it
        ImageFacts(source="recipe x", lightning=True),  # Horovod unknown
        ImageFacts(source="recipe x", horovod=False),
    ],
)
def test_an_unreadable_script_is_not_lightning_unless_the_image_says_so(
    facts: ImageFacts | None,
) -> None:
    result = plan(
        "zih-alpha", script="/cluster/only/t.py", image="x.sif", facts=facts, ntasks=8,
    )  # fmt: skip
    assert result.launch.controller.name != "lightning" and "-n" in words(result)


def test_a_readable_script_wins_over_the_image_facts(tmp_path: Path) -> None:
    script = write(tmp_path / "hvd.py", "import horovod.torch as hvd\n")
    result = plan("zih-alpha", script=str(script), image="x.sif", facts=PL_IMAGE, ntasks=8)
    assert result.launch.controller.name != "lightning" and warned(result) == []


def test_lightning_and_horovod_facts_of_recipes_and_labels() -> None:
    pl = recipe_facts("lightning-pt113")
    assert (pl.lightning, pl.horovod) == (True, False)
    cpu = recipe_facts("cpu-bookworm")
    assert (cpu.lightning, cpu.horovod) == (False, True)
    from hvd_container.facts import facts_from_labels

    probed = {"org.hvd-container.arch": "amd64", "org.hvd-container.versions.python": "3.10.12"}
    labels = facts_from_labels(
        {**probed, "org.hvd-container.versions.lightning": "2.0.2"}, "image pl.sif"
    )
    assert labels is not None and (labels.lightning, labels.horovod) == (True, False)
    labels = facts_from_labels(
        {**probed, "org.hvd-container.versions.horovod": "0.28.1"}, "image h.sif"
    )
    assert labels is not None and (labels.lightning, labels.horovod) == (False, True)
    # no version probe in the labels: nothing known about either
    labels = facts_from_labels({"org.hvd-container.arch": "amd64"}, "image u.sif")
    assert labels is not None and (labels.lightning, labels.horovod) == (None, None)


# --- a --runtime override that loses the GPUs ----------------------------------------------


def test_runtime_override_without_gpu_support_is_warned(tmp_path: Path) -> None:
    shifter = plan(
        "neuron", image="u/i:t", runtime="shifter", nodes=1, comment="field=ai;appl=pytorch"
    )
    assert not any(a.startswith("--module") for a in words(shifter))
    assert warned(shifter) == [
        "runtime shifter: the job asks for 8 GPUs per node but shifter gets no --module=gpu, so the container has no GPU driver or devices; pass --module gpu, or add a shifter runtime with modules: [gpu] to site neuron's profile"
    ]
    fixed = plan(
        "neuron",
        image="u/i:t",
        runtime="shifter",
        modules=["gpu"],
        nodes=1,
        comment="field=ai;appl=pytorch",
    )
    # naming modules replaces Shifter's defaults: an MPI launch names mpich again
    assert "--module=gpu,mpich" in words(fixed) and warned(fixed) == []
    ch = plan("zih-alpha", image="i.sqfs", runtime="charliecloud", nodes=1)
    assert warned(ch) == [
        "runtime charliecloud: the job asks for 8 GPUs per node but ch-run has no GPU option, so the container lacks the host's NVIDIA driver libraries; inject them with `ch-fromhost --nvidia IMAGE`, or pick --runtime apptainer"
    ]
    path = write(
        tmp_path / "g.yaml",
        "name: g\nruntime: {kind: apptainer, gpu: false}\n"
        "scheduler: {gpus_per_node: 4}\n"
        "other_runtimes:\n  - {kind: podman-hpc, gpu: false}\n",
    )
    for kind, flag, image in (("apptainer", "--nv", "i.sif"), ("podman-hpc", "--gpu", "u/i:t")):
        result = plan_launch(
            load_site(str(path)),
            LaunchRequest(script="t.py", image=image, runtime=kind, nodes=1),
        )
        assert flag not in words(result)
        assert warned(result) == [
            f"runtime {kind}: the job asks for 4 GPUs per node but {kind} runs without {flag} (gpu: false for it in site g's profile); set gpu: true for the {kind} runtime in the profile"
        ]


def test_runtimes_that_keep_the_gpus_are_not_warned() -> None:
    for runtime, image in (("apptainer", "i.sif"), ("pyxis", "u/i:t")):
        assert warned(plan("zih-alpha", image=image, runtime=runtime, nodes=1)) == []
    assert warned(plan("zih-alpha", runtime="none", nodes=1)) == []
    assert warned(plan("perlmutter", image="u/i:t", nodes=1, account="a_g")) == []
    assert (
        warned(plan("perlmutter", image="u/i:t", runtime="podman-hpc", nodes=1, account="a_g"))
        == []
    )
    # no GPUs asked for: nothing is lost
    assert warned(plan("local", image="i.sqfs", nodes=1)) == []


# ZIH's GPU clusters: --ntasks with --mincpus instead of --ntasks-per-node, CPUs capped per GPU


@pytest.mark.parametrize(
    ("fields", "tasks"),
    [
        (dict(nodes=2), ["--nodes=2", "--ntasks=8", "--mincpus=4"]),
        (dict(nodes=2, ntasks_per_node=2), ["--nodes=2", "--ntasks=4", "--mincpus=2"]),
        (dict(ntasks=8), ["--nodes=2", "--ntasks=8", "--mincpus=4"]),
        # ranks that do not split evenly: no --mincpus could say it, Slurm places them
        (dict(ntasks=5, nodes=2), ["--nodes=2", "--ntasks=5"]),
    ],
)
def test_zih_gpu_jobs_ask_for_ranks_per_node_with_mincpus(
    fields: dict[str, Any], tasks: list[str]
) -> None:
    result = plan("zih-capella", image="x.sif", **fields)
    assert result.script is not None
    options = [line.removeprefix("#SBATCH ") for line in result.script.splitlines()
               if line.startswith(("#SBATCH --nodes", "#SBATCH --ntasks", "#SBATCH --mincpus"))]  # fmt: skip
    assert options == tasks
    step = next(line for line in result.script.splitlines() if line.startswith("srun "))
    assert " -N 2 " in step  # the step still says its layout
    lines = result.script.splitlines()
    for at, line in enumerate(lines):  # what --mincpus means there, under it
        if line.startswith("#SBATCH --mincpus="):
            per_node = line.split("=")[1]
            assert lines[at + 1] == (
                f"# (--mincpus={per_node} with --ntasks: {per_node} ranks on each node, the "
                "site's form for GPU jobs in place of --ntasks-per-node)"
            )
            # a comment keeps sbatch reading the #SBATCH lines after it (sbatch(1): it
            # stops at the first line that is neither a comment nor blank)
            assert lines[at + 2].startswith("#SBATCH ")


def test_a_site_without_the_rule_keeps_ntasks_per_node() -> None:
    result = plan("perlmutter", image="u/i:t", nodes=2, ntasks_per_node=4, account="m1_g")
    assert "#SBATCH --ntasks-per-node=4" in result.script.splitlines()
    assert "--mincpus" not in result.script


def test_cpus_beyond_a_node_or_its_cap_per_gpu_are_named_with_the_fix() -> None:
    capella = plan("zih-capella", image="x.sif", nodes=1, cpus_per_task=15)
    (node,) = [r.message for r in capella.results if r.check == "cpus-per-node"]
    assert node.startswith(
        "--cpus-per-task 15 x 4 ranks per node asks for 60 CPUs but a node of partition "
        "capella gives a job 56: lower -c to 14 or the ranks per node (unconfirmed: "
        "`hvd-container sites show zih-capella --sources`)"
    )
    neuron = plan("neuron", image="x.sif", ntasks=1, cpus_per_task=10,
                  comment="field=ai;appl=pytorch")  # fmt: skip
    (gpu,) = [r.message for r in neuron.results if r.check == "cpus-per-node"]
    assert gpu.startswith(
        "--cpus-per-task 10 x 1 rank per node asks for 10 CPUs with 1 GPU but partition "
        "amd_a100nv_8 allows 8 CPU cores per GPU (8 here; the scheduler refuses more): lower "
        "-c to 8, or ask for more GPUs per node"
    )
    assert gpu.endswith("(unconfirmed: `hvd-container sites show neuron --sources`)")
    from hvd_container.launcher.sites.sources import source_lines

    # the source's own words live there, with how to confirm the fact
    said = "\n".join(source_lines(load_site("neuron")))
    assert "Requested CPU cores per node" in said
    assert "to confirm scheduler.partitions.amd_a100nv_8.cpus_per_gpu: `scontrol show" in said
    # the defaults fit: a node's worth of ranks with the site's -c
    for site, fields in (("zih-capella", {}), ("zih-alpha", {}),
                         ("neuron", dict(comment="field=ai;appl=pytorch"))):  # fmt: skip
        result = plan(site, image="x.sif", nodes=2, **fields)
        assert [r.status for r in result.results if r.check == "cpus-per-node"] == ["pass"]


def test_a_comment_the_site_keeps_for_itself_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path / "j.yaml",
        "name: j\nruntime: {kind: none}\nscheduler:\n  comment: {reserved: true}\n",
    )
    site = load_site(str(path))
    with pytest.raises(
        UserError,
        match=r"^--comment 'x': site j keeps --comment for its own tools, so hvd-container writes none there; leave it out$",
    ):
        plan_launch(site, LaunchRequest(script="t.py", ntasks=1, comment="x"))
    assert not any(
        w.startswith("--comment")
        for w in words(plan_launch(site, LaunchRequest(script="t.py", ntasks=1)))
    )


def test_jscs_reserved_comment_rests_on_an_unconfirmed_source_so_it_is_warned_of_and_left_out() -> (
    None
):
    result = plan("jupiter", image="x.sif", nodes=1, comment="mine", account="p")
    assert not any(w.startswith("--comment") for w in words(result))
    (said,) = [w for w in warned(result) if w.startswith("--comment")]
    assert said == (
        "--comment 'mine': site jupiter keeps --comment for its own tools, so hvd-container "
        "writes none there; leave it out (unconfirmed: `hvd-container sites show jupiter "
        "--sources`)"
    )


@pytest.mark.parametrize("other", ["required: true", "default: x"])
def test_a_reserved_comment_cannot_be_required_or_have_a_default(
    tmp_path: Path, other: str
) -> None:
    path = write(
        tmp_path / "j.yaml",
        f"name: j\nruntime: {{kind: none}}\nscheduler:\n  comment: {{reserved: true, {other}}}\n",
    )
    with pytest.raises(
        UserError,
        match="reserved: a comment the site keeps for itself cannot be required or have a default",
    ):
        load_site(str(path))


def test_ch_run_mounts_a_squashfs_image_on_a_folder_made_before_the_ranks_start(
    tmp_path: Path,
) -> None:
    """Left to itself each ch-run makes /var/tmp/$USER.ch/mnt, and two ranks of a node
    starting at once race on it (`can't mkdir: ... File exists`): the launch names a folder
    of its own; a dry run only names it, the launch makes it."""
    from hvd_container.launcher.plan.planner import plan as real_plan

    folder = tmp_path / "job" / ".hvd-container" / "ch-mnt"
    step = plan("local", image="i.sqfs", nodes=2, ntasks_per_node=2).step
    at = step.index("ch-run")
    assert step[step.index("-m", at) + 1] == str(folder)
    assert not folder.exists()
    launched = real_plan(
        load_site("local"), LaunchRequest(script="train.py", image="i.sqfs", nodes=2), "run"
    )
    assert str(folder) in launched.step and folder.is_dir()
    assert oct(folder.stat().st_mode & 0o777) == "0o700"


@pytest.mark.parametrize("runtime", ["charliecloud", "podman-hpc"])
def test_the_folders_of_pythonpath_are_bound_where_the_runtime_mounts_nothing_itself(
    tmp_path: Path, runtime: str
) -> None:
    """`-e PYTHONPATH=/elsewhere/lib` gave every rank ModuleNotFoundError: the runtime bound
    the working directory and the script's folder only."""
    lib = tmp_path / "site-lib"
    lib.mkdir()
    inside = tmp_path / "job" / "mine"  # under the working directory: bound with it
    inside.mkdir(parents=True)
    image = "i.sqfs" if runtime == "charliecloud" else "registry.example/i:1"
    path = f"{lib}:{inside}:relative:/not/here"
    step = plan("local", runtime=runtime, image=image, env={"PYTHONPATH": path}).step
    bound = [step[i + 1] for i, word in enumerate(step) if word in ("-b", "-v")]
    assert f"{lib}:{lib}" in bound
    assert not any(b.startswith((str(inside), "/not/here", "relative")) for b in bound), bound


def test_a_pythonpath_folder_in_bind_syntax_is_refused_by_name(tmp_path: Path) -> None:
    lib = tmp_path / "a,b"
    lib.mkdir()
    with pytest.raises(UserError, match="-e PYTHONPATH's folder .* name a folder whose path"):
        plan("local", image="i.sqfs", env={"PYTHONPATH": str(lib)})


PL_SCRIPT = """import lightning as L
import torch

def main(args):
    trainer = L.Trainer(accelerator="gpu", {trainer})
    trainer.fit(model)
"""


@pytest.mark.parametrize(
    ("trainer", "layout", "fix"),
    [
        ("devices=4, num_nodes=2", dict(nodes=1, ntasks_per_node=8), "-N 2 --ntasks-per-node 4"),
        ("devices=4", dict(nodes=2, ntasks_per_node=8), "-N 2 --ntasks-per-node 4"),
        (
            "num_nodes=2, strategy='ddp'",
            dict(nodes=1, ntasks_per_node=4),
            "-N 2 --ntasks-per-node 4",
        ),  # fmt: skip
    ],
)
def test_a_lightning_trainer_that_asks_for_another_layout_is_refused_with_the_launch_that_fits(
    tmp_path: Path, trainer: str, layout: dict[str, int], fix: str
) -> None:
    script = write(tmp_path / "pl.py", PL_SCRIPT.format(trainer=trainer))
    fails(
        rf"pl\.py calls Trainer\(.*\), but the launch starts {layout['ntasks_per_node']} ranks a node on {layout['nodes']} nodes?: Lightning then fails or hangs at start; launch it with {fix}, or change the Trainer call$",
        "zih-alpha", script=str(script), image="x.sif", **layout,
    )  # fmt: skip


@pytest.mark.parametrize(
    "trainer",
    [
        "devices=4, num_nodes=2",  # what the launch gives
        "devices='auto', num_nodes=n",  # not literals: not judged here
        "devices=[0, 1], num_nodes=2",
    ],
)
def test_a_lightning_trainer_that_fits_or_cannot_be_read_is_not_refused(
    tmp_path: Path, trainer: str
) -> None:
    script = write(tmp_path / "pl.py", PL_SCRIPT.format(trainer=trainer))
    plan("zih-alpha", script=str(script), image="x.sif", nodes=2, ntasks_per_node=4)


def test_two_trainers_that_disagree_are_not_judged() -> None:
    from hvd_container.launcher.controllers.lightning import trainer_layout

    text = "Trainer(devices=4)\nTrainer(devices=2, num_nodes=3)\nTrainer(num_nodes=3)\n"
    assert trainer_layout(text) == {"num_nodes": 3}
    assert trainer_layout("Trainer(devices=True)\nx = (") == {}  # not Python: nothing


def test_a_launch_that_names_no_site_says_which_it_is_for(monkeypatch: pytest.MonkeyPatch) -> None:
    from hvd_container.launcher.plan.request import LaunchOptions, request_from_options

    warnings: list[str] = []
    site, _ = request_from_options(
        "t.py", options=LaunchOptions(image="x.sif", ntasks=1), warnings=warnings
    )
    assert site.name == "local"
    assert warnings[0] == (
        "no --site: site local (default); --site, $HVD_CONTAINER_SITE or the config file's "
        "`site:` names another"
    )
    monkeypatch.setenv("HVD_CONTAINER_SITE", "local")  # named by the user: nothing to say
    warnings.clear()
    request_from_options("t.py", options=LaunchOptions(image="x.sif", ntasks=1), warnings=warnings)
    assert not any(w.startswith("no --site") for w in warnings)


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        (
            dict(qos="gpu_regular"),
            "-q gpu_regular is not a QOS of site perlmutter's profile (debug, interactive, premium, regular, shared)",
        ),  # fmt: skip
        (
            dict(partition="gpu"),
            "site perlmutter's profile names no partition (its nodes are asked for with -C gpu), yet -p gpu is given",
        ),  # fmt: skip
        (
            dict(constraint="cpu"),
            "-C cpu leaves out site perlmutter's own -C gpu (its GPU nodes' feature)",
        ),  # fmt: skip
    ],
)
def test_a_qos_partition_or_constraint_the_profile_does_not_know_is_warned_of(
    asked: dict[str, str], said: str
) -> None:
    """Perlmutter took `-q gpu_regular`, `-p gpu` and `-C cpu` without a word."""
    result = plan("perlmutter", image="u/i:t", nodes=1, account="m1_g", **asked)
    (found,) = [r for r in result.results if r.check == "site-names"]
    assert found.status == "warn" and found.message.startswith(said + ": sbatch gets it as given")


@pytest.mark.parametrize("asked", [dict(qos="debug"), dict(constraint="gpu&hbm80g"), {}])
def test_the_sites_own_names_pass(asked: dict[str, str]) -> None:
    result = plan("perlmutter", image="u/i:t", nodes=1, account="m1_g", **asked)
    (found,) = [r for r in result.results if r.check == "site-names"]
    assert found.status == "pass"


def test_a_site_that_charges_every_job_to_a_budget_asks_for_account() -> None:
    """JUPITER took a job without --account (JSC charges every job to a budget); its profile
    records the rule from an unconfirmed source, so it warns; confirmed, it refuses."""
    result = plan("jupiter", image="x.sif", nodes=1)
    (found,) = [r for r in result.results if r.check == "account"]
    assert found.status == "warn" and found.message == (
        "no --account: site jupiter charges every job to a project or budget and refuses one "
        "without it: pass --account PROJECT (or set scheduler.account in your own profile of "
        "the site) (unconfirmed: `hvd-container sites show jupiter --sources`)"
    )
    given = plan("jupiter", image="x.sif", nodes=1, account="training2600")
    assert [r.status for r in given.results if r.check == "account"] == ["n/a"]
    site = load_site("jupiter")
    confirmed = site.model_copy(
        update={"sources": [s.model_copy(update={"confirmed": True}) for s in site.sources]}
    )
    with pytest.raises(UserError, match="^no --account: site jupiter charges every job"):
        plan_launch(confirmed, LaunchRequest(script="train.py", image="x.sif", nodes=1))


def test_batch_writes_nothing_but_its_script_and_the_script_makes_what_the_step_needs(
    tmp_path: Path,
) -> None:
    """`batch -o -` made .hvd-container/ch-mnt and the --hang-after watcher in the working
    directory; the script it prints makes them itself."""
    from hvd_container.launcher.plan.planner import plan as real_plan

    job = tmp_path / "job"
    request = LaunchRequest(script="train.py", image="i.sqfs", nodes=2, hang_after=600)
    batch = real_plan(load_site("local"), request, "batch")
    assert not (job / ".hvd-container").exists()
    assert batch.script is not None
    assert f"(umask 077 && mkdir -p {job}/.hvd-container/ch-mnt)" in batch.script.splitlines()
    assert f"{job}/.hvd-container/stacks/sitecustomize.py" in batch.script
    run = real_plan(load_site("local"), request, "run")  # a launch from here makes them
    assert (job / ".hvd-container" / "ch-mnt").is_dir()
    assert (job / ".hvd-container" / "stacks" / "sitecustomize.py").is_file()
    assert run.script == batch.script


def test_inside_an_allocation_a_runtime_the_sites_modules_give_must_be_found_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At Neuron the step line ran `singularity` from a shell that never loaded
    singularity/4.3.4 (the batch script loads it)."""
    from hvd_container.launcher.plan.planner import plan as real_plan

    monkeypatch.setenv("PATH", str(tmp_path))  # no singularity here
    request = LaunchRequest(script="train.py", image="x.sif", ntasks=2, inside_allocation=True,
                            comment="field=ai;appl=pytorch", controller="mpi")  # fmt: skip
    judged = real_plan(load_site("neuron"), request, "run", keep_going=True)
    (found,) = [r for r in judged.results if r.check == "site-modules"]
    assert found.status in ("fail", "warn")
    assert found.message.startswith(
        "singularity is not on PATH in this shell, and the step runs it from here: site "
        "neuron's jobs load `module load singularity/4.3.4` first (as its batch scripts do)"
    )
    program = tmp_path / "singularity"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    judged = real_plan(load_site("neuron"), request, "run", keep_going=True)
    assert [r.status for r in judged.results if r.check == "site-modules"] == ["pass"]
    dry = plan("neuron", image="x.sif", ntasks=2, inside_allocation=True,
               comment="field=ai;appl=pytorch")  # fmt: skip
    assert [r.status for r in dry.results if r.check == "site-modules"] == ["n/a"]


@pytest.mark.parametrize("folder", ["/usr/lib", "/etc", "/"])  # on every Linux host
def test_a_pythonpath_folder_over_the_images_programs_is_not_bound_and_said(
    folder: str,
) -> None:
    """A host folder named in -e PYTHONPATH is bound at the same path: one of the image's
    program folders (or /) would then replace the image's own, so it goes through the guard's
    bind rule and is left out, with a note."""
    result = plan("local", image="i.sqfs", env={"PYTHONPATH": folder})
    bound = [result.step[i + 1] for i, word in enumerate(result.step) if word == "-b"]
    assert not any(b.split(":")[0] == os.path.realpath(folder) for b in bound), bound
    assert any(
        w.startswith(f"-e PYTHONPATH names {os.path.realpath(folder)}, which is not bound: it ")
        for w in result.warnings
    ), result.warnings


@pytest.mark.parametrize(
    ("runtime", "image"),
    [("apptainer", "i.sif"), ("singularity", "i.sif"), ("pyxis", "reg.example/i:1"),
     ("shifter", "reg.example/i:1")],
)  # fmt: skip
def test_a_pythonpath_folder_the_runtime_does_not_mount_is_warned_with_the_bind(
    tmp_path: Path, runtime: str, image: str
) -> None:
    """Runtimes that mount folders on their own (Apptainer: $HOME, the working directory,
    /tmp, /var/tmp) run ranks that cannot import from another folder of -e PYTHONPATH: the
    launch says so with the -B that fixes it, and says nothing once it is bound."""
    lib = Path("/srv" if os.path.isdir("/srv") else "/mnt").resolve()
    warned = plan("local", runtime=runtime, image=image, env={"PYTHONPATH": f"{lib}"})
    said = [w for w in warned.warnings if w.startswith(f"-e PYTHONPATH names {lib}")]
    assert len(said) == 1 and f"add -B {lib}" in said[0], warned.warnings
    assert f"{runtime} does not mount on its own" in said[0]
    bound = plan("local", runtime=runtime, image=image, env={"PYTHONPATH": f"{lib}"},
                 binds=[f"{lib}:{lib}"])  # fmt: skip
    assert not [w for w in bound.warnings if "-e PYTHONPATH names" in w], bound.warnings


def test_a_pythonpath_folder_apptainer_mounts_itself_is_not_warned(tmp_path: Path) -> None:
    inside = tmp_path / "lib"  # the working directory (and /tmp) are Apptainer's own mounts
    inside.mkdir()
    result = plan("local", runtime="apptainer", image="i.sif", env={"PYTHONPATH": str(inside)})
    assert not [w for w in result.warnings if "-e PYTHONPATH names" in w], result.warnings


@pytest.mark.parametrize(("ranks", "written"), [(8, 5), (7, 5), (6, 6), (2, 6)])
def test_zihs_cpu_cap_is_a_table_by_gpus_and_the_default_fits_it(ranks: int, written: int) -> None:
    """Alpha Centauri caps a job's cores by the GPUs it asks for on a node: 7 -> 40, 8 -> 46
    (6 a GPU below). A full node of 8 ranks x the site's 6 was written and refused at
    submission: the default -c now fits the cap, and -c 6 asked for is named with the fix."""
    result = plan("zih-alpha", image="x.sif", nodes=1, ntasks_per_node=ranks)
    assert f"--cpus-per-task={written}" in result.step
    assert "#SBATCH --cpus-per-task=" + str(written) in (result.script or "")
    if ranks >= 7:
        cap = {7: 40, 8: 46}[ranks]
        asked = plan("zih-alpha", image="x.sif", nodes=1, ntasks_per_node=ranks, cpus_per_task=6)
        said = [w for w in asked.warnings if w.startswith("--cpus-per-task 6 x")]
        assert (
            said
            and (
                f"but partition alpha allows {cap} CPU cores to a job of {ranks} GPUs on a node "
                f"(the scheduler refuses more): lower -c to {cap // ranks}"
            )
            in said[0]
        ), asked.warnings


def test_claridens_debug_partition_is_a_node_time_budget() -> None:
    """CSCS Clariden's debug QoS: 90 node-minutes and 4 nodes a job (1 node 90 min, 2 nodes
    45). Two nodes at the partition's 1:30 asked for 180 and waited for ever: refused with the
    --time that fits; 2 x 45 and 1 x 90 pass; 5 nodes are refused; `low` (24 h) is known."""
    fails(
        r"^no --time: the job asks for 1:30:00, which on 2 nodes is 180 node-minutes, but "
        r"partition debug runs jobs of at most 90 node-minutes \(the job would wait for ever\): "
        r"ask for --time 45 \(minutes\) or fewer nodes$",
        "cscs-clariden", image="u/x:1", partition="debug", nodes=2,
    )  # fmt: skip
    for nodes, time in ((2, "45"), (1, None), (4, "0:22:00")):
        result = plan("cscs-clariden", image="u/x:1", partition="debug", nodes=nodes, time=time)
        (size,) = [r for r in result.results if r.check == "partition-size"]
        assert size.status == "pass", size
    fails(r"^-N 5: partition debug runs jobs of at most 4 nodes", "cscs-clariden",
          image="u/x:1", partition="debug", nodes=5)  # fmt: skip
    fails(r"^--time 1:00:00 on 2 nodes is 120 node-minutes", "cscs-clariden", image="u/x:1",
          partition="debug", nodes=2, time="1:00:00")  # fmt: skip
    assert "low" in load_site("cscs-clariden").scheduler.partitions


def test_daints_debug_partition_takes_two_nodes() -> None:
    """cscs-docs' Daint page: debug runs 30 minutes on at most 2 nodes a job."""
    fails(r"^-N 3: partition debug runs jobs of at most 2 nodes: ask for -N 2 or fewer",
          "cscs-daint", image="u/x:1", partition="debug", nodes=3)  # fmt: skip
    assert plan("cscs-daint", image="u/x:1", partition="debug", nodes=2).step


@pytest.mark.parametrize("site", ["cscs-clariden", "cscs-daint", "jupiter", "juwels-booster",
                                  "neuron", "perlmutter", "zih-alpha", "zih-capella", "zih-ml"])  # fmt: skip
@pytest.mark.parametrize("controller", ["mpi", "gloo", "torch", "torchrun"])
def test_a_built_in_profile_does_not_warn_about_itself_on_two_nodes(
    site: str, controller: str
) -> None:
    """Every 2-node launch at cscs-daint said `site cscs-daint sets no NCCL_SOCKET_IFNAME ...
    add it to the site profile's env`: a built-in profile must not warn about itself, at any
    controller across nodes (where NCCL_NET forces a network, its plugin carries the data)."""
    kind = load_site(site).runtime.kind
    image = "/shared/images/x.sif" if kind in ("apptainer", "singularity") else "reg.example/u/x:1"
    extra: dict[str, Any] = {"account": "a1"}
    if site == "neuron":
        extra["comment"] = "field=ai;appl=pytorch"
    result = plan(site, image=image, nodes=2, controller=controller, **extra)
    about_itself = [w for w in warned(result) if "profile" in w or f"site {site} sets" in w]
    assert about_itself == [], about_itself
