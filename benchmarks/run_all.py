"""Runs the four benchmarks of issue 3 in one go, prints their tables and a
markdown summary, and writes everything to benchmarks/results/<date>.json
(and results/latest.json).

    python benchmarks/run_all.py [--quick]      (or: make bench)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
warnings.filterwarnings("ignore")

import _common  # noqa: E402
import bench_call_overhead  # noqa: E402
import bench_import  # noqa: E402
import bench_large_add  # noqa: E402


def summary_table(co: dict, la: dict, im: dict) -> str:
    rm, rd, rp = co["ratios_min"], co["ratios_median"], co["ratios_paired"]
    us = co["us_per_call"]

    def ok(v, op, goal):
        return "yes" if (v <= goal if op == "<=" else v >= goal) else "**no**"

    rows = [
        ("1", "etops / torch.ops.aten.add.out (2x3 f32)", "etops / torch.ops", "<= 0.25"),
        ("1", "etops / torch.add(out=) (2x3 f32)", "etops / torch.add", "<= 0.5"),
        ("1", "etops / floor (2x3 f32)", "etops / floor", "<= 1.5"),
        ("2", "pte Method.execute / etops", "pte / etops", ">= 10"),
        ("1", "etops op(a, b) / torch.add(a, b), allocating (2x3 f32)", "etops op(a, b) / torch.add(a, b)", "<= 1.2"),
        ("1", "etops 0-dim / 1-D tensor for `other` (out=)", "0-dim tensor / 1-D tensor", "<= 1.3"),
    ]
    lines = ["| # | ratio | paired median | of mins | of medians | goal | met (paired) |",
             "|---|---|---:|---:|---:|---|---|"]
    for n, name, key, goal in rows:
        op, g = goal.split()
        lines.append(f"| {n} | {name} | {rp[key]:.3f} | {rm[key]:.3f} | {rd[key]:.3f} | {goal} | "
                     f"{ok(rp[key], op, float(g))} |")
    lines.append(f"| 3 | etops / C loop (16M f32) | {la['ratio_paired']:.3f} | {la['ratio_min']:.3f} | "
                 f"{la['ratio_median']:.3f} | <= 1.05 | {ok(la['ratio_paired'], '<=', 1.05)} |")
    lines.append(f"| 3 | peak RSS growth during etops calls (16M f32) | {la['rss_growth_etops_kib']} KiB | | | "
                 f"<= 1024 KiB | {ok(la['rss_growth_etops_kib'], '<=', 1024)} |")
    lines.append(f"| 4 | `import torch; import etops` - `import torch` (in-process) | {im['difference_paired_ms']:.0f} ms "
                 f"| {im['difference_min_ms']:.0f} ms | "
                 f"{im['difference_ms']:.0f} ms | small | |")
    lines.append(f"| 4 | `import etops` after torch (in-process) | {im['import_etops_after_torch_ms']:.1f} ms | "
                 f"{im['import_etops_after_torch_min_ms']:.1f} ms | "
                 f"{im['import_etops_after_torch_ms']:.1f} ms | small | |")
    lines += ["", "Per call (min / median): " + ", ".join(
        f"{k} {v['min']:.3f} / {v['median']:.3f} us" for k, v in us.items())]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer repeats (smoke run)")
    args = p.parse_args()
    q = args.quick
    m = _common.machine()
    print(f"# etops benchmarks, {m['date']}, {m['cpu']}, {m['cores']} cores, "
          f"torch {m['torch']}, executorch {m['executorch']}, Python {m['python']}\n")

    im = bench_import.run(3 if q else 11)  # first: fresh children, before this process grows
    print(bench_import.report(im), "\n")
    co = bench_call_overhead.run(calls=5000 if q else 20000, repeats=3 if q else 15)
    print(bench_call_overhead.report(co), "\n")
    la = bench_large_add.run(calls=3 if q else 20, repeats=3 if q else 15)
    print(bench_large_add.report(la), "\n")

    print("## Summary\n")
    print(summary_table(co, la, im))

    os.makedirs(_common.RESULTS, exist_ok=True)
    out = {"machine": m, "quick": q, "call_overhead": co, "large_add": la, "import": im}
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    for name in (f"{stamp}.json", "latest.json"):
        with open(os.path.join(_common.RESULTS, name), "w") as f:
            json.dump(out, f, indent=2)
    print(f"\nresults: {os.path.join(_common.RESULTS, stamp + '.json')}")


if __name__ == "__main__":
    main()
