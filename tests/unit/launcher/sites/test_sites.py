"""Site profiles: the shipped ones, every validation error (FILE:LINE), selection order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _launch_helpers import isolated, write  # noqa: F401
from hvd_container.launcher.sites.loader import (
    choose_site,
    list_sites,
    load_site,
    select_site,
    slurm_cluster_name,
)
from hvd_container.launcher.sites.model import host_arch

from hvd_container.core.errors import UserError

SHIPPED = [
    "cscs-clariden", "cscs-daint", "jupiter", "juwels-booster", "local", "neuron", "perlmutter", "zih-alpha", "zih-capella",
    "zih-ml",
]  # fmt: skip

MINIMAL = "name: mysite\nruntime:\n  kind: apptainer\n"


def test_shipped_sites_are_listed_and_load() -> None:
    assert list_sites() == SHIPPED
    for name in SHIPPED:
        site = load_site(name)
        assert site.name == name
        assert site.source.endswith(f"{name}.yaml")


def test_site_facts_from_the_guides() -> None:
    neuron = load_site("neuron")
    assert neuron.scheduler.comment.required
    assert "horovod" not in neuron.scheduler.comment.allowed
    assert neuron.scheduler.gpu_request == "gres"
    assert neuron.runtime.kind == "singularity" and neuron.runtime.command == "exec"
    assert neuron.gpus_per_node("cas_v100_2") == 2
    perlmutter = load_site("perlmutter")
    assert perlmutter.scheduler.gpu_request == "gpus-per-node"
    assert perlmutter.scheduler.constraint == "gpu"
    assert perlmutter.mpi == "pmi2"
    assert perlmutter.runtime.modules == ["gpu", "nccl-plugin"]
    assert perlmutter.env["SLURM_CPU_BIND"] == "cores"
    assert load_site("zih-ml").arch == "ppc64le"
    assert load_site("zih-alpha").arch == "amd64"
    assert load_site("zih-alpha").gpus_per_node("alpha") == 8
    local = load_site("local")
    assert local.arch == host_arch()
    assert local.runtime.kind == "charliecloud" and local.mpi == "pmix"


def test_user_site_overrides_builtin(isolated: Path) -> None:  # noqa: F811
    write(
        isolated / "config" / "hvd-container" / "sites" / "neuron.yaml",
        "name: neuron\nruntime: {kind: apptainer}\n",
    )
    write(
        isolated / "config" / "hvd-container" / "sites" / "mine.yaml",
        MINIMAL.replace("mysite", "mine"),
    )
    assert list_sites() == sorted([*SHIPPED, "mine"])
    assert load_site("neuron").runtime.kind == "apptainer"
    assert load_site("mine").runtime.kind == "apptainer"


def test_site_from_path(tmp_path: Path) -> None:
    path = write(tmp_path / "elsewhere" / "x.yaml", MINIMAL)
    site = load_site(str(path))
    assert site.name == "mysite" and site.source == str(path)


def test_unknown_site_lists_the_allowed_ones() -> None:
    with pytest.raises(
        UserError,
        match=r"unknown site 'nope' \(allowed: cscs-clariden, cscs-daint, jupiter, juwels-booster, local, neuron, perlmutter, zih-alpha, zih-capella, zih-ml",
    ):
        load_site("nope")


def test_name_must_match_file_name(isolated: Path) -> None:  # noqa: F811
    write(
        isolated / "config" / "hvd-container" / "sites" / "other.yaml",
        "runtime: {kind: none}\nname: wrong\n",
    )
    with pytest.raises(
        UserError, match=r"other\.yaml:2: name: must match the file name 'other' \(got 'wrong'\)"
    ):
        load_site("other")


# Every validation error: (YAML text, expected message after "FILE:").
INVALID = [
    (
        MINIMAL + "color: red\n",
        r"4: color: unknown key \(allowed: name, runtime, description, other_runtimes, arch, cluster_names, login_host, jupyter_interface, scheduler, mpi, controller, gpu_driver, first_node_suffix, expected_busbw, nccl_finds_network, shared_paths, modules, site_modules, env, multi_node_env, binds, images, notes, acknowledge, sources\)",
    ),
    (
        MINIMAL + "scheduler:\n  qos: debug\n  colour: 1\n",
        r"6: scheduler.colour: unknown key \(allowed: partition, partitions, account, account_required, account_suffix, qos, constraint, comment, gpu_request, gpus_per_node, gpu, gpu_cc, cpus_per_node, cpus_per_gpu, cpus_per_task, gpu_jobs_only, ranks_per_node_as, time, max_time, default_time, interactive_max_time, qos_max_time, memory, requeue, max_grace, srun_options, sbatch_options\)",
    ),
    ("name: mysite\n", r"1: runtime: required key is missing"),
    ("name: mysite\nruntime:\n  flags: []\n", r"2: runtime.kind: required key is missing"),
    ("runtime: {kind: none}\n", r"1: name: required key is missing"),
    (
        "name: mysite\nruntime:\n  kind: docker\n",
        r"3: runtime.kind: not allowed \(got 'docker'\) \(allowed: apptainer, singularity, charliecloud, container-engine, none, podman-hpc, pyxis, sarus-suite, shifter\)",
    ),
    (
        MINIMAL + "arch: x86_64\n",
        r"4: arch: not allowed \(got 'x86_64'\) \(allowed: amd64, arm64, ppc64le, host\)",
    ),
    (
        MINIMAL + "mpi: pmi3\n",
        r"4: mpi: not allowed \(got 'pmi3'\) \(allowed: pmi2, pmix, pmix_v3, pmix_v4, pmix_v5, cray_shasta, none\)",
    ),
    (
        MINIMAL + "scheduler:\n  gpus_per_node: '4'\n",
        r"5: scheduler.gpus_per_node: expected an integer \(got '4'\)",
    ),
    (
        MINIMAL + "scheduler:\n  gpus_per_node: true\n",
        r"5: scheduler.gpus_per_node: expected an integer \(got True\)",
    ),
    (
        MINIMAL + "scheduler:\n  gpus_per_node: -1\n",
        r"5: scheduler.gpus_per_node: must be 0 or more \(got -1\)",
    ),
    (
        MINIMAL + "scheduler:\n  gpu_request: gpus\n",
        r"5: scheduler.gpu_request: not allowed \(got 'gpus'\) \(allowed: gres, gpus-per-node, none\)",
    ),
    (
        MINIMAL + "scheduler:\n  time: 2 hours\n",
        r"5: scheduler.time: not allowed \(allowed: a Slurm time: MINUTES, HH:MM:SS or D-HH:MM:SS\) \(got '2 hours'\)",
    ),
    (
        MINIMAL + "scheduler:\n  comment:\n    required: yes please\n",
        r"6: scheduler.comment.required: expected true or false \(got 'yes please'\)",
    ),
    (
        MINIMAL + "scheduler:\n  partition: big\n  partitions:\n    small: {gpus_per_node: 4}\n",
        r"4: scheduler: partition 'big' is not in partitions \(allowed: small\)",
    ),
    (
        MINIMAL + "scheduler:\n  partitions:\n    small: {gpus: 4}\n",
        r"6: scheduler.partitions.small.gpus: unknown key, did you mean 'gpus_per_node'\? \(allowed: gpus_per_node, cpus_per_node, cpus_per_gpu, cpus_by_gpu_count, gpu, gpu_cc, arch, max_time, default_time, max_nodes, max_node_minutes, memory, available_until\)",
    ),
    (
        MINIMAL + "scheduler:\n  partitions: [a, b]\n",
        r"5: scheduler.partitions: expected a mapping",
    ),
    (MINIMAL + "modules: gcc\n", r"4: modules: expected a list \(got 'gcc'\)"),
    (MINIMAL + "env:\n  NCCL_DEBUG: 1\n", r"5: env.NCCL_DEBUG: expected a string \(got 1\)"),
    (
        MINIMAL + "binds: [data:/data]\n",
        r"4: binds: 'data:/data' is not SRC\[:DST\[:ro\|rw\]\] with absolute paths",
    ),
    (
        MINIMAL + "binds: ['/data:/data:rx']\n",
        r"4: binds: '/data:/data:rx': the option must be ro or rw",
    ),
    (
        "name: My_Site\nruntime: {kind: none}\n",
        r"1: name: not allowed \(allowed: lower-case letters and digits in parts joined by one '\.', '_' or '-', e\.g\. cpu-bookworm\) \(got 'My_Site'\)",
    ),
    (
        "name: mysite\nruntime:\n  kind: shifter\n  modules: [gpu, gpu]\n",
        r"4: runtime.modules: each entry may appear once",
    ),
    (
        "name: mysite\nruntime:\n  kind: shifter\n  flags: [--module=gpu]\n",
        r"4: runtime.flags: shifter modules go in runtime.modules \(a second --module replaces the first\), not '--module=gpu'",
    ),
    (
        "name: mysite\nruntime:\n  kind: apptainer\n  command: start\n",
        r"4: runtime.command: not allowed \(got 'start'\) \(allowed: run, exec\)",
    ),
    (
        "name: mysite\nother_runtimes:\n  - kind: podman-hpc\n    gpus: true\nruntime: {kind: none}\n",
        r"4: other_runtimes.0.gpus: unknown key, did you mean 'gpu'\? \(allowed: kind, gpu, flags, python, injects_glibc, mpi_module\)",
    ),
    (MINIMAL + "env:\n  1: x\n", r"5: env: key 1: expected a string"),
    (
        MINIMAL + "scheduler: 3\n",
        r"4: scheduler: expected a mapping \(keys: partition, partitions, account, .*, sbatch_options\) \(got 3\)",
    ),
    (MINIMAL + "other_runtimes: {kind: pyxis}\n", r"4: other_runtimes: expected a list"),
    (
        MINIMAL + "scheduler:\n  partitions:\n    p: {gpus_per_node: 2, arch: sparc}\n",
        r"6: scheduler.partitions.p.arch: not allowed \(got 'sparc'\) \(allowed: amd64, arm64, ppc64le\)",
    ),
    (MINIMAL + "login_host: 22\n", r"4: login_host: expected a string \(got 22\)"),
    ("- a\n- b\n", r"1: the top level must be a mapping of keys, not list"),
    ("name: [unclosed\n", r"2: not valid YAML"),
    (MINIMAL + "images:\n  template: 3\n", r"5: images.template: expected a string \(got 3\)"),
    # names that would be shell code in a batch script's `export NAME=...` line
    (
        MINIMAL + "env:\n  OK: 1x\n  'A;rm -rf ~': x\n",
        r"6: env: key 'A;rm -rf ~': not an environment variable name \(allowed: letters, digits and _, not starting with a digit\)",
    ),
    (
        MINIMAL + "env:\n  1X: x\n",
        r"5: env: key '1X': not an environment variable name \(allowed: letters, digits and _, not starting with a digit\)",
    ),
    (
        MINIMAL + "images:\n  template: '{name!x}.sif'\n",
        r"5: images.template: not a usable template: unknown placeholder \{name!x\}",
    ),
]


@pytest.mark.parametrize(("text", "message"), INVALID)
def test_validation_errors_name_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "bad.yaml", text)
    with pytest.raises(UserError) as info:
        load_site(str(path))
    line = str(info.value)
    assert "\n" not in line
    assert re.fullmatch(re.escape(str(path)) + ":" + message + ".*", line), line


def test_an_edit_that_breaks_the_file_is_reported_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path / "s.yaml", MINIMAL)
    assert load_site(str(path)).runtime.kind == "apptainer"
    write(path, MINIMAL.replace("apptainer", "pyxis"))
    assert load_site(str(path)).runtime.kind == "pyxis"
    write(path, MINIMAL + "bogus: 1\n")
    with pytest.raises(UserError, match=r"s\.yaml:4: bogus: unknown key"):
        load_site(str(path))


# Selection order: --site, $HVD_CONTAINER_SITE, config.yaml, Slurm cluster name, local.


def test_default_is_local() -> None:
    assert choose_site(None) == ("local", "default")
    assert select_site(None).name == "local"


def test_flag_wins_over_everything(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("HVD_CONTAINER_SITE", "neuron")
    write(isolated / "config" / "hvd-container" / "config.yaml", "site: zih-ml\n")
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "perlmutter")
    assert choose_site("zih-alpha") == ("zih-alpha", "--site")


def test_env_var_wins_over_config(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("HVD_CONTAINER_SITE", "neuron")
    write(isolated / "config" / "hvd-container" / "config.yaml", "site: zih-ml\n")
    assert choose_site(None) == ("neuron", "$HVD_CONTAINER_SITE")


def test_config_wins_over_cluster_name(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    config = write(isolated / "config" / "hvd-container" / "config.yaml", "# mine\nsite: zih-ml\n")
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "perlmutter")
    assert choose_site(None) == ("zih-ml", f"{config}:2")
    assert select_site(None).name == "zih-ml"
    assert choose_site(None)[0] == "zih-ml"  # again, from the cache


def test_config_errors(isolated: Path) -> None:  # noqa: F811
    config = write(
        isolated / "config" / "hvd-container" / "config.yaml", "site: neuron\nsight: 1\n"
    )
    with pytest.raises(
        UserError, match=re.escape(f"{config}:2: sight: unknown key (allowed: site)")
    ):
        choose_site(None)
    write(config, "site: [a]\n")
    with pytest.raises(
        UserError, match=re.escape(f"{config}:1: site: expected a site name or path")
    ):
        choose_site(None)


def test_a_bad_site_name_from_the_environment_says_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HVD_CONTAINER_SITE", "nowhere")
    with pytest.raises(UserError) as info:
        select_site(None)
    assert str(info.value).startswith("$HVD_CONTAINER_SITE: unknown site 'nowhere' (allowed: ")
    with pytest.raises(UserError) as info:
        select_site("nowhere")  # typed on the command line: no origin needed
    assert str(info.value).startswith("unknown site 'nowhere'")


def test_a_bad_site_name_from_the_config_names_its_line(isolated: Path) -> None:  # noqa: F811
    config = write(isolated / "config" / "hvd-container" / "config.yaml", "site: nowhere\n")
    with pytest.raises(UserError) as info:
        select_site(None)
    assert str(info.value).startswith(f"{config}:1: unknown site 'nowhere' (allowed: ")


def test_config_without_site_falls_through(isolated: Path) -> None:  # noqa: F811
    write(isolated / "config" / "hvd-container" / "config.yaml", "# nothing yet\n")
    assert choose_site(None) == ("local", "default")


def test_xdg_config_home_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "elsewhere"
    write(other / "hvd-container" / "config.yaml", "site: neuron\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(other))
    assert choose_site(None)[0] == "neuron"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    write(tmp_path / "home" / ".config" / "hvd-container" / "config.yaml", "site: zih-ml\n")
    assert choose_site(None)[0] == "zih-ml"


def test_cluster_name_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "Perlmutter")
    assert choose_site(None) == ("perlmutter", "Slurm cluster name 'Perlmutter'")


def test_cluster_name_from_slurm_conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = write(
        tmp_path / "slurm.conf", "SlurmctldHost=x\n# ClusterName=old\nClusterName=neuron\n"
    )
    monkeypatch.setenv("SLURM_CONF", str(conf))
    assert slurm_cluster_name() == "neuron"
    assert choose_site(None)[0] == "neuron"


def test_unknown_cluster_name_means_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "somewhere-else")
    assert choose_site(None) == ("local", "default")


def test_env_var_may_be_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "p.yaml", MINIMAL)
    monkeypatch.setenv("HVD_CONTAINER_SITE", str(path))
    assert select_site(None).name == "mysite"


def test_runtime_for_other_kinds() -> None:
    perlmutter = load_site("perlmutter")
    assert perlmutter.runtime_for(None).kind == "shifter"
    assert perlmutter.runtime_for("podman-hpc").mpi_module == "mpi"  # type: ignore[attr-defined]
    assert perlmutter.runtime_for("pyxis").kind == "pyxis"
    with pytest.raises(
        UserError,
        match=r"--runtime: unknown runtime 'docker' \(allowed: apptainer, singularity, charliecloud, container-engine, none, podman-hpc, pyxis, sarus-suite, shifter\)",
    ):
        perlmutter.runtime_for("docker")


def test_every_error_of_a_profile_at_once_sorted_by_line(tmp_path: Path) -> None:
    # (cross-field checks, such as env names, run once every field is valid)
    text = MINIMAL + "arch: sparc\nscheduler:\n  colour: red\n  time: soon\nmodules: [1]\n"
    path = write(tmp_path / "bad.yaml", text)
    with pytest.raises(UserError) as info:
        load_site(str(path))
    problems = info.value.problems
    keys = [p.split(": ")[1] for p in problems]
    assert keys == ["arch", "scheduler.colour", "scheduler.time", "modules.0"], problems
    lines = [int(p.split(": ")[0].rsplit(":", 1)[1]) for p in problems]
    assert lines == sorted(lines)


def test_a_user_override_of_a_builtin_acknowledges_warnings_it_cannot_act_on(
    isolated: Path,  # noqa: F811
) -> None:
    """A user's own neuron.yaml that says NCCL does not find the network by itself (their
    nodes' fabric needs settings they cannot know) warns on every multi-node GPU launch; it
    acknowledges those two warnings by name."""
    from _launch_helpers import plan_launch
    from hvd_container.launcher.plan.request import LaunchRequest

    request = LaunchRequest(script="t.py", image="u/i:t", runtime="shifter", modules=["gpu"], nodes=2, comment="field=ai;appl=pytorch")  # fmt: skip
    own = write(
        isolated / "config" / "hvd-container" / "sites" / "neuron.yaml",
        "extends: neuron\nnccl_finds_network: false\n",
    )
    loud = plan_launch(load_site("neuron"), request)
    noisy = {r.check for r in loud.results if r.status == "warn"}
    assert {"nccl-interface", "nccl-network"} <= noisy
    own.write_text(own.read_text() + "acknowledge: [nccl-interface, nccl-network]\n")
    site = load_site("neuron")
    assert site.scheduler.comment.required  # the built-in's values, from the file it extends
    quiet = plan_launch(site, request)
    assert not any("NCCL" in w for w in quiet.warnings)  # launches no longer print them
    shown = {r.check: r for r in quiet.results}
    assert shown["nccl-network"].status == "warn" and shown["nccl-network"].acknowledged
    assert shown["nccl-network"].message.startswith("acknowledged in site neuron's profile: ")


def test_only_checks_can_be_acknowledged_and_a_failure_never_is(tmp_path: Path) -> None:
    bad = write(tmp_path / "s.yaml", MINIMAL + "acknowledge: [nccl-netwrok]\n")
    with pytest.raises(
        UserError,
        match=r"s\.yaml:4: acknowledge: 'nccl-netwrok' is not a check \(allowed: image, facts, ",
    ):
        load_site(str(bad))
    from _launch_helpers import plan_launch
    from hvd_container.launcher.plan.request import LaunchRequest

    strict = write(tmp_path / "n.yaml", "extends: neuron\nname: n\nacknowledge: [comment]\n")
    with pytest.raises(UserError, match=r"^site n takes --comment in the form .*, and requires it"):
        plan_launch(load_site(str(strict)), LaunchRequest(script="t.py", image="u/i:t", ntasks=8))


def test_extends_names_a_profile_or_a_path_and_refuses_cycles(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", "extends: b.yaml\nname: a\n")
    write(tmp_path / "b.yaml", "extends: a.yaml\nname: b\nruntime: {kind: none}\n")
    with pytest.raises(UserError, match=r"extends forms a cycle"):
        load_site(str(tmp_path / "a.yaml"))
    write(tmp_path / "c.yaml", "extends: nosuchsite\nname: c\n")
    with pytest.raises(UserError, match=r"c\.yaml:1: extends: unknown site 'nosuchsite'"):
        load_site(str(tmp_path / "c.yaml"))
    write(tmp_path / "d.yaml", "extends: perlmutter\nname: d\nscheduler: {account: m1_g}\n")
    derived = load_site(str(tmp_path / "d.yaml"))
    assert derived.scheduler.account == "m1_g" and derived.runtime.kind == "shifter"


def test_a_misspelt_site_or_key_gets_the_nearest_name(tmp_path: Path) -> None:
    with pytest.raises(
        UserError, match=r"^unknown site 'perlmuter', did you mean 'perlmutter'\? \(allowed: "
    ):
        load_site("perlmuter")
    with pytest.raises(UserError, match=r"^unknown site 'nowhere' \(allowed: "):
        load_site("nowhere")  # nothing near: no guess
    from hvd_container.launcher.sites.loader import validate_site_file

    bad = write(tmp_path / "s.yaml", MINIMAL + "scheduler:\n  partiton: debug\n")
    with pytest.raises(
        UserError, match=r"scheduler\.partiton: unknown key, did you mean 'partition'\? \(allowed: "
    ):
        validate_site_file(bad)


def test_the_readmes_slingshot_gh200_snippet_is_a_valid_profile(tmp_path: Path) -> None:
    """launcher/sites/README.md's GH200 settings load as written and reach a two-node launch."""
    from _launch_helpers import plan_launch
    from hvd_container.launcher.plan.request import LaunchRequest

    readme = (Path(__file__).resolve().parents[4] / "launcher" / "sites" / "README.md").read_text()
    snippet = re.search(r"## Slingshot with GH200.*?```yaml\n(.*?)```", readme, re.S)
    assert snippet is not None
    profile = tmp_path / "gh.yaml"
    profile.write_text("name: gh\nruntime: {kind: apptainer}\n" + snippet.group(1))
    site = load_site(str(profile))
    launch = plan_launch(site, LaunchRequest(script="t.py", image="/x.sif", nodes=2, ntasks=2))
    assert (
        launch.env["FI_CXI_RDZV_PROTO"] == "alt_read" and launch.env["NCCL_NET"] == "AWS Libfabric"
    )
    assert "--network=disable_rdzv_get" in launch.step
    alone = plan_launch(site, LaunchRequest(script="t.py", image="/x.sif", nodes=1, ntasks=1))
    assert "FI_CXI_RDZV_PROTO" not in alone.env
