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

After the random cases come the kernel's adversarial classes (``classes``), derived
from a call the kernel returned from (``seed_cases``, probed in an IsolatedRunner). A
death is first tried alone (the case in flight when the process died: a standalone
reproducer, its Python snippet printed by the child before the call), else
bisected; it is classified (``death_class``: SIGFPE, SIGSEGV, heap corruption ...)
and the sequence goes on after it without the cases of that class.

    python -m etops.fuzz.sequences [--kernels SUBSTR] [--cases 12] [--jobs 2] [--no-classes] [--report PATH]

Each sequence's process is a ``child_process.Child.program`` (a fresh interpreter),
forked from ``main``'s thread pool (``--jobs``): see ``run_sequence``.

Extension module of etops.fuzz: imports the core and etops.fuzz.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..child_process import Child
from ..process_end import exit_code

MALLOC_DEBUG = "/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"

_CHILD = """
import faulthandler, json, pickle, sys, warnings
warnings.simplefilter("ignore")
faulthandler.enable()  # a fatal signal prints where it came from (for people)
from etops.fuzz import memory_limit, worker
worker.ON_PHASE = lambda phase: print("PHASE " + phase, flush=True)  # whether a death was in ATen's reference
memory_limit.limit_memory()
cases, snippets = pickle.loads(sys.stdin.buffer.read())
if snippets:
    from etops.fuzz.classes import snippet
    def before(case, args, kwargs):
        print("SNIPPET " + json.dumps(snippet(case["op"], args, kwargs, program=not case.get("direct"))), flush=True)
    worker.BEFORE_CALL = before
for i, case in enumerate(cases):
    try:
        out = worker.run_case(case)
        line = {"i": i, "status": out["status"], "exc": (out.get("exc") or "")[:200], "v": [k for k, _ in out["violations"]]}
    except Exception as exc:
        line = {"i": i, "status": "harness", "exc": f"{type(exc).__name__}: {exc}"[:200], "v": ["harness"]}
    print("CASE " + json.dumps(line), flush=True)
worker.end_of_sequence()
print("DONE", flush=True)
"""


