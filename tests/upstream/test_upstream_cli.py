"""``etops report upstream``'s command line: mistakes are one line naming the
argument, exit code 2; no finding of the categories asked for is exit 3."""

from __future__ import annotations

import json

from etops.cli import main as cli_main


def test_mistakes_name_the_argument(tmp_path, capsys):
    report = tmp_path / "check.json"
    report.write_text(json.dumps({"findings": []}))
    assert cli_main(["report", "upstream", str(report)]) == 2
    assert "--checkout" in capsys.readouterr().err
    assert cli_main(["report", "upstream", str(report), "--checkout", str(tmp_path / "nowhere")]) == 2
    assert "--checkout: no folder" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert cli_main(["report", "upstream", str(bad), "--checkout", str(tmp_path)]) == 2
    assert "argument 'report'" in capsys.readouterr().err
    assert cli_main(["report", "upstream", str(report), "--checkout", str(tmp_path), "--against", str(tmp_path / "x")]) == 2
    assert "--against: no file" in capsys.readouterr().err


def test_no_finding_is_no_evidence(tmp_path, capsys):
    (tmp_path / "kernels").mkdir()
    report = tmp_path / "check.json"
    report.write_text(json.dumps({"findings": [{"kernel": "aten::add.out", "kind": "unsupported", "category": "unsupported",
                                                "example": "aten::add.out|add|complex64|s0c0"}]}))
    assert cli_main(["report", "upstream", str(report), "--checkout", str(tmp_path), "--out", str(tmp_path / "out")]) == 3
    out = capsys.readouterr().out
    assert "0 findings: 0 verified failing tests" in out
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["counts"]["findings"] == 0
