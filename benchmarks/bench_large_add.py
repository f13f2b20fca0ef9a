"""Benchmark 3 of issue 3: aten::add.out on 16M float32 (64 MiB per tensor).

The etops call `op(a, b, out=c)` against the very same ExecuTorch kernel called
from C in a loop with no Python in between (benchmarks/floor's add_loop_c), in
the same run and interleaved; and the peak RSS growth of the process while
etops runs (ru_maxrss after the tensors are allocated and touched, then after):
with zero-copy borrowing it stays near zero.

    python benchmarks/bench_large_add.py [--numel 16777216] [--calls 20] [--repeats 15] [--json PATH]
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

import torch  # noqa: E402
import etops  # noqa: E402


def maxrss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def run(numel: int = 1 << 24, calls: int = 20, repeats: int = 15, warmup: int = 1) -> dict:
    floor = _common.build_floor()
    op = etops.registry().aten.add.out

    # Allocate and touch every tensor first, so their pages are already resident.
    a, b = torch.rand(numel), torch.rand(numel)
    c = torch.zeros(numel)
    want = a + b
    c_ptr = c.data_ptr()
    floor.add_loop_c(a, b, c, 1)
    assert torch.equal(c, want)
    c.zero_()
    del want  # its pages stay counted in ru_maxrss: the baseline covers them
    rss0 = maxrss_kib()

    # etops alone first: the peak RSS growth it causes.
    op(a, b, out=c)
    for _ in range(calls):
        op(a, b, out=c)
    rss1 = maxrss_kib()
    assert c.data_ptr() == c_ptr
    assert torch.equal(c, a + b)
    rss_after_check = maxrss_kib()  # `a + b` above allocates 64 MiB; reported apart

    pc = time.perf_counter_ns

    def etops_loop(n):
        t0 = pc()
        for _ in range(n):
            op(a, b, out=c)
        return (pc() - t0) * 1e-9

    def c_loop(n):
        return floor.add_loop_c(a, b, c, n)

    samples = {"etops op(a, b, out=c)": [], "add_loop_c (C, no Python)": []}
    fns = [etops_loop, c_loop]
    names = list(samples)
    for r in range(warmup + repeats):
        order = [0, 1] if r % 2 == 0 else [1, 0]
        for i in order:
            s = fns[i](calls) / calls
            if r >= warmup:
                samples[names[i]].append(s * 1e3)  # ms per call

    stats = {k: _common.summary(v) for k, v in samples.items()}
    E, C = names
    nbytes = numel * 4
    return {
        "name": "large_add",
        "numel": numel, "dtype": "float32", "tensor_mib": nbytes / 2**20,
        "calls_per_sample": calls, "repeats": repeats,
        "ms_per_call": stats,
        "ratio_min": stats[E]["min"] / stats[C]["min"],
        "ratio_median": stats[E]["median"] / stats[C]["median"],
        # per interleaved repeat, then the median: robust to the machine's drift
        "ratio_paired": statistics.median(e / c for e, c in zip(samples[E], samples[C])),
        "goal_ratio": 1.05,
        "gb_per_s_etops": 3 * nbytes / (stats[E]["min"] * 1e-3) / 1e9,
        "maxrss_before_kib": rss0,
        "maxrss_after_etops_kib": rss1,
        "rss_growth_etops_kib": rss1 - rss0,
        "maxrss_after_all_kib": maxrss_kib(),
        "maxrss_after_check_kib": rss_after_check,
        "goal_rss_growth_kib": 1024,
        "out_data_ptr_unchanged": c.data_ptr() == c_ptr,
    }


def report(res: dict) -> str:
    lines = [f"Benchmark 3: aten::add.out on {res['numel']} float32 ({res['tensor_mib']:.0f} MiB per tensor), "
             f"ms per call ({res['calls_per_sample']} calls x {res['repeats']} interleaved repeats)", ""]
    lines += _common.ms_table(res["ms_per_call"])
    met = "yes" if res["ratio_paired"] <= res["goal_ratio"] else "NO"
    rss_met = "yes" if res["rss_growth_etops_kib"] <= res["goal_rss_growth_kib"] else "NO"
    lines += ["",
              f"etops / C loop: {res['ratio_paired']:.3f} (paired median), {res['ratio_min']:.3f} (of mins), "
              f"{res['ratio_median']:.3f} (of medians); "
              f"goal <= {res['goal_ratio']}: {met}",
              f"peak RSS growth over {res['calls_per_sample'] + 1} etops calls: "
              f"{res['rss_growth_etops_kib']} KiB (goal <= 1024 KiB beyond the tensors: {rss_met}); "
              f"out written in place: {res['out_data_ptr_unchanged']}"]
    return "\n".join(lines)


def main():
    _common.standalone_main(__doc__, {"numel": 1 << 24, "calls": 20, "repeats": 15}, run, report)


if __name__ == "__main__":
    main()
