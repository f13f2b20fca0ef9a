"""A kernel file's upstream Python tests in etops dev: the LLM kernel files
(``extension/llm/custom_ops/op_*.cpp``) have ``test_*.py`` files next to them that call
``torch.ops.llama.*`` and hold their own references. ``python_test_files_of`` picks those
calling one of the file's operators (etops.conformance.llm_upstream.files_calling);
``PythonTestRun`` runs them, with those torch ops routed to the registry's kernels,
on the base (its functions swapped in) and on the edit, each in a forked process of
its own, while the judge goes on; ``result()`` compares them per test, on the
tests' statuses: a test the base passes and the edit fails (or whose process the
edit's run ended) is a regression, a finding. May import etops.conformance and
dev's background, learned, swap and upstream_tests modules.
"""

from __future__ import annotations

from . import learned
from .upstream_tests import in_checkout

#: the base's runs, kept for the process: (base identity, kernels, the test files and
#: their texts) -> {file: [(test, status, why)]} (a --watch round runs the tests on the edit only)
BASE_RUNS: dict = {}

#: a run on the edit may take RUN_FACTOR times the base's run, never under RUN_FLOOR
#: seconds; RUN_LIMIT seconds without a base run (a kernel that never returns costs that)
RUN_FACTOR, RUN_FLOOR, RUN_LIMIT = 20.0, 30.0, 300.0


def routed_kernels(target) -> list:
    """The file's operators that have a torch op to route (llm_upstream.ROUTES)."""
    from ..conformance.llm_upstream import ROUTES

    return [op for op in target.names if op in ROUTES.values()]


def python_test_files_of(target, run: bool) -> tuple[list, list]:
    """(the upstream Python test files of the kernel file to run, those not run as
    ``{"file", "why"}``): the ``test_*.py`` next to a file that registers its
    kernels itself calling a torch op routed to one of its operators; `run` False
    (``--no-python-tests``) lists them as not run. Other kernel files have none."""
    from ..conformance.llm_upstream import files_calling

    kernels = routed_kernels(target) if target.self_registering else []
    if not kernels:
        return [], []
    files = files_calling(target.path.parent, kernels)
    if not files:
        return [], [{"file": "", "why": f"no upstream Python test: no test_*.py next to it calls torch.ops of "
                                        f"{', '.join(kernels)}"}]
    if not run:
        return [], [{"file": in_checkout(f, target.checkout), "why": "not asked for (--no-python-tests)"} for f in files]
    return files, []


def _run_files(files: list, kernels: list) -> dict:
    """{file: [(test, status, why)]}: each file's tests run in this process, routed to `kernels`."""
    from ..conformance.llm_upstream import run_test_file

    return {str(f): [(o.test, o.status, o.why) for o in run_test_file(f, kernels)] for f in files}


def _base_run(files: list, kernels: list, addresses: dict) -> dict:
    """_run_files with the base's functions (`addresses`) swapped in."""
    from .swap import BaseSwap

    swap = BaseSwap(addresses)
    swap.install()
    try:
        return _run_files(files, kernels)
    finally:
        swap.restore()


