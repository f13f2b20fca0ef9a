"""One round of the kernel-development gate: each kernel file located in its
checkout, built with the wheel's flags, its base built (``base``), the edit judged
next to it by check's judge (``judge``) and timed against it (``timing``)
(``run_file``); every file of a list, a folder or a change (``dev``).
May import the core, etops.checkout, etops.custom, etops.conformance, etops.gtest,
etops.guard and etops.bench.
"""

from __future__ import annotations

import pickle
import time

from ..errors import BuildError
from ..registry import as_program
from ..checkout.layout import CheckoutError, NoOperators
from . import early, learned, outline, progress, stream, upstream_python, upstream_tests
from .base import Base
from .report import DevResult, FileResult


#: Seconds the conformance of one file may take by default (float32 tasks first).
CHECK_BUDGET = 60.0


def _report_dir(target_path, report_dir):
    from pathlib import Path

    if report_dir is not None:
        return Path(report_dir)
    import hashlib

    from ..custom import cache_dir

    return cache_dir() / "dev-reports" / hashlib.sha256(str(target_path).encode()).hexdigest()[:16]


def _base(target, base, cflags):
    """(base.FoundBase, its KernelLibrary or None): the file at `base` (a base.Base)
    built, or the built-in (Base.BUILT_IN, no git checkout, a new file, or a base
    that does not build: the FoundBase says why)."""
    from .base import FoundBase, build_base, find_base

    found = find_base(target, base)
    if found.kind != "git":
        return found, None
    try:
        return found, build_base(target, found, cflags)
    except (BuildError, CheckoutError) as exc:
        why = f"the file at {found.rev} does not build: " + str(exc).splitlines()[0]
        return FoundBase("built-in", rev=found.rev, commit=found.commit, why=why), None


def _judge_file(result, target, addresses: dict, base_kind: str, directory, *, dtypes, isolate, budget, base_key,
                dim_orders, numerics=True, generated=True, alongside=None, stored=None, opinfos=None) -> None:
    """check's judge on the edit (installed) and the base (`addresses`: operator ->
    the base's function, swapped in for its pass); this round's reproducers, each
    loading the file, in `directory`. `alongside`: the round's timing, started once
    the edit's cases are recorded (judge.run_passes); `stored`: the plan the store
    had (learned.stored_plan; None: worked out here); `opinfos`: only theirs (cases.only_opinfos)."""
    import shutil

    from .cases import only_opinfos, plan
    from .judge import BASE_RESULTS, judge
    from .numerics_pass import NUMERICS
    from .reproduce import load_in_reproducers
    from .swap import BaseSwap

    for folder in ("findings", "reproducers"):  # this round's reproducers only
        shutil.rmtree(directory / folder, ignore_errors=True)
    t = time.perf_counter()
    with progress.phase("discovery: the OpInfos reaching its operators"):
        tasks = stored if stored is not None else learned.cached_plan(
            result.ops, dtypes, generated, lambda: plan(result.ops, dtypes, progress=progress.count, generated=generated))
    tasks = only_opinfos(tasks, opinfos)
    result.seconds["plan"] = time.perf_counter() - t
    result.sources = {op: sorted({t["opinfo"] for t in ts}) for op, ts in tasks.items()}  # the timing's, until judged
    swap = BaseSwap(addresses)
    with progress.phase("judging"):
        learned.load_base(base_key, BASE_RESULTS)  # the base's results of an earlier process
        judged = judge(tasks, swap.install if addresses else None, swap.restore, base_kind=base_kind if addresses else "",
                       guarded=isolate, report_dir=directory, budget=budget, dtypes=dtypes, base_key=base_key,
                       dim_orders=dim_orders, alongside=alongside, axes=(NUMERICS,) if numerics else (), opinfos=opinfos)
    learned.save_base(base_key, BASE_RESULTS)
    result.set_judged(judged["plan"], judged)
    load_in_reproducers(directory, [str(target.path)], {str(target.path): target.helpers})


