"""Delegates (issue 9): each XNNPACK delegate of the three example models
(examples/delegate_models.py: linear + ReLU, conv + batch norm + pool, a small
transformer block) timed side by side against the same subgraph on ExecuTorch's
kernels (etops.edge) and on ATen, with etops.bench_delegate, at each thread count.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_delegate.py [--threads 1,2] [--repeats 11] [--warmup 2]
        [--target 0.005] [--models FILE.py[:f,g]] [--json PATH]

Each model is exported and lowered once; every thread count then initialises its
delegates afresh (XNNPACK keeps the threadpool it was created with). Prints one
markdown table per thread count; the figures go to --json PATH (default
benchmarks/results/delegate-latest.json).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
warnings.filterwarnings("ignore")

import _common  # noqa: E402

import etops  # noqa: E402
from etops.bench import delegates  # noqa: E402

MODELS = os.path.join(_common.ROOT, "examples", "delegate_models.py")


def run(models: str = MODELS, threads=(1, 2), repeats: int = 11, warmup: int = 2, target: float = 0.005) -> dict:
    built = []
    for name, factory in delegates.models_from_spec(models):
        t = time.perf_counter()
        program, inputs = delegates.build(name, factory)
        built.append((name, program, inputs, time.perf_counter() - t))
        print(f"{name}: exported and lowered in {built[-1][3]:.1f} s", file=sys.stderr)
    results = {}
    for n in threads:
        rows, used = [], None
        for name, program, inputs, _ in built:
            r = etops.bench_delegate(program, inputs, label=name, repeats=repeats, warmup=warmup, target=target, threads=n)
            rows.extend(r.rows)
            used = r.threads
        results[n] = delegates.DelegateBenchResult(rows, used, _common.machine(), {"repeats": repeats, "warmup": warmup, "target": target})
    return {"lowering_s": {name: s for name, _, _, s in built}, "results": results}


def report(res: dict) -> str:
    parts = []
    for n, result in res["results"].items():
        parts.append(result.markdown(title=f"{n} thread{'s' if n != 1 else ''} (torch and ExecuTorch's pool)"))
    return "\n".join(parts)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=MODELS, help="FILE.py[:f,g] (default: every model of examples/delegate_models.py)")
    p.add_argument("--threads", default="1,2", help="thread counts, one run each (default 1,2)")
    p.add_argument("--repeats", type=int, default=11)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--target", type=float, default=0.005, help="seconds per timed loop")
    p.add_argument("--json", default=os.path.join(_common.RESULTS, "delegate-latest.json"), help="write the figures here")
    args = p.parse_args()
    threads = [int(t) for t in args.threads.split(",") if t.strip()]
    res = run(args.models, threads, args.repeats, args.warmup, args.target)
    print(report(res))
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"machine": _common.machine(), "lowering_s": res["lowering_s"],
                   "runs": {str(n): r.to_dict() for n, r in res["results"].items()}}, f, indent=1, default=str)
    print(f"\nfigures: {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
