"""`etops list` and `etops show` in a new process against `python -c "import torch,
etops"` (issue 47: list within 1.5x of that), alternated, wall time of each child.
The schema cache (etops.schema_cache) is warmed first by one `etops list`, as a
user's second run finds it; `--cold` empties it before every list instead.

    python benchmarks/bench_cli_list.py [--repeats 7] [--cold]
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
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="etops-bench-cache-")
    env = dict(os.environ, ETOPS_CACHE_DIR=cache, PYTHONWARNINGS="ignore")
    wall(COMMANDS["etops list"], env)  # warms the page cache, and the schema cache
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    names = list(COMMANDS)
    for r in range(args.repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:  # rotated: no command always first
            if args.cold and name != "import torch, etops":
                shutil.rmtree(cache, ignore_errors=True)
            times[name].append(wall(COMMANDS[name], env))
    shutil.rmtree(cache, ignore_errors=True)
    base = statistics.median(times["import torch, etops"])
    load = os.getloadavg()[0]
    print(f"{args.repeats} runs each, alternated, {'cold' if args.cold else 'warm'} schema cache, load {load:.1f}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"  {name:22s} median {med:6.2f} s  min {min(values):6.2f} s  {med / base:5.2f}x import")


if __name__ == "__main__":
    main()
