"""The long fuzz campaign: ``python -m etops.fuzz --budget SECONDS`` (``make fuzz``, ``etops fuzz``).

Rounds over every callable kernel, valid then invalid calls, then the adversarial
classes (etops.fuzz.classes) derived from a call the kernel accepted, until the time
budget is spent; prints the counts (kernels fuzzed, cases run, aborts found and fixed)
and writes a JSON report with every finding and its reproducer.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter


def _check_known_aborts(runner):
    """Replays every abort the fuzzer ever found (the rules table's findings): each
    must now raise a clear error naming its argument instead of killing the worker,
    or (a finding that `computes`: its rule turns the call into one the kernel
    computes) return."""
    from etops.ops import findings

    from .findings import is_fixed

    fixed, still = [], []
    for finding in findings():
        out = runner.run({**finding.case, "direct": True})  # as etops' direct calls make it
        (fixed if is_fixed(finding, out) else still).append((finding.op, out.get("exc") or out.get("signal")))
    return fixed, still


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m etops.fuzz", description=__doc__)
    p.add_argument("--budget", type=float, default=1800.0, help="seconds to fuzz (default 1800)")
    p.add_argument("--examples", type=int, default=25, help="Hypothesis examples per kernel, mode and round")
    p.add_argument("--kernels", default=None, help="only kernels whose name contains this")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--timeout", type=float, default=20.0, help="seconds before a case counts as a hang")
    p.add_argument("--report", default="build/fuzz/report.json")
    p.add_argument("--guard", action="store_true",
                   help="make every call with etops.guard.call: reads and writes outside a tensor are found at the call")
    p.add_argument("--no-classes", action="store_true",
                   help="skip the adversarial classes (etops.fuzz.classes: integer extremes and INT_MIN / -1, zero-size "
                        "dims, wrong-dtype, too-small and overlapping outs, sizes that overflow) after each kernel's calls")
    p.add_argument("--class-cases", type=int, default=None, help="at most this many class cases per kernel and round")
    p.add_argument("--load", action="append", metavar="SPEC",
                   help="load kernels first (FILE.cpp of a checkout, LIB.so, FILE.py:FUNCTION; repeatable) and fuzz "
                        "those unless --kernels is given; the workers load them too")
    args = p.parse_args(argv)

    from .runner import IsolatedRunner, callable_kernels, fuzz_classes, fuzz_kernel

    rng = random.Random(args.seed)
    loaded = None
    if args.load:
        from ..checkout.load import load_for_command

        loaded = load_for_command(args.load, p.prog)
        if loaded is None:
            return 2
    kernels = [k for k in callable_kernels(args.kernels) if loaded is None or args.kernels or k.name in loaded]
    start = time.monotonic()
    deadline = start + args.budget
    totals: Counter[str] = Counter()
    fuzzed = set()
    crashes = {}  # (op, notice) -> crash
    violations = {}  # (op, kind) -> (repro, message)
    harness = []
    rounds = 0
    with IsolatedRunner(timeout=args.timeout) as runner:
        fixed, still = _check_known_aborts(runner)
        print(f"known aborts: {len(fixed)} fixed by pre-checks, {len(still)} still abort", flush=True)
        for op, what in still:
            print(f"  STILL ABORTS: {op}: {what}", flush=True)
        while time.monotonic() < deadline:
            rounds += 1
            order = list(kernels)
            rng.shuffle(order)
            for kernel in order:
                accepted: list = []
                for mode in ("valid", "invalid") if args.no_classes else ("valid", "invalid", "classes"):
                    if time.monotonic() >= deadline:
                        break
                    if mode == "classes":
                        rep = fuzz_classes(runner, kernel, accepted, guard=args.guard, limit=args.class_cases)
                    else:
                        rep = fuzz_kernel(runner, kernel, mode, args.examples, seed=rng.randrange(2**32), guard=args.guard)
                        accepted += rep.accepted
                    fuzzed.add(kernel.name)
                    totals["cases"] += rep.cases
                    totals[f"{mode}_cases"] += rep.cases
                    totals["ok"] += rep.ok
                    totals["raised"] += rep.raised
                    totals["aten_ok"] += rep.aten_ok
                    for crash in rep.crashes or ([rep.crash] if rep.crash else []):
                        key = (kernel.name, crash["notice"] or crash["signal"])
                        if key not in crashes:
                            crashes[key] = crash
                            print(f"ABORT {crash['repro']}\n      {crash['signal']}: {crash['notice']}", flush=True)
                    for kind, (repro, message, _case) in rep.violations.items():
                        if (kernel.name, kind) not in violations:
                            violations[(kernel.name, kind)] = (repro, message)
                            print(f"{kind.upper()} {repro}\n      {message[:300]}", flush=True)
                    for h in rep.harness_errors:
                        harness.append(h)
                        print(f"HARNESS {h[0]}: {h[1]}", flush=True)
            print(f"round {rounds}: {totals['cases']} cases, {time.monotonic() - start:.0f}s", flush=True)
        deaths = runner.deaths

    elapsed = time.monotonic() - start
    by_kind = Counter(kind for _op, kind in violations)
    summary = {
        "kernels_fuzzed": len(fuzzed),
        "kernels_callable": len(kernels),
        "rounds": rounds,
        "cases": totals["cases"],
        "valid_cases": totals["valid_cases"],
        "invalid_cases": totals["invalid_cases"],
        "class_cases": totals["classes_cases"],
        "calls_returned": totals["ok"],
        "calls_raised": totals["raised"],
        "aten_accepted": totals["aten_ok"],
        "worker_deaths": deaths,
        "aborts_found": len(crashes),
        "known_aborts_fixed": len(fixed),
        "known_aborts_still_aborting": len(still),
        "violations_by_kind": dict(by_kind),
        "harness_errors": len(harness),
        "seconds": round(elapsed),
    }
    print()
    print("etops fuzz campaign")
    print(f"  kernels fuzzed:        {summary['kernels_fuzzed']} of {summary['kernels_callable']} callable")
    print(f"  cases run:             {summary['cases']} ({summary['valid_cases']} valid, {summary['invalid_cases']} invalid, {summary['class_cases']} of the classes) in {summary['seconds']}s, {rounds} rounds")
    print(f"  ATen accepted:         {summary['aten_accepted']}; etops returned {summary['calls_returned']}, raised {summary['calls_raised']}")
    print(f"  aborts found:          {summary['aborts_found']} new (worker deaths {deaths})")
    print(f"  known aborts fixed:    {summary['known_aborts_fixed']} (pre-checks), still aborting: {summary['known_aborts_still_aborting']}")
    print(f"  property violations:   {dict(by_kind) or 'none'} (distinct kernel x kind)")
    print(f"  harness errors:        {len(harness)}")
    if args.report:
        os.makedirs(os.path.dirname(args.report) or ".", exist_ok=True)
        with open(args.report, "w") as f:
            json.dump(
                {
                    "summary": summary,
                    "aborts": [{"op": op, "notice": n, "signal": c["signal"], "repro": c["repro"], "case": repr(c["case"])} for (op, n), c in sorted(crashes.items())],
                    "violations": [{"op": op, "kind": kind, "repro": r, "message": m} for (op, kind), (r, m) in sorted(violations.items())],
                    "harness_errors": [list(h) for h in harness],
                },
                f,
                indent=1,
                default=str,
            )
        print(f"  report:                {args.report}")
    return 1 if crashes or still else 0


if __name__ == "__main__":
    sys.exit(main())
