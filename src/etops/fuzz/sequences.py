"""Corruption that shows later: many fuzz cases in one process under glibc's
malloc checking, then bisection to the call that corrupted the heap.

The isolated runner forks a fresh worker per case, so a kernel that overflows a
buffer without crashing at once goes unseen. Here one process per kernel (started
with ``LD_PRELOAD`` of libc6's ``libc_malloc_debug.so.0`` and
``GLIBC_TUNABLES=glibc.malloc.check=3``) runs a sequence of valid and adversarial
cases one after the other, then frees what they left and walks the heap
(worker.end_of_sequence); glibc aborts at the first
allocation that finds a corrupted chunk, which may be calls later. When a sequence
dies, it is bisected over its prefixes (each in a fresh process) to the first
call whose prefix dies, and that call is replayed guarded (etops.guard.call) to
name the argument and the access.

    python -m etops.fuzz.sequences [--kernels SUBSTR] [--cases 12] [--jobs 2] [--report PATH]

Extension module of etops.fuzz: imports the core and etops.fuzz.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

MALLOC_DEBUG = "/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"

_CHILD = """
import pickle, sys, warnings
warnings.simplefilter("ignore")
from etops.fuzz import worker
worker.limit_memory()
cases = pickle.loads(sys.stdin.buffer.read())
for i, case in enumerate(cases):
    try:
        worker.run_case(case)
    except Exception:
        pass
    print(i, flush=True)
worker.end_of_sequence()
print("DONE", flush=True)
"""


def draw_cases(kernel, count: int, seed: int = 0) -> list:
    """`count` cases of `kernel`, valid and adversarial (invalid) alternating, drawn
    by the fuzz strategies with a fixed seed (pure data)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from . import strategies

    cases = []
    for mode in ("valid", "invalid"):
        drawn = []

        @hseed(seed)
        @settings(max_examples=max(1, count // 2), deadline=None, database=None, suppress_health_check=list(HealthCheck),
                  phases=[Phase.generate])
        @given(strategies.calls(kernel, mode))
        def collect(case):
            drawn.append(case)

        collect()
        cases.append(drawn)
    mixed: list[Any] = []
    for pair in zip(*cases):
        mixed.extend(pair)
    if cases[0]:  # the commonest mistake: every tensor in one dtype (float tensors to a quantized kernel, ...)
        mixed.extend(in_one_dtype(cases[0][0], dtype) for dtype in ONE_DTYPE)
    return mixed


#: the dtypes of the cases with every tensor argument in one dtype
ONE_DTYPE = ("float32", "int64", "uint8", "bool")


def in_one_dtype(case: dict, dtype: str) -> dict:
    """`case` (a valid call) with every tensor argument and out in `dtype`: an
    adversarial call (invalid mode, mutation ``one_dtype``)."""

    def retyped(value):
        if isinstance(value, tuple) and value and value[0] == "T":
            return ("T", value[1], dtype, *value[3:])
        if isinstance(value, tuple) and value and value[0] == "L":
            return ("L", [retyped(v) for v in value[1]], *value[2:])
        return value

    return {**case, "mode": "invalid", "mutation": "one_dtype", "target": None, "out_dtype": dtype,
            "args": [(n, retyped(v)) for n, v in case["args"]], "kwargs": [(n, retyped(v)) for n, v in case["kwargs"]]}


def run_sequence(cases: list, timeout: float = 300.0) -> tuple[bool, int, str]:
    """Runs `cases` in one process under malloc checking: (survived, cases completed,
    the last stderr lines)."""
    env = dict(os.environ, LD_PRELOAD=MALLOC_DEBUG, GLIBC_TUNABLES="glibc.malloc.check=3")
    try:
        proc = subprocess.run([sys.executable, "-c", _CHILD], input=pickle.dumps(cases), capture_output=True,
                              env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, 0, "timed out"
    lines = proc.stdout.decode("utf-8", "replace").split()
    done = sum(1 for line in lines if line.isdigit())
    survived = proc.returncode == 0 and "DONE" in lines
    return survived, done, proc.stderr.decode("utf-8", "replace")[-1500:]


def bisect(cases: list, died_after: int) -> int:
    """The index of the first case whose prefix dies (each probe a fresh process)."""
    low, high = 1, min(len(cases), died_after + 1)  # cases[:high] dies
    while low < high:
        mid = (low + high) // 2
        if run_sequence(cases[:mid])[0]:
            low = mid + 1
        else:
            high = mid
    return high - 1


def check_kernel(kernel, count: int, seed: int = 0) -> dict:
    """One kernel's sequence: {"op", "cases", "survived", and for a death the
    culprit case, its description, the guarded replay and the log}."""
    from . import strategies

    cases = draw_cases(kernel, count, seed)
    survived, done, log = run_sequence(cases)
    result = {"op": kernel.name, "cases": len(cases), "survived": survived}
    if survived:
        return result
    culprit = bisect(cases, done)
    result.update(culprit=culprit, repro=strategies.describe(cases[culprit]), log=log.strip().splitlines()[-3:])
    from .runner import IsolatedRunner

    with IsolatedRunner(timeout=60) as runner:
        replay = runner.run({**cases[culprit], "guard": True})
    result["guarded"] = [m for kind, m in replay.get("violations", []) if kind == "memory"] or replay.get("status")
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m etops.fuzz.sequences", description=__doc__.split("\n\n")[0])
    p.add_argument("--kernels", default=None, help="only kernels whose name contains this")
    p.add_argument("--cases", type=int, default=12, help="cases per kernel's sequence (half valid, half adversarial; "
                   f"then one call with every tensor in one dtype for each of {', '.join(ONE_DTYPE)})")
    p.add_argument("--jobs", type=int, default=2, help="kernel sequences run at once")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", default="build/fuzz/sequences.json")
    args = p.parse_args(argv)
    if not os.path.exists(MALLOC_DEBUG):
        print(f"{p.prog}: {MALLOC_DEBUG} is missing (Debian's libc6 provides it)", file=sys.stderr)
        return 2
    from .runner import callable_kernels

    kernels = callable_kernels(args.kernels)
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda k: check_kernel(k, args.cases, args.seed), kernels))
    died = [r for r in results if not r["survived"]]
    for r in died:
        print(f"CORRUPTS {r['op']}: case {r['culprit']}: {r['repro']}\n    log: {' | '.join(r['log'])}\n    guarded: {r['guarded']}")
    seconds = time.monotonic() - start
    print(f"{len(results)} kernels, {sum(r['cases'] for r in results)} cases in sequences under malloc checking: "
          f"{len(died)} kernels corrupt the heap or kill the process ({seconds:.0f} s)")
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(json.dumps({"seconds": seconds, "results": results}, indent=1, default=str))
    return 1 if died else 0


if __name__ == "__main__":
    sys.exit(main())
