"""A kernel file's upstream tests in etops dev: which test files to run
(``test_files_of``: upstream keeps them in ``kernels/test/`` and in the set's own test
folder), and their run on the base and then on the edit in a forked process while the
judge goes on (``GtestRun``), compared with gtest.report.against_base; the edit's run
bounded by the base's (``edit_gtest_timeout``). May import the core, etops.gtest and
dev's background, learned and swap modules.
"""

from __future__ import annotations

from ..gtest import gtest as run_gtest, layout
from ..gtest.report import against_base
from . import learned


#: the base's runs of upstream tests, kept for the process: (base identity, kernel set,
#: the test files and their texts) -> its gtest result (a --watch round runs the tests on the edit only)
BASE_GTEST: dict = {}


class GtestRun:
    """The file's upstream tests, run on the base and then on the edit in a forked
    process (background.Background) started now, while this process goes on (the
    judge), with `kernel_set`'s supported features (the kernel file's folder's set);
    ``result()`` waits for it: gtest.report.against_base's comparison, with ``base``
    saying which base it was and `not_run` (test files not run, and why) added.
    `addresses`: operator -> the base's function, swapped in over the edit for the
    base's run (in the forked process): the file at the git base, or the kernel the
    edit replaced; none: no base run. A base run under the same `base_key`, kernel
    set and test texts is taken from BASE_GTEST. `compiled`: (the base's, the edit's)
    gtest.session.CompiledSources for a file registering its kernels itself (its tests
    call its functions: each run compiles its side into the binaries; the base's
    None: the binaries link the library whose kernels the edit replaced)."""

    def __init__(self, test_files: list, checkout, addresses: dict, base_kind: str, base_key=None, kernel_set=None,
                 not_run=(), compiled=None):
        from .background import Background

        texts = tuple((str(f), f.read_text()) for f in test_files)
        self.key = None if base_key is None or not addresses else (base_key, kernel_set, texts)
        self.base = ("none" if not addresses else base_kind or "built-in")
        self.checkout = checkout
        self.files = [in_checkout(f, checkout) for f in test_files]
        self.not_run = list(not_run)
        before = BASE_GTEST.get(self.key) if self.key is not None else None
        before = before or learned.load_gtest(self.key)  # else a run of an earlier process
        self.known = before is not None
        self.job = Background(lambda: gtest_runs(test_files, checkout, addresses, before, kernel_set, compiled))

    def result(self) -> dict:
        from ..errors import BackgroundFailed

        try:
            before, edit = self.job.result()
        except BackgroundFailed as exc:  # the process running the tests died outside any test run
            why = "its process ended: " + (str(exc).strip().splitlines() or ["?"])[-1]
            return {**not_run_result(self.not_run + [{"file": f, "why": why} for f in self.files]), "base": self.base}
        if self.key is not None and before is not None:
            BASE_GTEST[self.key] = before
            if not self.known:
                learned.save_gtest(self.key, before)
        out = against_base(before, edit)

        def named(entries: list) -> list:  # each test file named as reports name checkout files
            return [{**e, "file": in_checkout(e["file"], self.checkout)} for e in entries]

        return {**out, "file": self.files[0], "files": named(out["files"]), "regressions": named(out["regressions"]),
                "not_run": self.not_run + named(out["not_run"]), "base": self.base}


def in_checkout(path, checkout) -> str:
    """`path` relative to `checkout` when inside it (as reports name checkout files), else absolute."""
    from pathlib import Path

    full = Path(path).resolve()
    return str(full.relative_to(checkout.resolve())) if full.is_relative_to(checkout.resolve()) else str(full)


def not_run_result(not_run: list) -> dict:
    """The gtest part of a kernel file's result when no upstream test ran: each test
    file (or the places looked in) with why."""
    return {"file": "", "files": [], "not_run": list(not_run), "error": None, "regressions": [], "base_failing": [],
            "counts": {}, "seconds": 0.0}


#: an upstream test binary's runs on the edit may take GTEST_FACTOR times the base's
#: run of it, never under GTEST_FLOOR seconds, all its tests together (a kernel that
#: never returns costs that, not etops gtest's own 300 s per test it hangs in)
GTEST_FACTOR = 20.0
GTEST_FLOOR = 30.0


