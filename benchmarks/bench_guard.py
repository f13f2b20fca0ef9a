"""Guarded calls (issue 15): the Python-visible cost of etops.guard.call against an
unguarded call and a bare fork of this process, interleaved, on aten::add.out with
2x3 float32 tensors (out given).

    python benchmarks/bench_guard.py [--calls 20] [--repeats 5] [--json PATH]
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

import torch  # noqa: E402
import etops  # noqa: E402


def run(calls: int = 20, repeats: int = 5) -> dict:
    op = etops.registry().aten.add.out
    a, b, c = torch.rand(2, 3), torch.rand(2, 3), torch.empty(2, 3)
    assert torch.equal(etops.guard.call(op, a, b, out=c), a + b)
    pc = time.perf_counter

    def guarded(n):
        t0 = pc()
        for _ in range(n):
            etops.guard.call(op, a, b, out=c)
        return pc() - t0

    def plain(n):
        t0 = pc()
        for _ in range(n):
            op(a, b, out=c)
        return pc() - t0

    def bare_fork(n):
        t0 = pc()
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
        return pc() - t0

    candidates = {"etops.guard.call": guarded, "unguarded call": plain, "os.fork + waitpid": bare_fork}
    samples = {k: [] for k in candidates}
    for r in range(repeats):
        for name in list(candidates)[r % 3:] + list(candidates)[: r % 3]:
            samples[name].append(candidates[name](calls) / calls * 1000.0)  # ms
    return {"name": "guard", "calls_per_sample": calls, "repeats": repeats,
            "ms_per_call": {k: _common.summary(v) for k, v in samples.items()}}


def report(res: dict) -> str:
    lines = [f"Guarded calls: aten::add.out on 2x3 float32, ms per call ({res['calls_per_sample']} calls x "
             f"{res['repeats']} interleaved repeats)", ""]
    return "\n".join(lines + _common.ms_table(res["ms_per_call"]))


def main():
    _common.standalone_main(__doc__, {"calls": 20, "repeats": 5}, run, report)


if __name__ == "__main__":
    main()
