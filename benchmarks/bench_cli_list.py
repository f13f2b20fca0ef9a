"""`etops list` and `etops show` in a new process against `python -c "import torch,
etops"` (issue 47: list within 1.5x of that), alternated, wall time of each child.
The schema cache (etops.schema_cache) is warmed first by one `etops list`, as a
user's second run finds it; `--cold` empties it before every list instead.
`--before PKG`: another tree's etops package (a folder put first on PYTHONPATH)
measured too, in the same rotation, with a cache folder of its own.

    python benchmarks/bench_cli_list.py [--repeats 7] [--cold] [--before /tmp/etops-main-pkg]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

COMMANDS = {
    "import torch, etops": [sys.executable, "-c", "import torch, etops"],
    "etops list": [sys.executable, "-m", "etops", "list"],
    "etops show": [sys.executable, "-m", "etops", "show", "quantized_decomposed::add.out"],
}


def wall(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--cold", action="store_true", help="an empty schema cache before each list and show")
    ap.add_argument("--before", help="a folder holding another tree's etops package, measured alongside")
    args = ap.parse_args()
    trees = {"": None} if not args.before else {"": None, " (before)": args.before}
    envs, caches = {}, {}
    for suffix, pkg in trees.items():
        caches[suffix] = tempfile.mkdtemp(prefix="etops-bench-cache-")
        env = dict(os.environ, ETOPS_CACHE_DIR=caches[suffix], PYTHONWARNINGS="ignore")
        if pkg:
            env["PYTHONPATH"] = pkg + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        envs[suffix] = env
        wall(COMMANDS["etops list"], env)  # warms the page cache, and the schema cache
    runs = [(name + suffix, cmd, suffix) for suffix in trees for name, cmd in COMMANDS.items()]
    times: dict[str, list[float]] = {label: [] for label, _cmd, _suffix in runs}
    loads = []
    for r in range(args.repeats):
        for label, cmd, suffix in runs[r % len(runs):] + runs[:r % len(runs)]:  # rotated: no command always first
            if args.cold and not label.startswith("import torch, etops"):
                shutil.rmtree(caches[suffix], ignore_errors=True)
            loads.append(os.getloadavg()[0])
            times[label].append(wall(cmd, envs[suffix]))
    for cache in caches.values():
        shutil.rmtree(cache, ignore_errors=True)
    print(f"{args.repeats} runs each, alternated, {'cold' if args.cold else 'warm'} schema cache, "
          f"load {min(loads):.1f}-{max(loads):.1f} (1-minute average before each run)")
    for label, values in times.items():
        base = statistics.median(times["import torch, etops" + (" (before)" if label.endswith(" (before)") else "")])
        med = statistics.median(values)
        print(f"  {label:31s} median {med:6.2f} s  min {min(values):6.2f} s  {med / base:5.2f}x import")


if __name__ == "__main__":
    main()