def _early_needed() -> bool:
    """early.needed: the round streams and discovery is not on disk."""
    from ..conformance.sweep import discovery_path
    from .cases import wheel_kmap

    return early.needed(discovery_path(wheel_kmap()).exists())


def _recordable_before_install(target) -> bool:
    """Whether the early cases may be recorded before the edit is swapped in: every
    operator of the file has a kernel in the registry already (the calls map to the
    same kernels then), and building the file loads nothing (not self-registering)."""
    from ..registry import registry

    return not target.self_registering and set(target.names) <= set(registry().operator_names)


def _early(result, *, dtypes, generated: bool, isolate: bool, dim_orders: bool) -> None:
    """The edit's early cases (etops.dev.early: their failing cases streamed within
    seconds) when discovery must run before the plan (a fresh cache) and the round
    streams; their seconds in ``result.seconds["early"]``."""
    if _early_needed():
        t = time.perf_counter()
        early.run_early(result.ops, dtypes=dtypes, generated=generated, guarded=isolate, dim_orders=dim_orders)
        result.seconds["early"] = time.perf_counter() - t


def _timing_rows(result, target, addresses: dict, *, dtype, repeats, threads, max_slowdown, isolate=True) -> list:
    """The rows of the edit (installed) against the base's function of each
    operator, three sizes. With `isolate` and one thread, each operator is timed in
    a forked process (background.Background): the edit runs unguarded there, so a
    kernel that faults on a timing input ends that process, not this one (a
    ``crashed`` row: a finding); torch's OpenMP threads do not survive a fork, so
    more threads time here."""
    from ..registry import registry
    from ..checkout.install import schema_of
    from .timing import time_edit

    def rows_of(index: int, impl) -> list:
        from .swap import callable_base

        name = impl.entry.op
        kernel = as_program(registry().get_kernel(name))
        handle = callable_base(name, schema_of(impl.entry), addresses.get(name), index)
        try:
            other = None if handle is None else as_program(handle.kernel)
            return time_edit(kernel, other, dtype=dtype, repeats=repeats, threads=threads, max_slowdown=max_slowdown,
                             tasks=result.sources.get(name))
        finally:
            if handle is not None and handle.active:
                handle.deregister()

    rows: list = []
    for index, impl in enumerate(target.ops):
        progress.count(index, len(target.ops))
        if isolate and threads == 1:
            rows += _rows_apart(impl.entry.op, lambda: rows_of(index, impl))
        else:
            rows += rows_of(index, impl)
    return rows


#: torch's answers a forked timing process of this one handed back (_keep_found), to hand on
#: to the process that forked this one in its turn
_RELAYED: dict = {}


def _sampled(work):
    """A function giving `work()`, the OpInfo samples it found (etops.bench.sampling)
    and torch's answers worked out for it (etops.signature_cache: the timing's inputs'
    out shapes and checks, its own and those of the processes it forked), for a forked
    process to hand back to this one (keep_found), which keeps them for its next
    process (etops.dev.learned): a warm round's timing asks torch's meta kernels
    nothing (their first call imports torch._dynamo)."""
    from .. import signature_cache
    from ..bench import sampling

    def run():
        known = sampling.found_samples()
        signature_cache.made_here()  # what the fork inherited is not its own
        _RELAYED.clear()
        made = work()
        answers = signature_cache.made_here()
        for name, entries in _RELAYED.items():
            answers.setdefault(name, {}).update(entries)
        try:
            pickle.dumps(answers)
        except Exception:  # noqa: BLE001 - an argument that does not pickle: worked out again where needed
            answers = {}
        return made, {k: v for k, v in sampling.found_samples().items() if k not in known}, answers

    return run


def _keep_found(outcome):
    """`work()`'s value from a _sampled outcome, its samples and torch's answers kept
    here for the next round (and relayed by a process that was forked itself)."""
    from .. import signature_cache
    from ..bench import sampling

    made, found, answers = outcome
    sampling.keep_samples(found)
    signature_cache.keep(answers)
    for name, entries in answers.items():
        _RELAYED.setdefault(name, {}).update(entries)
    return made


