"""--json on every command that lists or reports: one result record (or one error record and a
non-zero exit) on stdout, nothing else there, every field as documented."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jsonschema
import pytest
from _fakes import write_sif
from _json_records import check, error, result
from _recipe_helpers import CPU_RECIPE, merged, write
from hvd_container.containers.transfer import Transfer

from hvd_container.cli.app import main
from hvd_container.cli.json_output import OUTPUT_SCHEMAS, output_schema
from hvd_container.cli.progress import JsonReporter, PlainReporter


def run_json(capsys: pytest.CaptureFixture[str], *argv: str, entry=main) -> tuple[int, str]:
    code = entry(list(argv))
    return code, capsys.readouterr().out


def test_the_output_schema_is_a_valid_document() -> None:
    schema = output_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert set(schema["$defs"]) == set(OUTPUT_SCHEMAS)


def test_recipes_list_show_validate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out = run_json(capsys, "recipes", "list", "--json")
    rows = result("recipes-list", out)["recipes"]
    assert code == 0 and {"cpu-bookworm", "lightning-pt113"} <= {r["name"] for r in rows}
    cpu = next(r for r in rows if r["name"] == "cpu-bookworm")
    assert cpu["image"] == "cpu-bookworm:1" and cpu["frameworks"] == ["pytorch"]
    assert not cpu["gpu"] and cpu["file"].endswith("cpu-bookworm.yaml")

    code, out = run_json(capsys, "recipes", "show", "cpu-bookworm", "--json")
    shown = result("recipes-show", out)
    assert code == 0 and shown["recipe"]["horovod"]["version"] == "0.28.1"
    assert len(shown["digest"]) == 64

    bad = write(tmp_path, merged(CPU_RECIPE, arch="sparc", colour="red"))
    code, out = run_json(capsys, "recipes", "validate", "cpu-bookworm", str(bad), "--json")
    # a failure has the one shape of every failure: an error record, here with each row
    report = error(out)
    assert code == 2 and report["exit_code"] == 2
    assert [r["ok"] for r in report["recipes"]] == [True, False]
    assert len(report["recipes"][1]["problems"]) == 2
    # each problem as fields a script reads, beside the line as printed
    assert report["details"][0] == {
        "file": str(bad), "line": report["details"][0]["line"], "key": "arch",
        "message": "not allowed (got 'sparc') (allowed: amd64, arm64, ppc64le)",
        "text": report["problems"][0],
    }  # fmt: skip
    assert report["problems"][0].startswith(f"{bad}:{report['details'][0]['line']}: arch: ")
    assert [d["key"] for d in report["recipes"][1]["details"]] == ["arch", "colour"]
    code, out = run_json(capsys, "recipes", "validate", "cpu-bookworm", "--json")
    passed = result("recipes-validate", out)
    assert code == 0 and passed["ok"] is True and passed["recipes"][0]["details"] == []


def test_a_failed_command_ends_with_an_error_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = write(tmp_path, merged(CPU_RECIPE, arch="sparc", colour="red"))
    code, out = run_json(capsys, "recipes", "show", str(bad), "--json")
    record = error(out)
    assert code == 2 and record["exit_code"] == 2 and len(record["problems"]) == 2
    assert record["text"] == record["problems"][0]
    # a usage error too, before the command runs
    code, out = run_json(capsys, "sites", "list", "--json", "--colour")
    assert code == 2 and "--colour" in error(out)["text"]


def test_sites_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_json(capsys, "sites", "list", "--json")
    listing = result("sites-list", out)
    assert code == 0 and {s["name"] for s in listing["sites"]} >= {"neuron", "perlmutter"}
    assert sum(s["selected"] for s in listing["sites"]) == 1
    code, out = run_json(capsys, "sites", "show", "perlmutter", "--json")
    shown = result("sites-show", out)
    assert shown["profile"]["runtime"]["kind"] == "shifter" and shown["selected_by"] == "argument"


def test_run_dry_run(capsys: pytest.CaptureFixture[str]) -> None:
    entry = main
    argv = ["run", "--site", "perlmutter", "--image", "u/i:t", "-n", "8", "--dry-run", "--json"]
    code, out = run_json(capsys, *argv, "train.py", "--lr", "0.1", entry=entry)
    record = result("run-dry-run", out)
    assert code == 0 and record["how"] == "sbatch" and record["argv"][0] == "sbatch"
    assert record["step"][0] == "srun" and record["step"][-3:] == ["train.py", "--lr", "0.1"]
    assert record["script"].endswith(shlex.join(record["step"]) + "\n")
    assert "shifter" in record["step"] and record["env"]["NCCL_SOCKET_IFNAME"] == "hsn"
    assert record["command"].endswith("python train.py --lr 0.1\nHVD_CONTAINER_SCRIPT")
    assert any("--account" in w for w in record["warnings"])  # also on stderr
    # what a script reads without parsing the step: the controller and the layout
    assert record["controller"]["name"] == "mpi"
    assert (record["nodes"], record["tasks"], record["ranks"]) == (2, 8, 8)
    assert (record["tasks_per_node"], record["gpus_per_node"]) == (4, 4)  # -n 8 over 2 nodes
    argv[argv.index("8")] = "7"  # 4 and 3: no one figure
    code, out = run_json(capsys, *argv, "train.py", entry=entry)
    assert code == 0 and result("run-dry-run", out)["tasks_per_node"] is None
    code, out = run_json(
        capsys, "run", "--site", "perlmutter", "--dry-run", "--json", "t.py", entry=entry
    )
    assert code == 2 and "--image" in error(out)["text"]


def test_batch(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    argv = ["batch", "--site", "perlmutter", "--image", "u/i:t", "-A", "m1_g", "-n", "8", "--json"]
    code, out = run_json(capsys, *argv, "t.py")
    record = result("batch", out)
    assert code == 0 and record["path"] is None and record["script"].startswith("#!")
    target = tmp_path / "job.sh"
    code, out = run_json(capsys, *argv[:-1], "-o", str(target), "--json", "t.py")
    record = result("batch", out)
    assert record["path"] == str(target) and target.read_text() == record["script"]
    assert record["argv"] == ["sbatch", str(target)]
    code, out = run_json(capsys, *argv, "--submit", "t.py")
    assert code == 2 and "--submit" in error(out)["text"]


def test_inspect_and_convert_def(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    sif = write_sif(tmp_path / "x.sif", {"a": "\x1b[31mred"})
    code, out = run_json(capsys, "inspect", str(sif), "--json")
    record = result("inspect", out)
    assert code == 0 and record["labels"]["a"] == "\x1b[31mred" and "\x1b" not in out
    code, out = run_json(capsys, "inspect", str(tmp_path / "none.sif"), "--json")
    assert code == 2 and error(out)["exit_code"] == 2
    target = tmp_path / "c.def"
    code, out = run_json(
        capsys, "convert", "cpu-bookworm", "--to", "def", "-o", str(target), "--json"
    )
    record = result("convert", out)
    assert (
        code == 0 and record["to"] == "def" and record["path"] == str(target) and target.is_file()
    )


def test_progress_records_carry_rate_and_eta(capsys: pytest.CaptureFixture[str]) -> None:
    reporter = JsonReporter()
    reporter.meter.started[("export", "")] = (reporter.start - 2.0, 0)  # began 2 s ago
    reporter.transfer(Transfer("export", 4_000_000, 10_000_000, written=1_000_000))
    reporter.transfer(Transfer("export", 5_000_000, 10_000_000))  # within the second: dropped
    reporter.transfer(Transfer("export", 10_000_000, 10_000_000))  # the last: always shown
    lines = [check("progress", json.loads(x)) for x in capsys.readouterr().out.splitlines()]
    assert [x["done"] for x in lines] == [4_000_000, 10_000_000]
    first = lines[0]
    assert 1.5e6 < first["rate"] < 2.5e6 and 2.0 < first["eta"] < 4.5
    assert first["written"] == 1_000_000 and "4.0 MB of 10.0 MB (40%)" in first["text"]


def test_plain_progress_is_a_line_now_and_then(capsys: pytest.CaptureFixture[str]) -> None:
    reporter = PlainReporter()
    for done in range(0, 11):
        reporter.transfer(Transfer("push", done * 100, 1000, item="abc123"))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[push]    abc123: 0 B of 1.0 kB (0%)")
    assert lines[-1].startswith("[push]    abc123: 1.0 kB of 1.0 kB (100%)")
    assert len(lines) == 2


def test_schema_output_prints_the_documented_records(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_json(capsys, "schema", "output")
    assert code == 0 and json.loads(out) == json.loads(json.dumps(output_schema()))


@pytest.mark.parametrize("no_color", [False, True])
def test_rich_progress_honours_no_color(monkeypatch: pytest.MonkeyPatch, no_color: bool) -> None:
    import io
    import re

    from rich.console import Console

    from hvd_container.cli.progress import RichReporter

    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    out = io.StringIO()
    reporter = RichReporter(console=Console(file=out, force_terminal=True, width=100))
    reporter("step", "convert", "exporting x")
    reporter.transfer(Transfer("export", 50, 100, written=10))
    reporter.transfer(Transfer("export", 100, 100))
    reporter("done", "convert", "wrote x")
    reporter.close()
    text = out.getvalue()
    assert "exporting x" in text and "100/100 bytes" in text  # the bar: bytes done of total
    styles = set(re.findall(r"\x1b\[([0-9;]*)m", text))
    colours = {s for s in styles if any(p.startswith(("3", "9")) for p in s.split(";"))}
    assert (colours == set()) == no_color, styles


def test_jupyter(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from hvd_container.launcher.run import jupyter

    def started(site, request, reporter, timeout):  # a stand-in: no Slurm in the fast suite
        return jupyter.JupyterSession("42", "node1", "10.0.0.2", 8123, "t" * 48, "login", "me")

    monkeypatch.setattr(jupyter, "start", started)
    code, out = run_json(
        capsys,
        "jupyter",
        "--site",
        "neuron",
        "--image",
        "x.sif",
        "--comment",
        "field=ai;appl=pytorch",
        "--json",
    )
    record = result("jupyter", out)
    assert code == 0 and record["job_id"] == "42" and record["port"] == 8123
    assert record["ssh"].startswith("ssh -L localhost:8123:") and "t" * 48 in record["url"]
    code, out = run_json(capsys, "jupyter", "--stop", "x1", "--json")
    assert code == 2 and "not a job id" in error(out)["text"]
