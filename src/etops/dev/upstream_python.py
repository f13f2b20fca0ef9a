"""A kernel file's upstream Python tests in etops dev: the LLM kernel files
(``extension/llm/custom_ops/op_*.cpp``) have ``test_*.py`` files next to them that call
``torch.ops.llama.*`` and hold their own references. ``python_test_files_of`` picks those
calling one of the file's operators (etops.conformance.llm_upstream.files_calling);
``PythonTestRun`` runs them, with those torch ops routed to the registry's kernels,
on the base (its functions swapped in) and on the edit, each in a forked process of
its own, while the judge goes on; ``result()`` compares them per test, on the
tests' statuses: a test the base passes and the edit fails (or whose process the
edit's run ended) is a regression, a finding.

The base's run records every routed kernel call (etops.conformance.llm_replay), then
replays the recording on the base (a call the base does not repeat bitwise makes it
not replayable); an edit's run first replays the recording on the edit's kernels, in
a fork of its own: when every call gives back bitwise what it gave the base, the
edit's statuses are the base's (llm_replay states why), else the tests run for real.
May import etops.conformance and dev's background, learned, swap and upstream_tests
modules. The executorch modules the test files import are imported here first
(``preimport``), once, not in each forked run.
"""

from __future__ import annotations

import os

from . import learned
from .upstream_tests import in_checkout

#: the base's runs, kept for the process: (base identity, kernels, the test files and
#: their texts) -> {file: [(test, status, why)]} (a --watch round runs the tests on the edit only)
BASE_RUNS: dict = {}

#: a run on the edit may take RUN_FACTOR times the base's run, never under RUN_FLOOR
#: seconds; RUN_LIMIT seconds without a base run (a kernel that never returns costs that)
RUN_FACTOR, RUN_FLOOR, RUN_LIMIT = 20.0, 30.0, 300.0
#: the base's run recorded (each call's storages hashed and written) and replayed on the
#: base may take RECORDED_FACTOR times RUN_LIMIT
RECORDED_FACTOR = 4.0
#: the environment variable that turns the replay on ("1"): off by default, since on
#: op_sdpa.cpp it takes as long as the tests (hashing every argument's storage after
#: each call: 15 GB) and keeps a 1.4 GB recording
REPLAY_SWITCH = "ETOPS_REPLAY_PYTHON_TESTS"


def replay_wanted() -> bool:
    """Whether the upstream Python tests' kernel calls are recorded and replayed
    (REPLAY_SWITCH set to "1"); else the tests run on the base and the edit."""
    return os.environ.get(REPLAY_SWITCH, "") == "1"


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


def _run_files(files: list, kernels: list, recorder=None, recorded=()) -> dict:
    """{file: [(test, status, why)]}: each file's tests run in this process, routed to
    `kernels`, the calls of those in `recorded` recorded by `recorder` (llm_replay.Recorder)."""
    from ..conformance.llm_upstream import run_test_file

    return {str(f): [(o.test, o.status, o.why) for o in run_test_file(f, kernels, recorder=recorder if f in recorded else None)]
            for f in files}


def preimport(files: list) -> None:
    """Imports here the executorch modules the test `files` import (read from their
    syntax trees: ``import executorch...``, ``from executorch... import``), so the
    forked runs inherit them instead of each importing them (portable_lib imports
    executorch.exir: seconds). One that fails to import is left to the runs, which
    report it."""
    import ast
    import warnings

    from ..llm_library import import_module

    names: set[str] = set()
    for f in files:
        try:
            tree = ast.parse(f.read_text())
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    for name in sorted(n for n in names if n.startswith("executorch.")):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import_module(name)
        except Exception:  # noqa: BLE001 - the runs import it again and report it
            continue


def _call_kernel(kernel: str, variant: str, args, kwargs):
    """A replayed call, made as the routed torch op makes it (llm_upstream.kernel_call)."""
    from ..conformance.llm_upstream import kernel_call

    return kernel_call(kernel, variant)(*args, **kwargs)


def replayable_files(files: list) -> list:
    """Those of `files` a recording of their calls can stand for: none reaching kernels
    other than through the routed torch ops (llm_replay.reaches_kernels_unrouted; the
    others always run)."""
    from ..conformance.llm_replay import reaches_kernels_unrouted

    return [f for f in files if not reaches_kernels_unrouted(f.read_text())]


