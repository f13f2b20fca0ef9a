"""A first `etops dev FILE` on a fresh cache (issue 47: the first finding line within
30 s), this tree against another one (`--before PKG`: a folder holding another etops
package, put first on PYTHONPATH), alternated: each run gets an empty cache folder
(ETOPS_CACHE_DIR: the builds, discovery, recordings, everything from scratch) and
its stdout is a pipe (no status line, only the streamed lines and the report). For
each run: seconds to its first line, to its first "found on the edit" line, to the
first comparison with the base ("contiguous cases:"), to its end, its exit code,
the load average before it, its first lines and the seconds of each step (its --json).

    python benchmarks/bench_dev_first_line.py /work/et-copy/kernels/portable/cpu/op_sum.cpp \\
        --before /tmp/etops-main-pkg [--rounds 1] [--json out.json]

To make `--before`: benchmarks/README.md (pip install --target of another tree).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

MARKS = {"first line": "", "first finding": "found on the edit", "compared with the base": "contiguous cases:"}


def run(cmd: list[str], env: dict, cwd: str) -> dict:
    """One run: seconds to each of MARKS (None: never printed), to the end, exit code,
    its first three lines."""
    start = time.perf_counter()
    seen: dict = dict.fromkeys(MARKS)
    first: list = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:
            now = time.perf_counter() - start
            if len(first) < 3:
                first.append(line.rstrip()[:300])
            for mark, text in MARKS.items():
                if seen[mark] is None and text in line:
                    seen[mark] = round(now, 1)
        code = child.wait()
    return {**seen, "end": round(time.perf_counter() - start, 1), "exit": code, "first lines": first}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", help="the kernel file (in a git checkout: its base is the file at HEAD)")
    ap.add_argument("--before", help="a folder holding the other tree's etops package (PYTHONPATH)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", help="where to write every figure")
    args = ap.parse_args()
    cwd = tempfile.mkdtemp(prefix="etops-bench-first-")  # never the checkout's parent (executorch shadows the wheel)
    trees = {"this tree": None} if not args.before else {"before": args.before, "this tree": None}
    dev = [os.path.join(os.path.dirname(sys.executable), "etops"), "dev", os.path.abspath(args.file)]
    rows: list = []
    for r in range(args.rounds):
        names = list(trees) if r % 2 == 0 else list(reversed(trees))  # alternated: neither tree always first
        for name in names:
            cache = tempfile.mkdtemp(prefix="etops-bench-cache-")
            env = dict(os.environ, ETOPS_CACHE_DIR=cache, PYTHONWARNINGS="ignore")
            if trees[name]:
                env["PYTHONPATH"] = trees[name] + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            load = os.getloadavg()[0]
            report = os.path.join(cwd, f"dev-{r}-{name.replace(' ', '-')}.json")
            row = {"tree": name, "round": r + 1, "load before": round(load, 1), **run(dev + ["--json", report], env, cwd)}
            try:  # the round's own seconds per step (its --json)
                with open(report) as f:
                    row["steps"] = {k: round(v, 1) for k, v in json.load(f)["files"][0]["seconds"].items()}
            except (OSError, ValueError, KeyError, IndexError):
                row["steps"] = None
            row["load after"] = round(os.getloadavg()[0], 1)
            shutil.rmtree(cache, ignore_errors=True)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("\n| tree | round | first line s | first finding s | compared with the base s | end s | exit | load |")
    print("|---|---|---:|---:|---:|---:|---|---|")
    for row in rows:
        print(f"| {row['tree']} | {row['round']} | {row['first line']} | {row['first finding']} | "
              f"{row['compared with the base']} | {row['end']} | {row['exit']} | {row['load before']}-{row['load after']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