def draw_cases(kernel, count: int, seed: int = 0) -> list:
    """`count` cases of `kernel`, valid and adversarial (invalid) alternating, drawn
    by the fuzz strategies with a fixed seed (pure data)."""
    cases = [_drawn(kernel, mode, count // 2, seed) for mode in ("valid", "invalid")]
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


def seed_cases(kernel, runner, count: int = 12, seed: int = 0) -> list:
    """Up to two valid cases of `kernel` that its call accepts (returns from), the
    bases of its class cases: `count` valid candidates drawn with a fixed seed, each
    run in `runner` (an IsolatedRunner) after classes.canonical_case in float32 and
    in int64; ATen accepting it too first, then every tensor non-empty, then the
    most dims; the second of another rank. None accepted: the canonical case."""
    from .classes import canonical_case

    candidates = [canonical_case(kernel), canonical_case(kernel, "int64")] + _drawn(kernel, "valid", count, seed)
    accepted = []
    for case in candidates:
        out = runner.run(case)
        if out["status"] == "ok":
            accepted.append((out.get("aten") == "ok", not _empty(case), _rank(case), case))
            if sum(ok and full for ok, full, _r, _c in accepted) >= 2:
                break
    if not accepted:
        return candidates[:1]
    accepted.sort(key=lambda a: (not a[0], not a[1], -a[2]))  # ATen accepts it too, every tensor has elements, most dims
    first = accepted[0][3]
    other = next((c for _ok, _full, r, c in accepted[1:] if r != _rank(first)), None)
    return [first] + ([other] if other is not None else [])


def _empty(case) -> bool:
    """Whether a tensor of `case` has no elements (a base its classes learn little from)."""
    import math

    return any(v[0] == "T" and math.prod(v[1]) == 0 for _n, v in case["args"] + case["kwargs"])


def _rank(case) -> int:
    return sum(len(v[1]) for _n, v in case["args"] + case["kwargs"] if v[0] == "T")


def _drawn(kernel, mode: str, count: int, seed: int) -> list:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from . import strategies

    drawn: list = []

    @hseed(seed)
    @settings(max_examples=max(1, count), deadline=None, database=None, suppress_health_check=list(HealthCheck),
              phases=[Phase.generate])
    @given(strategies.calls(kernel, mode))
    def collect(case):
        drawn.append(case)

    collect()
    return drawn


#: a fatal signal's name -> the class of death it reports
DEATHS = {"SIGFPE": "SIGFPE (integer division trap)", "SIGSEGV": "SIGSEGV", "SIGBUS": "SIGBUS", "SIGILL": "SIGILL",
          "SIGKILL": "killed (timeout or memory)"}


def death_class(returncode: int | None, log: str) -> str:
    """What killed a sequence: the signal, heap corruption (glibc's malloc checking
    aborted), or an abort etops did not catch."""
    import signal

    if returncode is None:
        return "timeout"
    if returncode >= 0:
        return f"exit status {returncode}"
    name = signal.Signals(-returncode).name
    if name == "SIGABRT":
        heap = ("malloc", "free()", "corrupted", "double free", "chunk", "realloc")
        return "heap corruption (glibc malloc check)" if any(h in log for h in heap) else "SIGABRT (abort)"
    return DEATHS.get(name, name)


def run_sequence(cases: list, timeout: float = 300.0, snippets: bool = False) -> tuple[bool, int, str]:
    """Runs `cases` in one process under malloc checking: (survived, cases completed,
    the last stderr lines). The outcome of every case completed and, with `snippets`,
    the reproducer of the last call made are in ``last()``. The process is a fresh
    interpreter (``Child.program``: malloc checking takes effect only in a process
    that starts with it) reading the cases from a file and writing its report to
    files, so it never waits for this side; safe from several threads at once
    (``main``'s pool): each run has its own files and ``last()`` is per thread."""
    env = dict(os.environ, LD_PRELOAD=MALLOC_DEBUG, GLIBC_TUNABLES="glibc.malloc.check=3")
    with tempfile.TemporaryDirectory(prefix="etops-sequence-") as tmp:
        given, out, err = (os.path.join(tmp, name) for name in ("cases", "stdout", "stderr"))
        Path(given).write_bytes(pickle.dumps((cases, snippets)))
        fds = [os.open(given, os.O_RDONLY)] + [os.open(path, os.O_WRONLY | os.O_CREAT, 0o600) for path in (out, err)]
        try:
            child = Child.program([sys.executable, "-c", _CHILD], env, stdin=fds[0], stdout=fds[1], stderr=fds[2])
        finally:
            for fd in fds:
                os.close(fd)
        if child.wait(timeout):
            _SEEN.last = {"outcomes": [], "snippet": None, "returncode": None, "log": "timed out", "phase": None}
            return False, 0, "timed out"
        stdout, stderr = Path(out).read_bytes(), Path(err).read_bytes()
    returncode = exit_code(child.wait_status)
    lines = stdout.decode("utf-8", "replace").splitlines()
    outcomes = [json.loads(line[5:]) for line in lines if line.startswith("CASE ")]
    shown = [json.loads(line[8:]) for line in lines if line.startswith("SNIPPET ")]
    log = stderr.decode("utf-8", "replace")[-3000:]
    phases = [line[6:] for line in lines if line.startswith("PHASE ")]
    _SEEN.last = {"outcomes": outcomes, "snippet": shown[-1] if shown else None, "returncode": returncode, "log": log,
                  "phase": phases[-1] if phases else None}
    survived = returncode == 0 and "DONE" in lines
    return survived, len(outcomes), log


_SEEN = threading.local()


def last() -> dict:
    """What this thread's last run_sequence saw: {"outcomes", "snippet", "returncode", "log",
    "phase" (the last the child reported: "reference" while in ATen's reference call)}."""
    return getattr(_SEEN, "last", {"outcomes": [], "snippet": None, "returncode": None, "log": "", "phase": None})


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


def _culprit(cases: list, done: int) -> tuple[int, bool]:
    """The case of `cases` (which died after `done` completed) that kills: the one
    in flight when it kills on its own (a standalone reproducer), else bisected."""
    if done < len(cases) and not run_sequence([cases[done]], snippets=True)[0]:
        return done, True
    return bisect(cases, done), False


#: the classes a second base (of other shapes) adds
SHAPE_CLASSES = ("zero_size", "int_tensor_extremes", "out_too_small", "outs_overlap")


def check_kernel(kernel, count: int, seed: int = 0, runner=None, max_deaths: int = 4) -> dict:
    """One kernel's sequence: {"op", "cases", "survived", "outcomes" (by class and
    status), and "deaths": for each death the culprit case, its class, what killed,
    a Python reproducer and the guarded replay}. After a death the sequence goes on
    from the case after the culprit, without the culprit's class (at most `max_deaths`)."""
    from . import strategies
    from .classes import canonical_case, class_cases

    cases = draw_cases(kernel, count, seed) if count else []
    bases = seed_cases(kernel, runner, seed=seed) if runner is not None else (cases[:1] or [canonical_case(kernel)])
    for i, base in enumerate(bases):  # the second base: the classes that depend on its shapes
        cases.extend(c for c in class_cases(kernel, base) if not i or c["mutation"] in SHAPE_CLASSES)
    result: dict = {"op": kernel.name, "cases": len(cases), "bases": [strategies.describe(b) for b in bases], "deaths": []}
    outcomes: dict = {}
    start = 0
    while start < len(cases):
        rest = cases[start:]
        survived, done, log = run_sequence(rest)
        phase = last()["phase"]
        for line in last()["outcomes"]:
            mutation = rest[line["i"]].get("mutation") or rest[line["i"]]["mode"]
            key = f"{mutation}:{line['status']}" + ("" if not line["v"] else ":" + "+".join(sorted(set(line["v"]))))
            outcomes[key] = outcomes.get(key, 0) + 1
        if survived:
            break
        what = death_class(last()["returncode"], log)
        culprit, alone = _culprit(rest, done)
        if alone:  # the standalone run showed its snippet and what killed it
            what = death_class(last()["returncode"], last()["log"])
            log, phase = last()["log"], last()["phase"]
        else:
            run_sequence(rest[: culprit + 1], snippets=True)
        case = rest[culprit]
        death = {"case_index": start + culprit, "class": case.get("mutation") or case["mode"], "target": case.get("target"),
                 "killed_by": what, "standalone": alone, "in_aten": phase == "reference",
                 "repro": strategies.describe(case), "snippet": last()["snippet"], "case": case,
                 "log": [ln for ln in log.strip().splitlines() if ln.strip()][-4:]}
        if runner is not None:
            replay = runner.run({**case, "guard": True})
            death["guarded"] = [m for kind, m in replay.get("violations", []) if kind == "memory"] or replay.get("status")
        result["deaths"].append(death)
        # the rest of the sequence, without the cases of the class that killed (one reproducer per class)
        cases = cases[: start + culprit + 1] + [c for c in rest[culprit + 1 :] if c.get("mutation") != case.get("mutation")]
        start += culprit + 1
        if len(result["deaths"]) >= max_deaths:
            break
    result["survived"] = not result["deaths"]
    result["outcomes"] = outcomes
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m etops.fuzz.sequences", description=__doc__.split("\n\n")[0])
    p.add_argument("--kernels", default=None, help="only kernels whose name contains this")
    p.add_argument("--cases", type=int, default=12, help="random cases per kernel's sequence (half valid, half adversarial; "
                   f"then one call with every tensor in one dtype for each of {', '.join(ONE_DTYPE)}; then the classes); "
                   "0: the classes only")
    p.add_argument("--jobs", type=int, default=2, help="kernel sequences run at once")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-classes", action="store_true", help="only the random cases (no adversarial classes)")
    p.add_argument("--report", default="build/fuzz/sequences.json")
    args = p.parse_args(argv)
    if not os.path.exists(MALLOC_DEBUG):
        print(f"{p.prog}: {MALLOC_DEBUG} is missing (Debian's libc6 provides it)", file=sys.stderr)
        return 2
    from .runner import IsolatedRunner, callable_kernels

    kernels = callable_kernels(args.kernels)
    start = time.monotonic()
    local = threading.local()
    runners: list = []
    results: list = []

    def one(kernel):
        if args.no_classes:
            r = check_kernel(kernel, args.cases, args.seed)
        else:
            if not hasattr(local, "runner"):
                local.runner = IsolatedRunner(timeout=60)
                runners.append(local.runner)
            try:
                r = check_kernel(kernel, args.cases, args.seed, runner=local.runner)
            except Exception as exc:  # noqa: BLE001 - a fuzzer bug: reported, the other kernels go on
                r = {"op": kernel.name, "cases": 0, "survived": True, "deaths": [], "harness": f"{type(exc).__name__}: {exc}"}
                print(f"HARNESS {kernel.name}: {r['harness']}", flush=True)
        results.append(r)
        for d in r["deaths"]:
            print(f"DIES {r['op']}: {d['killed_by']} on {d['class']} ({d['target']}): {d['repro']}", flush=True)
        _write(args.report, results, time.monotonic() - start, done=False)
        return r

    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            list(pool.map(one, kernels))
    finally:
        for runner in runners:
            runner.close()
    died = [r for r in results if not r["survived"]]
    seconds = time.monotonic() - start
    print(f"{len(results)} kernels, {sum(r['cases'] for r in results)} cases in sequences under malloc checking: "
          f"{len(died)} kernels corrupt the heap or kill the process ({seconds:.0f} s)")
    _write(args.report, results, seconds, done=True)
    return 1 if died else 0


def _write(path: str, results: list, seconds: float, done: bool) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    body = {"seconds": seconds, "done": done, "kernels": len(results),
            "died": sorted(r["op"] for r in results if not r["survived"]), "results": results}
    Path(path).write_text(json.dumps(body, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
