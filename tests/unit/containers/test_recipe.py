"""Every way a recipe can be malformed gives one line naming file, line, key path and allowed values;
every problem of a file is reported in one run, sorted by line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _recipe_helpers import CPU_RECIPE, line_of, merged, write
from hvd_container.containers.recipe import FIELDS
from hvd_container.containers.recipe_loader import list_builtin, load_recipe, read_recipe

from hvd_container.core.errors import UserError


def error_of(ref: str | Path) -> str:
    with pytest.raises(UserError) as info:
        load_recipe(ref)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_builtin_recipes_all_validate() -> None:
    names = list_builtin()
    assert {"cpu-bookworm", "perlmutter-tf210-pt113", "lightning-pt113"} <= set(names)
    for name in names:
        recipe = load_recipe(name)
        assert recipe.name == name


def test_cpu_recipe_fields() -> None:
    recipe = load_recipe("cpu-bookworm")
    assert recipe.image_tag == "cpu-bookworm:1"
    assert recipe.base.debootstrap_suite == "bookworm"
    assert recipe.pytorch is not None and recipe.pytorch.version == "2.13.0"
    assert recipe.horovod is not None and recipe.horovod.patches == ["cxx17"]
    assert recipe.horovod.controllers == ["mpi", "gloo"]
    assert not recipe.gpu


def test_unknown_top_level_key_lists_allowed(tmp_path: Path) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, colour="red"))
    msg = error_of(path)
    assert msg.startswith(f"{path}:{line_of(path, 'colour')}: colour: unknown key (allowed: ")
    assert ", ".join(FIELDS) in msg


def test_unknown_nested_key_lists_allowed(tmp_path: Path) -> None:
    hvd = dict(CPU_RECIPE["horovod"], frameworx=["pytorch"])
    path = write(tmp_path, merged(CPU_RECIPE, horovod=hvd))
    msg = error_of(path)
    assert msg.startswith(f"{path}:{line_of(path, 'horovod', 'frameworx')}: horovod.frameworx:")
    assert (
        "unknown key, did you mean 'frameworks'? (allowed: version, frameworks, controllers, gpu_operations"
        in msg
    )


def test_wrong_type_names_key_and_value(tmp_path: Path) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, version=["1"]))
    msg = error_of(path)
    assert msg == f"{path}:{line_of(path, 'version')}: version: expected a string"


def test_a_whole_number_version_is_its_string(tmp_path: Path) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, version=1))
    assert load_recipe(path).version == "1"
    assert load_recipe(path).image_tag.endswith(":1")


def test_a_decimal_version_is_refused_with_the_quotes_to_write(tmp_path: Path) -> None:
    # python: {version: 3.10} arrives as the float 3.1: taking it would build Python 3.1
    path = write(tmp_path, merged(CPU_RECIPE, python={"version": 3.10}))
    msg = error_of(path)
    assert msg.startswith(f"{path}:{line_of(path, 'python', 'version')}: python.version: ")
    assert 'write the version in quotes, e.g. version: "3.10"' in msg


def test_base_shorthand_is_the_image(tmp_path: Path) -> None:
    short = write(tmp_path, merged(CPU_RECIPE, base="debian:bookworm"), "short.yaml")
    full = write(tmp_path, merged(CPU_RECIPE, base={"image": "debian:bookworm"}), "full.yaml")
    assert load_recipe(short).base.image == "debian:bookworm"
    assert load_recipe(short).digest() == load_recipe(full).digest()
    bad = write(tmp_path, merged(CPU_RECIPE, base="Not An Image"), "bad.yaml")
    assert error_of(bad).startswith(f"{bad}:{line_of(bad, 'base')}: base.image: not an image")


def test_every_error_of_a_file_at_once_sorted_by_line(tmp_path: Path) -> None:
    hvd = dict(CPU_RECIPE["horovod"], controllers=["mpi", "ucx"])
    path = write(tmp_path, merged(CPU_RECIPE, colour="red", name="Bad Name", horovod=hvd, arch="x"))
    with pytest.raises(UserError) as info:
        load_recipe(path)
    problems = info.value.problems
    keys = [p.split(": ")[1] for p in problems]
    assert sorted(keys) == sorted(["colour", "name", "horovod.controllers.1", "arch"])
    lines = [int(p.split(": ")[0].rsplit(":", 1)[1]) for p in problems]
    assert lines == sorted(lines) and len(set(lines)) == 4
    assert all("\n" not in p and p.startswith(f"{path}:") for p in problems)


def test_every_compatibility_rule_that_fails_is_reported(tmp_path: Path) -> None:
    # torch from pip on ppc64le (no wheels) and Horovod for a TensorFlow the recipe lacks
    hvd = dict(CPU_RECIPE["horovod"], frameworks=["pytorch", "tensorflow"])
    path = write(tmp_path, merged(CPU_RECIPE, arch="ppc64le", horovod=hvd))
    with pytest.raises(UserError) as info:
        load_recipe(path)
    keys = [p.split(": ")[1] for p in info.value.problems]
    assert "pytorch.source" in keys and any(k.startswith("horovod.frameworks") for k in keys)


def test_no_regular_expression_in_messages(tmp_path: Path) -> None:
    cases = {
        "name": "Has Spaces",
        "version": "-bad",
        "python": {"version": "python3"},
        "mpi": {"flavor": "mpich", "version": "v4"},
        "pytorch": dict(CPU_RECIPE["pytorch"], cuda_tag="cu11"),
    }
    for key, value in cases.items():
        msg = error_of(write(tmp_path, merged(CPU_RECIPE, **{key: value}), f"{key}.yaml"))
        assert "pattern" not in msg and "^" not in msg and "[" not in msg, msg
        assert "(allowed: " in msg, msg


def test_a_scalar_where_a_section_goes_lists_its_keys(tmp_path: Path) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, python="3.12"))
    msg = error_of(path)
    assert msg == (
        f"{path}:{line_of(path, 'python')}: python: expected a mapping (keys: version, source) "
        "(got '3.12')"
    )


def test_bad_enum_lists_allowed_values(tmp_path: Path) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, arch="sparc64"))
    msg = error_of(path)
    assert msg == (
        f"{path}:{line_of(path, 'arch')}: arch: not allowed (got 'sparc64') "
        "(allowed: amd64, arm64, ppc64le)"
    )


def test_bad_list_entry_points_at_entry(tmp_path: Path) -> None:
    hvd = dict(CPU_RECIPE["horovod"], controllers=["mpi", "ucx"])
    path = write(tmp_path, merged(CPU_RECIPE, horovod=hvd))
    msg = error_of(path)
    assert "horovod.controllers.1: not allowed (got 'ucx') (allowed: mpi, gloo)" in msg
    assert msg.startswith(f"{path}:")


def test_repeated_list_entry(tmp_path: Path) -> None:
    hvd = dict(CPU_RECIPE["horovod"], controllers=["mpi", "mpi"])
    path = write(tmp_path, merged(CPU_RECIPE, horovod=hvd))
    msg = error_of(path)
    assert msg.startswith(f"{path}:{line_of(path, 'horovod', 'controllers')}: horovod.controllers:")
    assert "each entry may appear once" in msg


def test_missing_required_key(tmp_path: Path) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, python=None))
    assert error_of(path) == f"{path}:1: python: required key is missing"


def test_missing_nested_key_points_at_section(tmp_path: Path) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, mpi={"pmi": ["pmix"]}))
    assert error_of(path) == f"{path}:{line_of(path, 'mpi')}: mpi.flavor: required key is missing"


def test_bad_pattern(tmp_path: Path) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, name="Has Spaces"))
    msg = error_of(path)
    assert msg.startswith(
        f"{path}:{line_of(path, 'name')}: name: not allowed (allowed: lower-case letters and digits"
    )
    assert "(got 'Has Spaces')" in msg


def test_bad_yaml_names_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: a\nbase: [unclosed\npython:\n  version: '3.11'\n")
    msg = error_of(path)
    assert msg.startswith(f"{path}:")
    assert "not valid YAML" in msg


def test_top_level_not_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "- a\n- b\n")
    assert error_of(path) == f"{path}:1: the top level must be a mapping of keys, not list"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    assert error_of(path) == f"{path}: no such file"


def test_unknown_builtin_lists_builtins() -> None:
    msg = error_of("no-such-recipe")
    assert msg.startswith("recipe 'no-such-recipe': no such file and no built-in recipe")
    assert "cpu-bookworm" in msg


def test_extends_merges_and_overrides(tmp_path: Path) -> None:
    write(tmp_path, CPU_RECIPE, "parent.yaml")
    child = write(
        tmp_path,
        "extends: parent.yaml\nname: child\npip: [rich]\nmpi:\n  version: '4.1.4'\n",
        "child.yaml",
    )
    recipe = load_recipe(child)
    assert recipe.name == "child"
    assert recipe.pip == ["rich"]
    assert recipe.mpi is not None and recipe.mpi.flavor == "openmpi"  # from the parent
    assert recipe.mpi.version == "4.1.4"


def test_extends_null_removes_section(tmp_path: Path) -> None:
    write(tmp_path, merged(CPU_RECIPE, apt=["vim"]), "parent.yaml")
    child = write(tmp_path, "extends: parent.yaml\napt: null\n", "child.yaml")
    assert load_recipe(child).apt == []


def test_extends_builtin_by_name(tmp_path: Path) -> None:
    child = write(tmp_path, "extends: cpu-bookworm\nname: mine\npip: [rich]\n")
    recipe = load_recipe(child)
    assert recipe.name == "mine" and recipe.pip == ["rich"]
    assert recipe.horovod is not None and recipe.horovod.version == "0.28.1"


def test_extends_error_points_at_the_file_that_set_the_key(tmp_path: Path) -> None:
    parent = write(tmp_path, merged(CPU_RECIPE, arch="sparc"), "parent.yaml")
    child = write(tmp_path, "extends: parent.yaml\nname: child\n", "child.yaml")
    msg = error_of(child)
    assert msg.startswith(f"{parent}:{line_of(parent, 'arch')}: arch: not allowed (got 'sparc')")


def test_extends_cycle(tmp_path: Path) -> None:
    a = write(tmp_path, "extends: b.yaml\nname: a\n", "a.yaml")
    write(tmp_path, "extends: a.yaml\nname: b\n", "b.yaml")
    msg = error_of(a)
    assert msg.startswith(f"{a}: extends forms a cycle: ")
    assert msg.endswith("a.yaml")


def test_extends_missing_parent(tmp_path: Path) -> None:
    child = write(tmp_path, "name: c\nextends: gone.yaml\n", "child.yaml")
    assert error_of(child) == (
        f"{child}:2: extends: 'gone.yaml': no such file (relative paths are looked up next to "
        "child.yaml, then in the current directory)"
    )


def test_extends_unknown_builtin_points_at_the_extends_line(tmp_path: Path) -> None:
    child = write(tmp_path, "name: c\nextends: no-such-parent\n", "child.yaml")
    msg = error_of(child)
    assert msg.startswith(f"{child}:2: extends: recipe 'no-such-parent': no such file")
    assert "cpu-bookworm" in msg


def test_extends_wrong_type(tmp_path: Path) -> None:
    child = write(tmp_path, "name: c\nextends: [a, b]\n", "child.yaml")
    assert error_of(child) == f"{child}:2: extends: must be a recipe name or a path"


def test_digest_ignores_layout(tmp_path: Path) -> None:
    a = write(tmp_path, CPU_RECIPE, "a.yaml")
    b = write(tmp_path, "# comment\n" + a.read_text(), "b.yaml")
    assert load_recipe(a).digest() == load_recipe(b).digest()
    c = write(tmp_path, merged(CPU_RECIPE, pip=["rich"]), "c.yaml")
    assert load_recipe(c).digest() != load_recipe(a).digest()


@pytest.mark.parametrize(
    ("section", "key", "bad"),
    [
        ("horovod", "version", "0.28.x"),
        ("pytorch", "version", "2.x"),
        ("pytorch", "torchvision", "0.15.*"),
        ("lightning", "version", "latest"),
    ],
)
def test_versions_pip_cannot_pin_are_refused(
    tmp_path: Path, section: str, key: str, bad: str
) -> None:
    data = merged(CPU_RECIPE, lightning={"version": "2.4.0"})
    data[section] = {**data[section], key: bad}
    path = write(tmp_path, data)
    assert error_of(path) == (
        f"{path}:{line_of(path, section, key)}: {section}.{key}: not a version pip can pin "
        "(PEP 440, e.g. 0.28.1, 2.13.0, 1.12.0a0+bd13bc6; no wildcards such as 2.x) "
        f"(got {bad!r})"
    )


def test_local_and_prerelease_versions_are_fine(tmp_path: Path) -> None:
    data = merged(CPU_RECIPE, pytorch={**CPU_RECIPE["pytorch"], "version": "2.13.0+cpu"})
    assert load_recipe(write(tmp_path, data)).pytorch.version == "2.13.0+cpu"  # type: ignore[union-attr]


def test_validate_command_reports_a_bad_version_as_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hvd_container.cli.app import main

    path = write(tmp_path, "extends: cpu-bookworm\nhorovod:\n  version: 0.28.x\n")
    assert main(["recipes", "validate", str(path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"FAIL {path}:3: horovod.version: not a version pip can pin (PEP 440, e.g. 0.28.1, "
        "2.13.0, 1.12.0a0+bd13bc6; no wildcards such as 2.x) (got '0.28.x')"
    ]


@pytest.mark.parametrize("key", ["BAD KEY", "1ST", "A-B", "A=B", 'A"', ""])
def test_env_names_are_checked(tmp_path: Path, key: str) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, env={"OK": "1", key: "x"}))
    line = line_of(path, "env", "OK") + 1
    assert error_of(path) == (
        f"{path}:{line}: env: key {key!r}: not an environment variable name (allowed: letters, "
        "digits and _, not starting with a digit)"
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ('say "hi"', "a double quote cannot be carried into the Singularity definition"),
        ("a`id`", "command substitution (` or $( ) is not allowed"),
        ("$(id)", "command substitution (` or $( ) is not allowed"),
        ("cost: 5$", "a $ may only start a reference $NAME or ${NAME}"),
        ("${HOME:-/root}", "a $ may only start a reference $NAME or ${NAME}"),
        (
            "a\nb",
            "control characters and line breaks (newline, carriage return, tab, U+2028, ...) are not allowed",
        ),
    ],
)
def test_env_values_that_differ_between_docker_and_the_definition(
    tmp_path: Path, value: str, problem: str
) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, env={"V": value}))
    msg = error_of(path)
    assert msg.startswith(f"{path}:{line_of(path, 'env', 'V')}: env.V: {problem}")


@pytest.mark.parametrize("value", ["/opt/x/bin:$PATH", "${HOME}/data", "a\\b", "it's; #1", ""])
def test_env_values_both_outputs_agree_on_are_fine(tmp_path: Path, value: str) -> None:
    assert load_recipe(write(tmp_path, merged(CPU_RECIPE, env={"V": value}))).env == {"V": value}


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("a b", "not a label key"),
        ('a"b', "not a label key"),
        ("a=b", "not a label key"),
        ("org.hvd-container.recipe.name", "keys starting with org.hvd-container. are set by"),
    ],
)
def test_label_keys_are_checked(tmp_path: Path, key: str, problem: str) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, labels={key: "x"}))
    msg = error_of(path)
    line = line_of(path, "labels") + 1
    assert msg.startswith(f"{path}:{line}: labels: key {key!r}: {problem}")


def test_label_values_with_dollar_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, labels={"home": "$HOME"}))
    assert error_of(path).startswith(
        f"{path}:{line_of(path, 'labels', 'home')}: labels.home: a $ is not allowed in labels"
    )


def test_duplicate_keys_are_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "extends: cpu-bookworm\nenv:\n  A: '1'\n  A: '2'\n")
    assert error_of(path) == f"{path}:4: env.A: key appears twice (first on line 3): keep one"


def test_duplicate_top_level_keys_are_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "name: a\nversion: '1'\nname: b\n")
    assert error_of(path) == f"{path}:3: name: key appears twice (first on line 1): keep one"


@pytest.mark.parametrize("field", ["env", "labels"])
def test_a_key_with_a_trailing_newline_is_refused(tmp_path: Path, field: str) -> None:
    """`$` in re.match also matches before a trailing newline: keys are matched whole."""
    path = write(tmp_path, merged(CPU_RECIPE, **{field: {"A\n": "1"}}))
    with pytest.raises(UserError) as info:
        load_recipe(path)
    assert f"{field}" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("changes", "key", "message"),
    [
        ({"pip": ["--index-url=http://evil/simple"]}, "pip.0", "pip options (--index-url=..., -r FILE) are not allowed"),
        ({"pip": ["-r", "reqs.txt"]}, "pip.0", "pip options"),
        ({"apt": ["-oAPT::Update::Pre-Invoke::=id"]}, "apt.0", "apt options such as -o are not allowed"),
        ({"apt": ["vim --allow-unauthenticated"]}, "apt.0", "not a Debian package"),
        ({"pytorch": {**CPU_RECIPE["pytorch"], "version": " 2.13.0"}}, "pytorch.version", "a version has no spaces"),
        ({"base": {"image": "debian:bookworm AS x"}}, "base.image", "not an image reference"),
        ({"description": "%setup"}, "description", "may not start with %"),
        ({"checks": ["  %files"]}, "checks.0", "may not start with %"),
        ({"checks": ["true \\"]}, "checks.0", "ends with a backslash"),
        ({"checks": ["cat <<EOF"]}, "checks.0", "here-document"),
        ({"labels": {"team": "ml\u2028x"}}, "labels.team", "line breaks"),
    ],
)  # fmt: skip
def test_values_that_would_leave_their_instruction_are_refused(
    tmp_path: Path,
    changes: dict,
    key: str,
    message: str,  # type: ignore[type-arg]
) -> None:
    path = write(tmp_path, merged(CPU_RECIPE, **changes))
    with pytest.raises(UserError) as info:
        load_recipe(path)
    text = str(info.value)
    assert text.startswith(f"{path}:") and f": {key}: " in text and message in text, text
    assert "\n" not in text


def test_an_error_about_an_extended_file_names_that_file(tmp_path: Path) -> None:
    """A value is only shown next to the name of the file it comes from."""
    other = tmp_path / "other.yaml"
    other.write_text("extends: cpu-bookworm\npassword: hunter2\n")
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: {other}\nversion: '1'\n")
    with pytest.raises(UserError) as info:
        load_recipe(child)
    assert str(info.value).startswith(f"{other}:2: password: unknown key")


def test_a_derived_recipe_whose_parts_install_from_a_lock_says_it_needs_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README tour's pattern on the GPU recipe: the parent's lock does not carry over, and
    CUDA and NCCL from PyPI are installed from a lock alone, so render refuses with the command
    that makes the lock and writes no Dockerfile that cannot build, while validate and show
    check and show the recipe and say that build and render need the lock."""
    from hvd_container.cli.app import main

    derived = write(tmp_path, "extends: gpu-bookworm\nname: g2\n", "g2.yaml")
    message = error_of(derived)
    assert message == (
        f"{derived}: recipe g2 takes cuda and nccl from PyPI, which a build installs only from "
        f"a lock, and {tmp_path / 'g2.lock'} does not exist (a recipe that extends another does "
        f"not take its lock): make it with `hvd-container lock {derived}`"
    )
    assert main(["recipes", "validate", str(derived)]) == 0
    out = capsys.readouterr().out
    parent = Path(load_recipe.__code__.co_filename).parents[1] / "recipes" / "gpu-bookworm.yaml"
    inherited = (
        f"{derived}: description: inherited word for word from {parent}: give the recipe its own"
    )
    assert out == (
        f"OK   {derived} (g2:1)\nNOTE {inherited}\n"
        f"NOTE no lock yet: build and render need one: `hvd-container lock {derived}`\n"
    )
    assert main(["recipes", "show", str(derived)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[1:3] == [
        f"# note: {inherited}",
        f"# note: no lock yet: build and render need one: `hvd-container lock {derived}`",
    ]
    assert "name: g2" in shown
    broken = write(
        tmp_path, "extends: gpu-bookworm\nname: g3\npython: {version: '2.7'}\n", "g3.yaml"
    )
    assert main(["recipes", "validate", str(broken)]) == 2  # a wrong recipe still fails
    assert "python.version" in capsys.readouterr().err
    assert main(["render", str(derived)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "hvd-container lock" in err
    # `lock` reads it without one: that is how the lock is made
    assert read_recipe(derived).name == "g2"


def test_validate_notes_the_lists_a_derived_recipe_replaces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`pip: [transformers]` under cpu-bookworm drops the parent's numpy pin: lists replace,
    mappings merge; validate says so, with the line, and nothing for a list given unchanged or
    a mapping (env) that merges."""
    from hvd_container.cli.app import main

    derived = write(
        tmp_path,
        "extends: cpu-bookworm\nname: d\ndescription: mine\nenv: {A: '1'}\npip: [transformers]\n",
        "d.yaml",
    )
    assert main(["recipes", "validate", str(derived), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["recipes"]
    assert row["ok"] is True
    assert row["notes"] == [
        f"{derived}:5: pip replaces the inherited list, without numpy==2.4.6 (lists replace, "
        "they do not merge: repeat an item to keep it)"
    ]
    same = write(
        tmp_path,
        "extends: cpu-bookworm\nname: e\ndescription: mine\npip: [numpy==2.4.6, rich]\n",
        "e.yaml",
    )  # the parent's items kept: nothing to say
    assert main(["recipes", "validate", str(same)]) == 0
    assert capsys.readouterr().out == f"OK   {same} (e:1)\n"


def test_compute_capabilities_as_people_write_them(tmp_path: Path) -> None:
    """The schema's own example, `cuda_cc: [80]`, and the quoted form mean the same."""
    for written in ([80, 90], ["80", "90"]):
        data = merged(CPU_RECIPE, horovod={**CPU_RECIPE["horovod"], "cuda_cc": written})
        recipe = read_recipe(write(tmp_path, data))
        assert recipe.horovod is not None and recipe.horovod.cuda_cc == ["80", "90"]
    bad = merged(CPU_RECIPE, horovod={**CPU_RECIPE["horovod"], "cuda_cc": [8]})
    assert "not allowed (allowed: a compute capability without the dot" in error_of(
        write(tmp_path, bad)
    )


@pytest.mark.parametrize(("given", "arch"), [("aarch64", "arm64"), ("x86_64", "amd64")])
def test_the_kernels_names_of_an_architecture_are_taken(
    tmp_path: Path, given: str, arch: str
) -> None:
    """`arch: aarch64` (what `uname -m` says on Grace Hopper) was refused."""
    path = write(tmp_path, f"extends: cpu-bookworm-torch\nname: k\narch: {given}\n", "k.yaml")
    assert read_recipe(path).arch == arch
    base = write(tmp_path, "extends: cpu-bookworm-torch\nname: b\n", "b.yaml")
    assert read_recipe(base, arch=given).arch == arch  # --arch aarch64 too


def test_a_list_of_the_kernels_names_is_two_images_and_a_repeat_is_refused(
    tmp_path: Path,
) -> None:
    from hvd_container.containers.recipe_loader import image_arches

    pair = write(tmp_path, "extends: cpu-bookworm-torch\nname: p\narch: [x86_64, aarch64]\n", "p.yaml")  # fmt: skip
    assert image_arches(pair) == ["amd64", "arm64"]
    assert read_recipe(pair, arch="aarch64").version == "1-arm64"
    twice = write(tmp_path, "extends: cpu-bookworm-torch\nname: t\narch: [x86_64, amd64]\n", "t.yaml")  # fmt: skip
    with pytest.raises(UserError, match="arch: each architecture may appear once"):
        read_recipe(twice, arch="amd64")


def test_a_built_in_recipe_is_shown_without_the_notes_for_recipe_authors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """gpu-bookworm-torch replaces its parent's checks on purpose: a user, who cannot edit
    it, is not told to repeat an item to keep it; the same lines as a file are told."""
    from hvd_container.containers.recipe_loader import builtin_path, inheritance_notes

    from hvd_container.cli.app import main

    assert inheritance_notes("gpu-bookworm-torch")  # the project's own lint still sees it
    assert main(["recipes", "show", "gpu-bookworm-torch"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# gpu-bookworm-torch:1 digest ") and "# note:" not in out
    assert main(["recipes", "show", str(builtin_path("gpu-bookworm-torch"))]) == 0
    assert "# note: " in capsys.readouterr().out


def test_validate_names_one_lock_command_for_a_recipe_of_two_images(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recipe of an amd64 and an arm64 image without locks was told two commands, one an
    architecture; `lock` without --arch makes both: one line names it."""
    from hvd_container.cli.app import main

    pair = write(
        tmp_path,
        "extends: gpu-bookworm-torch\nname: pair\ndescription: mine\narch: [amd64, arm64]\n",
        "pair.yaml",
    )
    assert main(["recipes", "validate", str(pair)]) == 0
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("NOTE")] == [
        f"NOTE no locks yet: build and render need one for each image: `hvd-container lock "
        f"{pair}` makes them"
    ], out
