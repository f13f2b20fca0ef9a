"""The report: JSON schema, markdown, terminal table, and the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import etops
from etops import conformance
from etops.conformance import cli
from etops.conformance.report import CASE_KEYS, JSON_SCHEMA, KERNEL_KEYS, SCHEMA, markdown, terminal, to_json

HERE = Path(__file__).resolve().parent
SRC = str(Path(etops.__file__).resolve().parent.parent)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    # a planted mismatch so every section has content
    return conformance.run(["aten::add.out", "aten::mul.out"], dtypes=["float32", "complex64"], opinfo_filter={"add", "mul", "nn.functional.softsign"},
                           progress=False, hooks=str(HERE / "mismatch_hooks.py"), report_dir=tmp_path_factory.mktemp("report"))


def test_json_schema(report):
    data = json.loads(json.dumps(to_json(report)))  # JSON-serialisable as is
    assert data["schema"] == SCHEMA
    for key, typ in JSON_SCHEMA.items():
        assert isinstance(data[key], typ), key
    assert set(data["versions"]) == {"etops", "torch", "executorch"}
    assert set(data["totals"]) == {"cases", *conformance.STATUSES}
    assert data["totals"]["cases"] == sum(data["totals"][s] for s in conformance.STATUSES)
    assert set(data["coverage"]) == {"registered", "reached", "fraction", "unreached"}
    assert data["coverage"]["registered"] == 2
    kernels = {row["kernel"]: row for row in data["kernels"]}
    assert set(kernels) == {"aten::add.out", "aten::mul.out"}
    for row in data["kernels"]:
        assert set(KERNEL_KEYS) <= set(row)
        assert row["cases"] == sum(row[s] for s in conformance.STATUSES)
        assert set(row["dtypes"]) <= {"float32", "complex64"}
        for dtype, d in row["by_dtype"].items():
            assert set(d) == {"counts", "max_abs_error", "max_rel_error", "opinfos"}
    assert data["mismatches"], "the planted mismatch"
    for section in ("mismatches", "crashes", "unsupported", "errors"):
        for case in data[section]:
            assert set(case) == set(CASE_KEYS)
    m = next(c for c in data["mismatches"] if c["opinfo"] == "add" and c["sample"] == 1)
    assert m["max_abs_error"] == pytest.approx(1.0) and m["reproducer"].endswith(".py")
    assert kernels["aten::add.out"]["max_abs_error"] >= 1.0


def test_markdown_and_terminal(report):
    md = markdown(report)
    for heading in ("# etops conformance report", "## Summary", "## Per kernel", "## Coverage", "## Mismatches"):
        assert heading in md
    assert "`aten::add.out`" in md
    text = terminal(report)
    assert "distinct findings" in text.splitlines()[0]  # the findings lead
    assert any(line.split()[:2] == ["kernel", "cases"] for line in text.splitlines())
    assert any(line.startswith("aten::add.out") for line in text.splitlines())
    assert "kernels reached 2/2" in text


def test_cli_writes_reports(tmp_path, capsys):
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    code = cli.main(["check", "aten::add.out", "--dtype", "float32", "--opinfo", "add", "--report", str(md), "--json", str(js), "--no-progress"])
    assert code == 0
    out = capsys.readouterr().out
    assert "aten::add.out" in out and "kernels reached 1/1" in out
    data = json.loads(js.read_text())
    assert data["options"]["kernels"] == ["aten::add.out"] and data["options"]["dtypes"] == ["float32"]
    assert md.read_text().startswith("# etops conformance report")


@pytest.mark.parametrize("argv", [["--dtype", "notadtype", "aten::add.out"], ["aten::no_such_op.out"], ["--jobs", "0"], ["--bogus-flag"]])
def test_cli_usage_errors(argv, capsys):
    assert cli.main(argv) == 2


def test_module_entry_point_help():
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "etops.conformance", "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0
    assert "--isolated" in proc.stdout and "--jobs" in proc.stdout


def test_testing_helpers():
    from etops.testing import opinfo_cases

    cases = opinfo_cases("aten::add.out", "add", dtypes=["float32"])
    assert [c.id for c in cases] == ["aten::add.out-add-float32"]
    result = cases[0].check()
    assert result.tallies[("aten::add.out", "float32")].counts["pass"] > 0
    # a kernel standing in for another ATen op: sub.out for add.Tensor mismatches
    stand_in = opinfo_cases("aten::sub.out", "add", aten="aten::add.Tensor", dtypes=["float32"])
    with pytest.raises(AssertionError, match="mismatch"):
        stand_in[0].check()
