"""``bench --all``: every registered aten kernel against ATen within a time budget.

The parent derives one OpInfo sample per kernel (ATen only runs here), then a
child interpreter (``python -m etops.bench.runall WORKFILE``, a
``child_process.Child.program``: a fresh interpreter, so that torch's thread pool
runs at the size asked for, never in a fork of a process whose OpenMP team ran)
times them and reports one JSON line per kernel. Should an ExecuTorch kernel abort the child,
the kernel is recorded as such and a new child takes the remaining ones. Each
kernel gets an equal share of the time left.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

from ..child_process import Child

#: Rounds per kernel in --all (fewer than a single-kernel run: many kernels share the budget).
REPEATS = 5
WARMUP = 1
#: A child interpreter's start-up (torch + etops imports), counted against the budget.
STARTUP = 6.0


def _select(kernels):
    from ..registry import registry

    reg = registry()
    if kernels is None:
        names = sorted(n for n in reg.operator_names if n.startswith("aten::"))
    else:
        names = [k if isinstance(k, str) else k.name for k in kernels]
    return [reg.get_kernel(n) for n in names]


def _row_stub(kernel, **extra) -> dict:
    return {"kernel": kernel if isinstance(kernel, str) else kernel.name, "dtype": "-", "size": 0, "size_label": "-", **extra}


def _measure_task(task: dict, deadline: float, remaining: int) -> dict:
    """Runs in the worker: one kernel, its time slice from what is left."""
    from . import core
    from .sampling import sized
    from ..registry import registry

    kernel = registry().get_kernel(task["kernel"])
    sample = task["sample"]
    left = deadline - time.time()
    if left <= 0:
        return _row_stub(kernel, skipped="skipped: time budget used up", dtype=str(sample.dtype).replace("torch.", ""))
    share = left / max(1, remaining)
    # four timed loops (both sides and their zero-size calls) per round, plus calibration
    target = max(2e-4, min(0.01, share / (4 * (REPEATS + WARMUP) * 2)))
    size = task["size"]
    chosen, pair = sized(kernel, sample, size, with_pair=True) if size else (sample, None)
    if chosen is None:
        chosen = sample
        chosen.notes.append(f"as sampled: no {size}-element version works on both sides")
    return core.run_one(kernel, chosen, repeats=REPEATS, warmup=WARMUP, target=target, pair=pair, budget=share * 0.6)


def _worker(path: str) -> None:
    import torch

    import etops  # noqa: F401
    from ..checkout.load import from_environment
    from . import core

    from_environment()  # the kernels --load gave the parent (etops bench --all --load ...)
    work = torch.load(path, weights_only=False)
    tasks, deadline = work["tasks"], work["deadline"]
    start = work.get("start", 0)
    with core.thread_counts(work.get("threads")) as used:
        print(json.dumps({"threads": used}), flush=True)
        for i in range(start, len(tasks)):
            print(json.dumps({"start": i}), flush=True)
            try:
                row = _measure_task(tasks[i], deadline, len(tasks) - i)
            except Exception as exc:  # noqa: BLE001
                row = _row_stub(tasks[i]["kernel"], error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            print(json.dumps({"index": i, "row": row}, default=str), flush=True)


def _run_children(tasks, deadline, threads, progress, rows) -> dict:
    import torch

    env = dict(os.environ)
    import etops

    src = os.path.dirname(os.path.dirname(os.path.abspath(etops.__file__)))
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    start = 0
    used = {}
    with tempfile.TemporaryDirectory(prefix="etops-bench-") as tmp:
        path = os.path.join(tmp, "work.pt")
        while start < len(tasks):
            torch.save({"tasks": tasks, "deadline": deadline, "threads": threads, "start": start}, path)
            err_path = os.path.join(tmp, "stderr.txt")
            report_r, report_w = os.pipe()
            with open(err_path, "w") as err:
                try:
                    child = Child.program([sys.executable, "-m", "etops.bench.runall", path], env, stdout=report_w,
                                          stderr=err.fileno())
                finally:
                    os.close(report_w)
            current = None
            try:
                with os.fdopen(report_r) as report:
                    for line in report:
                        try:
                            msg = json.loads(line)
                        except ValueError:
                            continue
                        if "threads" in msg:
                            used = msg["threads"]
                        elif "start" in msg:
                            current = msg["start"]
                            if progress:
                                progress(current, len(tasks), tasks[current]["kernel"])
                        elif "row" in msg:
                            rows[msg["index"]] = msg["row"]
                            current = None
            except BaseException:  # Ctrl-C (or a progress callback that raised): the child goes too
                child.kill()
                raise
            child.wait()
            if current is None:
                break
            with open(err_path) as f:
                lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("W1")]
            why = next((ln for ln in reversed(lines) if "etops" in ln or "abort" in ln.lower()), lines[-1] if lines else child.ended())
            rows[current] = _row_stub(tasks[current]["kernel"], error=f"the process died running it ({why[:200]})")
            start = current + 1
    return used


def run_all(budget: float = 120.0, size="16k", dtype="float32", kernels=None, threads=None, isolate=True, progress=None):
    from . import inputs as _inputs
    from .result import BenchResult

    t0 = time.time()
    deadline = t0 + budget
    size_n = None if size in (None, "", "sample", 0) else (size if isinstance(size, int) else _inputs.parse_size(str(size)))
    objs = _select(kernels)
    callable_ = [k for k in objs if k.callable]
    rows: list = [None] * len(objs)
    if progress:
        progress(0, len(objs), "deriving inputs from OpInfo samples")
    from .sampling import parse_dtype

    dtypes = None if dtype in (None, "", "any") else [parse_dtype(dtype)] + [d for d in _inputs.DEFAULT_DTYPES if d != parse_dtype(dtype)]
    # Derivation may take half of the budget at most (more would leave nothing to time).
    # OpInfos named after the ops first (a fixed cost: one OpInfo or two per
    # kernel), then, within a quarter of the budget, all of them for the rest.
    _inputs.op_db()
    found = _inputs.derive(callable_, dtypes=dtypes, only_named=True)
    rest = [k for k in callable_ if k.name not in found]
    if rest:
        found.update(_inputs.derive(rest, dtypes=dtypes, deadline=time.monotonic() + budget / 4))
    derived_in = time.time() - t0
    tasks, where = [], []
    for i, k in enumerate(objs):
        if not k.callable:
            rows[i] = _row_stub(k, error=f"not callable: {k._plan_error}")
        elif k.name not in found:
            rows[i] = _row_stub(k, error="no OpInfo sample calls its functional op")
        else:
            tasks.append({"kernel": k.name, "sample": found[k.name], "size": size_n})
            where.append(i)
    task_rows: list = [None] * len(tasks)

    def task_progress(done, total, label):
        if progress:
            progress(len(objs) - len(tasks) + done, len(objs), label)

    used = {}
    if tasks:
        if isolate:
            used = _run_children(tasks, deadline - STARTUP * 0.5, threads, task_progress, task_rows)
        else:
            from . import core

            with core.thread_counts(threads) as used:
                used = dict(used)
                for j, task in enumerate(tasks):
                    task_progress(j, len(tasks), task["kernel"])
                    try:
                        task_rows[j] = _measure_task(task, deadline, len(tasks) - j)
                    except Exception as exc:  # noqa: BLE001
                        task_rows[j] = _row_stub(task["kernel"], error=f"{type(exc).__name__}: {exc}")
    for j, i in enumerate(where):
        rows[i] = task_rows[j] or _row_stub(tasks[j]["kernel"], skipped="skipped: time budget used up")
    if progress:
        progress(len(objs), len(objs), "done")
    settings = {"repeats": REPEATS, "warmup": WARMUP, "budget": budget, "size": size_n, "elapsed": round(time.time() - t0, 1),
                "derive_seconds": round(derived_in, 1), "dtype": str(dtype)}
    if not used:
        import torch

        from .core import DEFAULT_THREADS

        n = threads or DEFAULT_THREADS
        used = {"torch": n, "executorch": n}
    from .host import machine

    return BenchResult(rows, used, machine(), settings)


if __name__ == "__main__":
    _worker(sys.argv[1])