def _rows_apart(name: str, rows) -> list:
    """`rows()` run in a forked process: its rows (the OpInfo samples it found kept
    here for the next round), or one ``crashed`` row when the process died or did
    not end within timing_limit() (killed: a kernel spinning on a timing input)."""
    from ..errors import BackgroundFailed
    from .background import Background

    try:
        return _keep_found(Background(_sampled(rows)).result(limit=timing_limit()))
    except BackgroundFailed as exc:
        return _ended_row(name, exc)


#: seconds the timing of one operator (its three sizes, edit and base) may take in its
#: process before it is killed and is a finding (ETOPS_TIMING_LIMIT sets it)
TIMING_LIMIT = 90.0


def timing_limit() -> float:
    """TIMING_LIMIT, or the environment's ETOPS_TIMING_LIMIT (positive seconds)."""
    import os

    asked = os.environ.get("ETOPS_TIMING_LIMIT")
    if not asked:
        return TIMING_LIMIT
    try:
        seconds = float(asked)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(f"ETOPS_TIMING_LIMIT must be a positive number of seconds, got {asked!r}")
    return seconds


def _ended_row(name: str, failed) -> list:
    """The one ``crashed`` row of a timing whose forked process ended without its
    rows (`failed`: its BackgroundFailed): a finding, with the last line it gave."""
    why = str(failed).strip().splitlines()[-1]
    return [{"kernel": name, "label": "all sizes", "size": "-", "crashed": True,
             "error": f"the timing's process (the edit and the base, unguarded) ended: {why}"}]


def _timing_alongside(result, target, addresses: dict, others, **timing):
    """The round's timing (_timing_rows, each operator in a process of its own) as
    an alongside.Alongside, to run on a core of its own while the judge runs, the
    processes `others` kept off it too."""
    from .alongside import Alongside

    return Alongside(_sampled(lambda: _timing_rows(result, target, addresses, **timing)), others)


def _compiled(target, found, library, base_library):
    """(the base's, the edit's) sources compiled into the upstream tests of a file that
    registers its kernels itself (its tests call its functions, not the registry):
    the object of the file its kernel library holds (`library`'s, `base_library`'s:
    the code the judge ran, built once with the wheel's flags on both sides), else the
    file compiled again; the base's None when the base is the built-in (the binaries
    link the wheel's library); None for other files."""
    if not target.self_registering:
        return None
    from ..gtest.session import CompiledSources

    def own(built) -> tuple:
        made = built.object_of(0) if built is not None else None  # source 0: the kernel file
        return ((str(target.path), made),) if made else ()

    base = (CompiledSources(((str(target.path), str(found.path)),), (f"-I{found.overlay}",), own(base_library))
            if found.kind == "git" else None)
    return base, CompiledSources(objects=own(library))