def edit_gtest_timeout(before) -> float:
    """How long one upstream test binary may run on the edit: GTEST_FACTOR times the
    longest run of a binary on the base (`before`, its GtestResult), at least
    GTEST_FLOOR; etops gtest's default (300 s) when there is no base run."""
    runs = [f.run_seconds for f in getattr(before, "files", ()) if f.run_seconds]
    if not runs:
        return 300.0
    return max(GTEST_FLOOR, GTEST_FACTOR * max(runs))


def gtest_runs(test_files: list, checkout, addresses: dict, before, kernel_set, compiled=None) -> tuple:
    """(the base's run or `before` when given, None without a base; the edit's run,
    each binary bounded by edit_gtest_timeout). `compiled`: GtestRun's."""
    from .swap import BaseSwap

    base_compiled, edit_compiled = compiled or (None, None)
    if addresses and before is None:
        swap = BaseSwap(addresses)
        swap.install()
        try:
            before = run_gtest(test_files, root=checkout, kernel_set=kernel_set, compiled=base_compiled)
        finally:
            swap.restore()
    limit = edit_gtest_timeout(before)
    return before, run_gtest(test_files, root=checkout, kernel_set=kernel_set, timeout=limit, total=limit,
                             compiled=edit_compiled)


def self_registering_tests(target, run: bool) -> tuple[list, list]:
    """(the upstream tests of a file registering its kernels itself, those not run):
    ``<stem>*_test.cpp`` and ``test_<stem>*.cpp`` next to it that compile it (their
    binaries call its functions, not the registry: each run compiles the edit, or the
    base, into them; gtest.session.CompiledSources)."""
    folder, stem = target.path.parent, target.path.stem
    own = sorted(set(folder.glob(f"{stem}*_test.cpp")) | set(folder.glob(f"test_{stem}*.cpp")))
    if not own:
        return [], [{"file": "", "why": f"no upstream test: no {stem}*_test.cpp or test_{stem}*.cpp next to it"}]
    path = target.path.resolve()
    calling = [p for p in own if path in {s.resolve() for s in layout.describe(p, target.checkout, target.include_root).registering}]
    not_run = [{"file": in_checkout(p, target.checkout), "why": f"it compiles no function of {target.path.name}"}
               for p in own if p not in calling]
    if not run:
        return [], not_run + [{"file": in_checkout(p, target.checkout), "why": "not asked for (--no-gtest)"} for p in calling]
    return calling, not_run


def test_files_of(target, run: bool) -> tuple[list, list, str | None]:
    """(the upstream test files of the kernel file to run, those not run as
    ``{"file", "why"}``, the kernel set of its folder): upstream keeps them in
    ``kernels/test/`` and in the folder's own ``kernels/<set>/test/``
    (gtest.layout.tests_of_kernel); one that calls none of the file's operators
    (kernels/test/op_add_test.cpp for kernels/quantized/cpu/op_add.cpp) is not run.
    None found is one line naming where it looked; `run` False (``--no-gtest``)
    lists every one found as not run."""
    places = layout.tests_of_kernel(target.path, target.checkout)
    kernel_set = layout.kernel_set_of(target.path, target.checkout)
    if target.self_registering:  # upstream keeps them next to the file (op_sdpa_test.cpp, test_op_moe.cpp)
        return (*self_registering_tests(target, run), kernel_set)
    existing = [p for p in places if p.is_file()]
    if not existing:
        looked = ", ".join(in_checkout(p, target.checkout) for p in places)
        return [], [{"file": "", "why": f"no upstream test: none of {looked} exists"}], kernel_set
    operators = {i.entry.op: i.entry.function for i in target.ops}
    calling = [p for p in existing if layout.calls_any(layout.describe(p, target.checkout, target.include_root), operators)]
    not_run = [{"file": in_checkout(p, target.checkout), "why": f"it calls none of the file's operators ({', '.join(operators)})"}
               for p in existing if p not in calling]
    if not run:
        return [], not_run + [{"file": in_checkout(p, target.checkout), "why": "not asked for (--no-gtest)"} for p in calling], kernel_set
    return calling, not_run, kernel_set
