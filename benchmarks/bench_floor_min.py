"""etops / floor for op(a, b, out=c) by the fastest samples (for a loaded machine).

bench_call_overhead.py's paired medians spread widely when other work shares the
cores (20000-call samples are often interrupted). This takes many short samples
instead: `--rounds` pairs of 1000-call loops of etops `op(a, b, out=c)` (aten::add.out,
2x3 float32) and the floor, interleaved (the order alternating), and compares the
mean of the fastest 5% of each: samples that ran uninterrupted. Run it alternately
against two builds (PYTHONPATH=/tmp/old-pkg and without) to compare them.

    python benchmarks/bench_floor_min.py [--rounds 400] [--json PATH]
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
from bench_call_overhead import etops_and_floor_loops  # noqa: E402

import torch  # noqa: E402
import etops  # noqa: E402


def run(rounds: int = 400, calls: int = 1000) -> dict:
    floor = _common.build_floor()
    op = etops.registry().aten.add.out
    a, b, c = torch.rand(2, 3), torch.rand(2, 3), torch.empty(2, 3)
    etops_loop, floor_loop = etops_and_floor_loops(op, floor.add_floor, a, b, c)

    e, f = [], []
    for r in range(rounds):
        if r % 2:
            e.append(etops_loop(calls))
            f.append(floor_loop(calls))
        else:
            f.append(floor_loop(calls))
            e.append(etops_loop(calls))
    assert torch.equal(c, a + b)
    k = max(1, rounds // 20)
    ef, ff = sorted(e)[:k], sorted(f)[:k]
    etops_ns, floor_ns = sum(ef) / k / calls, sum(ff) / k / calls
    return {"name": "floor_min", "rounds": rounds, "calls": calls, "etops_ns": etops_ns, "floor_ns": floor_ns,
            "ratio": etops_ns / floor_ns, "ratio_of_mins": min(e) / min(f)}


def report(res: dict) -> str:
    return (f"etops op(a, b, out=c) {res['etops_ns']:.1f} ns, floor {res['floor_ns']:.1f} ns "
            f"(fastest 5% of {res['rounds']} samples of {res['calls']} calls): "
            f"etops / floor {res['ratio']:.3f} (of the single fastest: {res['ratio_of_mins']:.3f})")


def main():
    _common.standalone_main(__doc__, {"rounds": 400, "calls": 1000}, run, report)


if __name__ == "__main__":
    main()