def run_file(path, *, root=None, yaml=None, dtypes=None, timing_dtype="float32", threads=1, repeats=11, check=True,
             timing=True, cflags=(), budget=CHECK_BUDGET, base: Base = Base.HEAD, isolate=True, max_slowdown=None,
             report_dir=None, gtest=True, dim_orders=True, numerics=True, generated=True, helpers=(),
             python_tests=True, opinfos=None) -> FileResult:
    """One kernel file through the loop (see ``dev``); a file that cannot be located
    or built gives a FileResult with ``error`` set, nothing swapped. ``base``: the
    base the edit is compared with (a base.Base: HEAD, a revision, the built-in).
    ``helpers``: helper sources of the checkout built with the file, edit and base
    (install.locate); ``opinfos``: cases.chosen_opinfos' set (no early cases then)."""
    from ..checkout import install as inst

    base = Base.of(base)

    result = FileResult(str(path))
    stream.STREAM.begin_round(outline)
    result.helpers = [str(h) for h in helpers]
    start = time.perf_counter()
    try:
        target = inst.locate(path, root, yaml, helpers)
    except CheckoutError as exc:
        result.error = str(exc)
        result.no_operators = isinstance(exc, NoOperators)
        return result
    result.ops, result.checkout, result.yamls = target.names, str(target.checkout), [str(y) for y in target.yamls]
    result.seconds["locate"] = time.perf_counter() - start
    stored = learned.stored_plan(result.ops, dtypes, generated) if check else None
    early_first = check and stored is None and opinfos is None and _early_needed() and _recordable_before_install(target)
    t = time.perf_counter()
    try:
        with progress.phase("building the edit" + (" (recording the early cases meanwhile)" if early_first else "")):
            if early_first:  # the early cases need no kernel to be recorded: while the compiler runs
                library = early.while_building(lambda: inst.build_target(target, cflags),
                                               lambda: early.prepare_early(result.ops, dtypes, generated))
            else:
                library = inst.build_target(target, cflags)
    except (BuildError, CheckoutError) as exc:
        result.error = str(exc)
        return result
    result.seconds["build"] = time.perf_counter() - t
    result.build = {"seconds": result.seconds["build"], "compiled": library.compiled, "build_dir": library.build_dir,
                    "flags": list(inst.WHEEL_CFLAGS)}
    test_files, tests_not_run, kernel_set = upstream_tests.test_files_of(target, gtest)
    python_files, python_not_run = upstream_python.python_test_files_of(target, python_tests)
    t = time.perf_counter()
    installed = inst.install(target, library)  # before the base's build: the early cases need only the edit
    result.installed = installed
    result.replaced = sorted(installed.replaced)
    result.seconds["swap"] = time.perf_counter() - t
    learned.load_answers()  # torch's answers and the timing's samples of earlier processes
    if check and stored is None and opinfos is None:  # the plan is worked out: on a fresh cache, the early cases first
        _early(result, dtypes=dtypes, generated=generated, isolate=isolate, dim_orders=dim_orders)
    t = time.perf_counter()
    try:
        with progress.phase("building the base"):
            found, base_library = _base(target, base if check or timing or test_files or python_files else Base.BUILT_IN,
                                        cflags)
    except CheckoutError as exc:  # git could not give the base
        result.error = f"--base: {exc}"
        installed.restore()  # nothing stays swapped for a file that gives an error
        result.installed = None
        return result
    result.base = {"kind": found.kind, "rev": found.rev, "commit": found.commit, "describe": found.describe(),
                   "headers": found.headers, "unchanged": found.unchanged,
                   "build": None if base_library is None else {"compiled": base_library.compiled, "build_dir": base_library.build_dir}}
    result.seconds["base"] = time.perf_counter() - t
    addresses = {}
    for index, impl in enumerate(target.ops):
        name = impl.entry.op
        if base_library is not None:
            addresses[name] = base_library.function(index)
        elif name in installed.replaced:
            addresses[name] = installed.replaced[name].previous_address
    base_key = base_library.source_hash if base_library is not None else tuple(sorted(addresses.items()))
    # the upstream test runs alongside the judge (its result is taken before the timing);
    # it is compiled with the checkout's headers: their state is part of the base run
    gtest_run = (upstream_tests.GtestRun(test_files, target.checkout, addresses, found.kind, (base_key, inst.headers_digest(target)),
                           kernel_set, tests_not_run, _compiled(target, found, library, base_library))
                 if test_files else None)
    if gtest_run is None:
        result.gtest = upstream_tests.not_run_result(tests_not_run)
    python_run = (upstream_python.PythonTestRun(python_files, upstream_python.routed_kernels(target), target.checkout,
                                                addresses, found.kind, (base_key, inst.headers_digest(target)))
                  if python_files else None)
    result.python_tests = {**upstream_python.no_run(), "not_run": python_not_run}
    directory = _report_dir(target.path, report_dir)
    result.report_dir = str(directory)
    timing_args = {"dtype": timing_dtype, "repeats": repeats, "threads": threads, "max_slowdown": max_slowdown,
                   "isolate": isolate}
    # with isolation and one thread, the timing runs on a core of its own while the judge runs (alongside.py)
    # (the upstream test keeps off its core too)
    others = tuple(run.job.pid for run in (gtest_run, python_run) if run is not None)
    alongside = (_timing_alongside(result, target, addresses, others, **timing_args)
                 if timing and check and isolate and threads == 1 else None)
    try:
        if check:
            t = time.perf_counter()
            _judge_file(result, target, addresses, found.kind, directory, dtypes=dtypes, isolate=isolate, budget=budget,
                        base_key=base_key, dim_orders=dim_orders, numerics=numerics, generated=generated,
                        alongside=alongside, stored=stored, opinfos=opinfos)
            result.seconds["check"] = time.perf_counter() - t - result.seconds.get("plan", 0.0)
        if gtest_run is not None:
            t = time.perf_counter()
            with progress.phase(f"upstream test {target.path.stem}_test.cpp"):
                result.gtest = gtest_run.result()
            stream.STREAM.gtest(result.gtest)
            result.seconds["gtest"] = time.perf_counter() - t  # what the round waited for it after the judge
            result.gtest["wall_seconds"] = round(gtest_run.job.seconds, 3)  # its process, from start to end
        if python_run is not None:
            t = time.perf_counter()
            with progress.phase("upstream Python tests"):
                result.python_tests = python_run.result()
            result.seconds["python_tests"] = time.perf_counter() - t  # what the round waited for them after the judge
            stream.STREAM.python_tests(result.python_tests)
        if timing:
            t = time.perf_counter()
            with progress.phase("timing"):
                rows = _timing_result(alongside, result, target, addresses, timing_args)
            stream.STREAM.timing(rows)
            result.timing += rows
            result.seconds["time"] = time.perf_counter() - t  # what the round waited for it after the judge
    finally:
        if alongside is not None:
            alongside.close()
        if python_run is not None and not python_run.job.done():
            python_run.job.stop()  # the round ended before its result was taken
    from .judge import RECORDER

    result.learned = learned.round_end(RECORDER)  # torch's answers and the samples written; what was read, recomputed
    return result


