"""`make demo` (examples/demo.py) times its table with etops.bench's routine:
core.time_calls, both sides with preallocated outs, one thread each, interleaved;
its table says what it compares. No assertion on speed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch

import etops
from etops.bench import core

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"


def load_demo():
    spec = importlib.util.spec_from_file_location("etops_demo", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def recording_time_calls(monkeypatch):
    """core.time_calls wrapped: each call's names, out arguments and thread counts."""
    seen = []
    original = core.time_calls

    def record(calls, repeats=11, warmup=2, target=0.005):
        seen.append({
            "names": sorted(calls),
            "outs": {name: sorted(k for k in kwargs if k == "out") for name, (_, _, kwargs) in calls.items()},
            "threads": (torch.get_num_threads(), etops.get_num_threads()),
        })
        return original(calls, repeats=2, warmup=0, target=1e-4)

    monkeypatch.setattr(core, "time_calls", record)
    return seen


def test_demo_and_bench_share_one_timing_routine(monkeypatch):
    demo = load_demo()
    seen = recording_time_calls(monkeypatch)
    x = torch.randn(8, 16)
    row = demo.time_against_aten("aten::add.out", (x, x), {"alpha": 0.5})
    assert row["error"] is None and row["ratio"]["median"] > 0
    etops.bench("aten::add.out", inputs=((x, x), {"alpha": 0.5}))
    assert len(seen) == 2 and seen[0] == seen[1]  # the same routine, called the same way
    assert seen[0]["names"] == ["aten", "aten_zero", "etops", "etops_zero"]
    assert seen[0]["outs"]["etops"] == ["out"] and seen[0]["outs"]["aten"] == ["out"]  # preallocated both sides
    assert seen[0]["threads"] == (1, 1)


def test_demo_table_says_what_it_compares(monkeypatch, capsys):
    demo = load_demo()
    seen = recording_time_calls(monkeypatch)
    every_case = demo.cases
    monkeypatch.setattr(demo, "cases", lambda: every_case()[:2])
    demo.main()
    out = capsys.readouterr().out
    assert len(seen) == 2
    assert "Compared: each ExecuTorch kernel called through etops against ATen's out= variant" in out
    assert "outs preallocated on both sides, 1 thread each, 11 interleaved rounds" in out
    for line in out.splitlines():
        if line.startswith(("aten::add.out", "aten::mm.out")):
            assert "±" in line or "no verdict" in line, line