class PythonTestRun:
    """The upstream Python test files `files` of a kernel file, started now in a
    forked process (background.Background) that runs them on the base (`addresses`:
    operator -> the base's function; none: no base run; a run under the same
    `base_key` and test texts is taken from BASE_RUNS, or from etops' disk store:
    learned.load_python_tests) in a fork of its own, then on
    the edit in another (bounded by the base's time), so a kernel that ends its
    process ends that run only. ``result()`` waits and compares."""

    def __init__(self, files: list, kernels: list, checkout, addresses: dict, base_kind: str, base_key=None):
        from .background import Background

        texts = tuple((str(f), f.read_text()) for f in files)
        self.key = None if base_key is None or not addresses else (base_key, tuple(kernels), texts)
        self.base = "none" if not addresses else base_kind or "built-in"
        self.checkout = checkout
        self.files = list(files)
        before = BASE_RUNS.get(self.key) if self.key is not None else None
        before = before or learned.load_python_tests(self.key)  # else a run of an earlier process
        self.known = before is not None
        self.job = Background(lambda: _runs(self.files, kernels, addresses, before))

    def result(self) -> dict:
        """{"files": per file its tests' statuses on the base and the edit, "regressions":
        the tests the base passes and the edit fails (a finding each), "base_failing",
        "counts" (on the edit), "not_run", "base", "seconds"}."""
        from ..errors import BackgroundFailed

        try:
            before, edit, seconds = self.job.result()
        except BackgroundFailed as exc:  # the process running the runs died outside them
            why = "its process ended: " + (str(exc).strip().splitlines() or ["?"])[-1]
            return {**no_run(), "not_run": [{"file": self._name(f), "why": why} for f in self.files], "base": self.base}
        if self.key is not None and isinstance(before, dict):
            BASE_RUNS[self.key] = before
            if not self.known:
                learned.save_python_tests(self.key, before)
        return {**compare(before, edit, self._name), "base": self.base, "seconds": round(seconds, 3)}

    def _name(self, path) -> str:
        return in_checkout(path, self.checkout)


def _runs(files: list, kernels: list, addresses: dict, before) -> tuple:
    """(the base's run, `before` when given, None without a base, or the text of
    how its process ended; the edit's run or how its process ended; seconds), in
    the forked process of PythonTestRun."""
    import time

    from ..errors import BackgroundFailed
    from .background import Background

    start = time.perf_counter()
    limit = RUN_LIMIT
    if addresses and before is None:
        job = Background(lambda: _base_run(files, kernels, addresses))
        try:
            before = job.result(limit=RUN_LIMIT)
            limit = max(RUN_FLOOR, RUN_FACTOR * job.seconds)
        except BackgroundFailed as exc:
            before = str(exc)
    try:
        edit = Background(lambda: _run_files(files, kernels)).result(limit=limit)
    except BackgroundFailed as exc:
        edit = str(exc)
    return before, edit, time.perf_counter() - start


def no_run() -> dict:
    """The Python-test part of a kernel file's result when none ran."""
    return {"files": [], "regressions": [], "base_failing": [], "counts": {}, "not_run": [], "seconds": 0.0}


def compare(before, edit, name) -> dict:
    """The edit's run (`edit`: {file: [(test, status, why)]}, or the text of how its
    process ended) against the base's (`before`, the same, or None: no base), on
    the statuses: a test passing on the base and failing on the edit, or not
    finished because the edit's process ended, is a regression; with no base run,
    every failing test is. `name` names a file as the report does."""
    out = no_run()
    if isinstance(before, str):  # the base's process ended: nothing to compare with
        out["not_run"] = [{"file": "", "why": f"the base's run did not end: {before.strip().splitlines()[-1]}"}]
        return out
    base = {(f, t): status for f, tests in (before or {}).items() for t, status, _ in tests}
    if isinstance(edit, str):  # the edit's process ended: each test the base passed is a regression
        why = "the edit's run ended: " + (edit.strip().splitlines() or ["?"])[-1]
        passed = [(f, t) for (f, t), status in base.items() if status == "passed"]
        out["regressions"] = [{"file": name(f), "test": t, "before": "passed", "status": "crashed", "why": why} for f, t in passed]
        if not passed:
            out["regressions"] = [{"file": "", "test": "", "before": "", "status": "crashed", "why": why}]
        return out
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for f, tests in edit.items():
        entry = {"file": name(f), "tests": []}
        for test, status, why in tests:
            was = base.get((f, test)) if before is not None else None
            counts[status] += 1
            entry["tests"].append({"test": test, "status": status, "base": was, "why": why})
            if status == "failed" and was in ("passed", None):
                out["regressions"].append({"file": name(f), "test": test, "before": was or "no base", "status": status,
                                           "why": why})
            elif status == "failed" and was == "failed":
                out["base_failing"].append(test)
        out["files"].append(entry)
    out["counts"] = counts
    return out