def _timing_result(alongside, result, target, addresses: dict, timing_args: dict) -> list:
    """The timing's rows: the alongside run's when it started (its process dying is
    one ``crashed`` row), else timed now."""
    from ..errors import BackgroundFailed

    if alongside is None or not alongside.started:
        return _timing_rows(result, target, addresses, **timing_args)
    try:
        return _keep_found(alongside.result())
    except BackgroundFailed as exc:
        return _ended_row(", ".join(result.ops), exc)


def dev(paths, *, root=None, yaml=None, dtypes=None, timing_dtype="float32", threads=1, repeats=11, check=True,
        timing=True, cflags=(), budget=CHECK_BUDGET, base: Base = Base.HEAD, isolate=True, max_slowdown=None, report_dir=None,
        changed=None, gtest=True, dim_orders=True, numerics=True, generated=True, python_tests=True,
        opinfos=None) -> DevResult:
    """Builds the kernel files `paths` (files, or folders of them) of an ExecuTorch
    checkout or an out-of-tree kernel folder against the installed wheel, with the
    flags the wheel's kernels were built with, swaps their operators in for the
    session, and judges the edit as ``etops check`` does (same runner, cases,
    classifier and clustering; every call guarded unless ``isolate=False``) next to
    the base: the same file at ``base`` (a base.Base: Base.HEAD by default, a
    Base.revision(rev), or Base.BUILT_IN) in a git checkout, else the wheel's built-in. Findings the base shares are "also in base". Then times the
    edit against the base at three sizes.

    ``root``/``yaml``: the checkout and kernel YAML(s) (default: found); ``dtypes``:
    conformance dtypes (default: every dtype the OpInfos list); ``timing_dtype``,
    ``threads``, ``repeats``: the timing; ``check``/``timing``: False leaves that
    step out; ``cflags``: more compiler flags; ``budget``: seconds the edit's cases
    may take (float32 first; tasks left out are counted; None: no limit);
    ``max_slowdown``: a slowdown beyond it (and the noise) is a finding;
    ``report_dir``: where reproducers go; ``changed``: a git revision: the kernel
    files changed since it, those including a changed header and those using a
    changed helper source (built with it; changes.changed_kernel_files), added to `paths`;
    ``gtest``: run the checkout's upstream tests of the file (``kernels/test/op_<name>_test.cpp``
    and ``kernels/<set>/test/op_<name>_test.cpp``, etops.gtest, with the supported features
    of the file's folder's set) on the base (as the judge's) and on the edit: a test the
    edit turns from pass to fail is a finding, a test file not run says why; ``python_tests``: for a file that
    registers LLM kernels itself, run the ``test_*.py`` next to it that call its operators' torch ops, routed to
    the registry (etops.dev.upstream_python), on the base and the edit: a test the edit turns from pass to fail
    is a finding; ``dim_orders``: the dim-order axis (the edit's
    cases again channels-last and with the last two dims transposed, under
    ``etops.layout("preserve")``, against the base's in the same layout);
    ``numerics``: the numerics axis (the accumulating operators' cases again on
    inputs transformed to expose numerics, etops.dev.numerics_pass, against the
    base's on the same values); ``generated``: each operator's generated cases
    (etops.conformance.generated: shape, dtype, scalar and value classes combined
    pairwise) judged with the OpInfo samples, on the edit and on the base; ``opinfos``: only
    the cases of these OpInfos (ids as ``etops check --opinfo`` takes them: their samples,
    and the derived cases taking theirs; no reference or generated case), a ValueError
    for a name no OpInfo has."""
    from pathlib import Path

    from ..checkout.layout import kernel_files
    from .cases import chosen_opinfos

    base = Base.of(base)
    opinfos = chosen_opinfos(opinfos)
    start = time.perf_counter()
    given = [] if paths is None else [paths] if isinstance(paths, (str, bytes, Path)) or not hasattr(paths, "__iter__") else list(paths)
    named = {Path(p).resolve() for p in given if Path(p).is_file()}
    files = kernel_files(given) if given else []
    notes: list[str] = []
    helpers: dict = {}
    if changed is not None:  # kernel files only: a changed helper leads to those using it, built with it
        from .changes import changed_kernel_files

        change = changed_kernel_files(given[0] if given else ".", changed, root)
        notes, helpers = change.notes, change.helpers
        files += [f for f in change.files if f not in files]
    results, skipped = [], []
    stems = [f.stem for f in files]
    for f in files:
        # one folder a file: its stem, made unique when two files share it (portable and optimized op_add.cpp)
        unique = f.stem if stems.count(f.stem) == 1 else f"{f.stem}-{f.parent.parent.name}-{f.parent.name}"
        sub = None if report_dir is None else Path(report_dir) / unique
        with progress.phase(f.name if len(files) == 1 else f"{f.name} ({files.index(f) + 1}/{len(files)})"):
            r = run_file(f, root=root, yaml=yaml, dtypes=dtypes, timing_dtype=timing_dtype, threads=threads,
                         repeats=repeats, check=check, timing=timing, cflags=cflags, budget=budget, base=base,
                         isolate=isolate, max_slowdown=max_slowdown, report_dir=sub, gtest=gtest, dim_orders=dim_orders,
                         numerics=numerics, generated=generated, helpers=helpers.get(f, ()), python_tests=python_tests,
                         opinfos=opinfos)
        if r.no_operators and f not in named:
            skipped.append(str(f))  # a helper source of a folder, not a kernel file
        else:
            results.append(r)
    return DevResult(results, time.perf_counter() - start, skipped, notes, changed)
