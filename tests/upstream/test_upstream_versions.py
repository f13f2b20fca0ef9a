"""The regression view of two upstream reports: root causes matched by kernel, kind,
signature and layout, each fixed, new or staying, with each version's outcome."""

from __future__ import annotations

import json

import pytest

from etops.upstream import versions


def _f(kernel, kind, signature, outcome, test=None):
    return {"kernel": kernel, "kind": kind, "category": kind, "signature": signature, "layout": None, "outcome": outcome,
            "test": test}


def test_root_causes_are_fixed_new_or_staying(tmp_path):
    old = {"versions": {"executorch": "1.5.0"}, "findings": [
        _f("aten::sum.IntList_out", "mismatch", "values differ: wrong (computes float64 in float32)", "verified", "OpSumOutTest.A"),
        _f("aten::gone.out", "abort", "x", "verified", "OpGoneTest.B")]}
    new = {"versions": {"executorch": "1.5.1"}, "findings": [
        _f("aten::sum.IntList_out", "mismatch", "values differ: wrong (computes float64 in float32)", "verified", "OpSumOutTest.A"),
        _f("aten::sum.IntList_out", "mismatch", "values differ: wrong", "dropped: passes on the shipped kernel"),
        _f("aten::new.out", "abort", "y", "verified", "OpNewTest.C")]}
    rows = versions.compare(old, new)
    assert [(r["kernel"], r["status"]) for r in rows] == [
        ("aten::sum.IntList_out", "stays"), ("aten::new.out", "new"), ("aten::sum.IntList_out", "new"), ("aten::gone.out", "fixed")]
    assert rows[-1]["old"] == "verified" and rows[-1]["new"] is None
    text = versions.markdown(rows, "1.5.0", "1.5.1")
    assert text.startswith("1 root causes in both, 2 new in 1.5.1, 1 fixed since 1.5.0.")
    assert "| `aten::gone.out` | abort | verified | no finding | `OpGoneTest.B` |" in text
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(old))
    assert versions.read_summary(path) == old
    path.write_text("[]")
    with pytest.raises(ValueError, match="argument 'against'"):
        versions.read_summary(path)
