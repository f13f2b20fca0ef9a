"""A warm `etops dev FILE` in a new process (issue 47: the way a pre-commit hook or a
second terminal runs it; goal: within 5x `python -c "import torch, etops"`), this
tree against another one (`--before PKG`: a folder holding another etops package,
put first on PYTHONPATH), alternated in one session with the import, wall time and
CPU seconds (its task, guard and timing processes included) of each child, the load
average before each run.

Each tree gets a cache folder of its own (ETOPS_CACHE_DIR), warmed by one run
first (the builds, discovery, and what that tree keeps on disk); `--cache-from DIR`
seeds both with DIR's conformance-discovery files (a first discovery takes minutes).

    python benchmarks/bench_dev_warm.py /work/et/kernels/portable/cpu/op_add.cpp \\
        --before /tmp/etops-main-pkg [--rounds 3] [--json out.json]

To make `--before` from a revision: `git archive REV | tar -x -C /tmp/old`, then
`pip install --no-deps --no-build-isolation --target /tmp/old-pkg /tmp/old` with the
venv's pip (benchmarks/README.md), or copy an installed `etops` folder.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def load() -> float:
    return os.getloadavg()[0]


def wall(cmd: list[str], env: dict, cwd: str) -> tuple[float, int, float]:
    """(wall seconds, exit code, CPU seconds of the child and the processes it reaped:
    its task, guard and timing processes; on a loaded machine the figure that says
    how much work a run did)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, done.returncode, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", help="the kernel file (in a git checkout: its base is the file at HEAD)")
    ap.add_argument("--before", help="a folder holding the other tree's etops package (PYTHONPATH)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cache-from", help="a cache folder whose conformance-discovery files seed both")
    ap.add_argument("--json", help="where to write every figure")
    args = ap.parse_args()
    cwd = tempfile.mkdtemp(prefix="etops-bench-dev-warm-")  # never the checkout's parent (executorch shadows the wheel)
    trees = {"this tree": None} if not args.before else {"before": args.before, "this tree": None}
    envs = {}
    for name, pkg in trees.items():
        cache = tempfile.mkdtemp(prefix="etops-bench-cache-")
        for f in glob.glob(os.path.join(args.cache_from or "", "conformance-discovery-*.json")) if args.cache_from else ():
            shutil.copy(f, cache)
        env = dict(os.environ, ETOPS_CACHE_DIR=cache, PYTHONWARNINGS="ignore")
        if pkg:
            env["PYTHONPATH"] = pkg + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        envs[name] = env
    dev = [os.path.join(os.path.dirname(sys.executable), "etops"), "dev", os.path.abspath(args.file)]
    imp = [sys.executable, "-c", "import torch, etops"]
    for name, env in envs.items():  # warm-up: each tree's caches filled as a user's first run fills them
        seconds, code, cpu = wall(dev, env, cwd)
        print(f"warm-up {name}: {seconds:.1f} s, {cpu:.1f} CPU s (exit {code}, load {load():.1f})", flush=True)
    rows: dict = {"import torch, etops": [], **{f"etops dev, {n}": [] for n in envs}}
    cpus: dict = {label: [] for label in rows}
    loads = []
    for r in range(args.rounds):
        for label, cmd, env in [("import torch, etops", imp, envs["this tree"]),
                                *((f"etops dev, {n}", dev, e) for n, e in envs.items())]:
            loads.append(load())
            seconds, code, cpu = wall(cmd, env, cwd)
            rows[label].append(seconds)
            cpus[label].append(cpu)
            print(f"round {r + 1} {label}: {seconds:.1f} s, {cpu:.1f} CPU s (exit {code}, load before {loads[-1]:.1f})",
                  flush=True)
    print("\n| | median s | runs (s) | / import | median CPU s |\n|---|---:|---|---:|---:|")
    base = statistics.median(rows["import torch, etops"])
    for label, values in rows.items():
        med = statistics.median(values)
        print(f"| {label} | {med:.1f} | {', '.join(f'{v:.1f}' for v in values)} | {med / base:.1f}x | "
              f"{statistics.median(cpus[label]):.1f} |")
    print(f"\nload average (1 min) before the runs: {min(loads):.1f}-{max(loads):.1f}, {os.cpu_count()} cores")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "cpu_seconds": cpus, "loads": loads, "file": args.file, "before": args.before}, f,
                      indent=1)


if __name__ == "__main__":
    main()