def _base_run(files: list, kernels: list, addresses: dict, folder=None, replayable=()) -> dict:
    """_run_files with the base's functions (`addresses`) swapped in; with `folder`,
    the calls of the `replayable` files recorded, replayed on the base (its second run:
    a call it does not repeat bitwise makes the recording not replayable) and
    published to `folder`."""
    from ..conformance import llm_replay
    from .swap import BaseSwap

    recorder = llm_replay.Recorder(folder) if folder is not None else None
    swap = BaseSwap(addresses)
    swap.install()
    try:
        run = _run_files(files, kernels, recorder, replayable)
        if recorder is not None:
            recording = recorder.finish()
            if recording.replayable:
                again = llm_replay.replay(recording, recorder.working, _call_kernel)
                if not again.equal:
                    recording.replayable = False
                    recording.why = f"the base does not repeat its own calls: {again.first_difference}"
            recorder.publish()
        return run
    except BaseException:
        if recorder is not None:
            recorder.discard()
        raise
    finally:
        swap.restore()


def _replay(folder) -> dict | None:
    """The recording in `folder` replayed on the kernels registered now (the edit's),
    as the report gives it: {"outcome": "equal" / "differs" / "not replayable",
    "calls", "why", "seconds"}; None when `folder` holds no recording."""
    from ..conformance import llm_replay

    recording = llm_replay.load(folder)
    if recording is None:
        return None
    if not recording.replayable:
        return {"outcome": "not replayable", "calls": 0, "why": recording.why, "seconds": 0.0}
    done = llm_replay.replay(recording, folder, _call_kernel)
    return {"outcome": "equal" if done.equal else "differs", "calls": done.calls, "why": done.first_difference,
            "seconds": round(done.seconds, 3)}


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
        replayable = replayable_files(self.files) if replay_wanted() else []
        folder = learned.replay_folder(self.key) if self.key is not None and replayable else None
        preimport(self.files)
        self.job = Background(lambda: _runs(self.files, kernels, addresses, before, folder, replayable))

    def result(self) -> dict:
        """{"files": per file its tests' statuses on the base and the edit, "regressions":
        the tests the base passes and the edit fails (a finding each), "base_failing",
        "counts" (on the edit), "not_run", "base", "seconds"}."""
        from ..errors import BackgroundFailed

        try:
            before, edit, seconds, replayed = self.job.result()
        except BackgroundFailed as exc:  # the process running the runs died outside them
            why = "its process ended: " + (str(exc).strip().splitlines() or ["?"])[-1]
            return {**no_run(), "not_run": [{"file": self._name(f), "why": why} for f in self.files], "base": self.base}
        if self.key is not None and isinstance(before, dict):
            BASE_RUNS[self.key] = before
            if not self.known:
                learned.save_python_tests(self.key, before)
        return {**compare(before, edit, self._name), "base": self.base, "seconds": round(seconds, 3), "replay": replayed}

    def _name(self, path) -> str:
        return in_checkout(path, self.checkout)


def _runs(files: list, kernels: list, addresses: dict, before, folder=None, replayable=()) -> tuple:
    """(the base's run, `before` when given, None without a base, or the text of
    how its process ended; the edit's run or how its process ended; seconds; the
    replay as _replay gives it, or None), in the forked process of PythonTestRun.
    With `folder` (where the base's recording of the `replayable` files' calls is
    kept), a base with no recording there runs again, recorded; the edit's statuses
    of those files are the base's when the replay of the recording on the edit is
    equal, else (and for the other files) the tests run."""
    import time

    from ..conformance import llm_replay
    from ..errors import BackgroundFailed
    from .background import Background

    start = time.perf_counter()
    limit = RUN_LIMIT
    folder = folder if addresses else None
    if addresses and (before is None or (folder is not None and llm_replay.load(folder) is None)):
        job = Background(lambda: _base_run(files, kernels, addresses, folder, replayable))
        try:
            before = job.result(limit=RUN_LIMIT if folder is None else RECORDED_FACTOR * RUN_LIMIT)
            limit = max(RUN_FLOOR, RUN_FACTOR * job.seconds)
        except BackgroundFailed as exc:
            before = str(exc)
    replayed = None
    if folder is not None and isinstance(before, dict):
        try:
            replayed = Background(lambda: _replay(folder)).result(limit=limit)
        except BackgroundFailed as exc:  # the edit ended the replay's process: the real run says how
            replayed = {"outcome": "differs", "calls": 0, "seconds": 0.0,
                        "why": "the replay's process ended: " + (str(exc).strip().splitlines() or ["?"])[-1]}
    replayed_files = [f for f in files if f in replayable] if replayed is not None and replayed["outcome"] == "equal" else []
    replayed_statuses = {str(f): list(before[str(f)]) for f in replayed_files}
    edit: dict | str = replayed_statuses
    running = [f for f in files if f not in replayed_files]
    if running:
        try:
            ran = Background(lambda: _run_files(running, kernels)).result(limit=limit)
            edit = {str(f): replayed_statuses.get(str(f), ran.get(str(f))) for f in files}
        except BackgroundFailed as exc:
            edit = str(exc)
    return before, edit, time.perf_counter() - start, replayed


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
