"""Benchmark 4 of issue 3: what `import etops` costs on top of `import torch`.

Fresh interpreters, alternated: `import torch` alone and `import torch; import
etops`, each timed inside the child with time.perf_counter (interpreter start-up
excluded) and as the child's whole wall time. Also checks that importing etops
leaves executorch.exir (and executorch.runtime) unimported.

    python benchmarks/bench_import.py [--repeats 11] [--json PATH]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

CHILD = r"""
import sys, time, json
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
n0 = len(sys.modules)
{extra}
t2 = time.perf_counter()
print(json.dumps({{"torch_s": t1 - t0, "extra_s": t2 - t1, "total_s": t2 - t0,
                  "new_modules": len(sys.modules) - n0,
                  "exir": "executorch.exir" in sys.modules,
                  "runtime": "executorch.runtime" in sys.modules}}))
"""


def child(extra: str) -> dict:
    code = CHILD.format(extra=extra)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONWARNINGS="ignore"))
    wall = time.perf_counter() - t0
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall_s"] = wall
    return res


def run(repeats: int = 11) -> dict:
    child("import etops")  # warm the page cache for both
    torch_only, with_etops = [], []
    for r in range(repeats):
        pair = [("torch", ""), ("etops", "import etops")]
        if r % 2:
            pair.reverse()
        for name, extra in pair:
            (torch_only if name == "torch" else with_etops).append(child(extra))

    def med(rows, key):
        return statistics.median(x[key] for x in rows) * 1e3

    res = {
        "name": "import",
        "repeats": repeats,
        "import_torch_ms": med(torch_only, "total_s"),
        "import_torch_then_etops_ms": med(with_etops, "total_s"),
        "import_etops_after_torch_ms": med(with_etops, "extra_s"),
        "import_etops_after_torch_min_ms": min(x["extra_s"] for x in with_etops) * 1e3,
        "wall_torch_ms": med(torch_only, "wall_s"),
        "wall_torch_etops_ms": med(with_etops, "wall_s"),
        "etops_new_modules": with_etops[0]["new_modules"],
        "etops_imports_exir": any(x["exir"] for x in with_etops),
        "etops_imports_executorch_runtime": any(x["runtime"] for x in with_etops),
    }
    res["import_torch_min_ms"] = min(x["total_s"] for x in torch_only) * 1e3
    res["import_torch_then_etops_min_ms"] = min(x["total_s"] for x in with_etops) * 1e3
    res["difference_ms"] = res["import_torch_then_etops_ms"] - res["import_torch_ms"]
    res["difference_min_ms"] = res["import_torch_then_etops_min_ms"] - res["import_torch_min_ms"]
    res["difference_paired_ms"] = statistics.median(
        (e["total_s"] - t["total_s"]) * 1e3 for e, t in zip(with_etops, torch_only))
    res["wall_difference_ms"] = res["wall_torch_etops_ms"] - res["wall_torch_ms"]
    return res


def report(res: dict) -> str:
    return "\n".join([
        f"Benchmark 4: import cost, fresh interpreters, median of {res['repeats']}", "",
        "| | median ms (in-process) | min ms (in-process) | median ms (child wall time) |",
        "|---|---:|---:|---:|",
        f"| import torch | {res['import_torch_ms']:.1f} | {res['import_torch_min_ms']:.1f} | {res['wall_torch_ms']:.1f} |",
        f"| import torch; import etops | {res['import_torch_then_etops_ms']:.1f} | "
        f"{res['import_torch_then_etops_min_ms']:.1f} | {res['wall_torch_etops_ms']:.1f} |",
        f"| difference | {res['difference_ms']:.1f} | {res['difference_min_ms']:.1f} | {res['wall_difference_ms']:.1f} |",
        f"| difference, paired (median over alternated pairs) | {res['difference_paired_ms']:.1f} | | |",
        "",
        f"`import etops` alone after torch: {res['import_etops_after_torch_ms']:.1f} ms median "
        f"({res['import_etops_after_torch_min_ms']:.1f} min), {res['etops_new_modules']} new modules; "
        f"imports executorch.exir: {res['etops_imports_exir']}, "
        f"executorch.runtime: {res['etops_imports_executorch_runtime']}",
    ])


def main():
    _common.standalone_main(__doc__, {"repeats": 11}, run, report)


if __name__ == "__main__":
    main()
