"""The kernel-development loop on an ExecuTorch checkout: edit a kernel file, and in
seconds it is built, swapped in, checked against ATen and the built-in kernel it
replaced, and timed against both.

    result = etops.dev("executorch/kernels/portable/cpu/op_add.cpp")
    print(result)            # build, conformance vs ATen and vs the built-in, A/B timing, verdict
    result.exit_code         # 0 agrees, 1 a finding stands, 2 a file did not build
    result.restore()         # the built-in kernels back (else they stay swapped for the session)

    etops.dev.watch("op_add.cpp", on_round=print)   # again on every save

For each file: the checkout (``checkout``: source root, YAML, operators the file
implements, headers it includes), the build and swap (``install``: one kernel set
in etops.custom's cache, overrides / registrations), conformance against ATen and
the replaced kernel (``check``), A/B timing (``etops.bench.ab``), the report
(``report``) and the watch loop (``watch``). ``load`` gives the other commands
``--load``. May import the core, etops.custom, etops.conformance and etops.bench.
``etops.dev`` is this module, callable as ``etops.dev(paths)``.
"""

from __future__ import annotations

import sys
import time
import types

from ..errors import BuildError
from ..kernel import as_program
from .checkout import CheckoutError, NoOperators
from .report import DevResult, FileResult
from .watch import watch


#: Seconds the conformance of one file may take by default (float32 runs first).
CHECK_BUDGET = 20.0


def _test_file(target):
    """The checkout's upstream gtest of the kernel file (``kernels/test/op_<name>_test.cpp``), or None."""
    found = target.checkout / "kernels" / "test" / f"{target.path.stem}_test.cpp"
    return found if found.is_file() else None


def run_file(path, *, root=None, yaml=None, dtypes=None, size="64k", timing_dtype="float32", threads=1, repeats=11,
             check=True, timing=True, cflags=(), budget=CHECK_BUDGET, gtest=True) -> FileResult:
    """One kernel file through the loop (see ``dev``); a file that cannot be located
    or built gives a FileResult with ``error`` set, nothing swapped."""
    from . import install as inst

    result = FileResult(str(path))
    start = time.perf_counter()
    try:
        target = inst.locate(path, root, yaml)
    except CheckoutError as exc:
        result.error = str(exc)
        result.no_operators = isinstance(exc, NoOperators)
        return result
    result.ops, result.checkout, result.yamls = target.names, str(target.checkout), [str(y) for y in target.yamls]
    result.seconds["locate"] = time.perf_counter() - start
    t = time.perf_counter()
    try:
        library = inst.build_target(target, cflags)
    except (BuildError, CheckoutError) as exc:
        result.error = str(exc)
        return result
    result.seconds["build"] = time.perf_counter() - t
    result.build = {"seconds": result.seconds["build"], "compiled": library.compiled, "build_dir": library.build_dir}
    test_file = _test_file(target) if gtest else None
    base = None
    if test_file is not None:
        from ..gtest import gtest as run_gtest  # etops.gtest reads checkouts with this package's checkout module

        t = time.perf_counter()
        base = run_gtest(test_file, root=target.checkout)  # the kernels the edit replaces
        result.seconds["gtest"] = time.perf_counter() - t
    t = time.perf_counter()
    installed = inst.install(target, library)
    result.installed = installed
    result.replaced = sorted(installed.replaced)
    result.seconds["swap"] = time.perf_counter() - t
    # both sides judged as a program calls them (etops.as_program): the timing input's
    # agreement is part of the verdict, so no workaround of the rules table may decide it
    previous = {name: as_program(o.previous.kernel) for name, o in installed.replaced.items()}
    if base is not None:
        from ..gtest.report import against_base

        t = time.perf_counter()
        result.gtest = against_base(base, run_gtest(test_file, root=target.checkout))
        result.seconds["gtest"] += time.perf_counter() - t
    if check:
        from .check import check as run_check

        t = time.perf_counter()
        result.conformance = run_check(result.ops, previous, dtypes, budget)
        result.seconds["check"] = time.perf_counter() - t
    if timing:
        from ..bench.ab import ab_sample, time_ab
        from ..registry import registry

        t = time.perf_counter()
        for name in result.ops:
            kernel = as_program(registry().get_kernel(name))
            sample = ab_sample(kernel, size, timing_dtype)
            if sample is None:
                result.timing.append({"kernel": name, "error": f"no OpInfo sample of about {size} elements works on both sides"})
                continue
            result.timing.append(time_ab(kernel, previous.get(name), sample, repeats=repeats, threads=threads))
        result.seconds["time"] = time.perf_counter() - t
    return result


def dev(paths, *, root=None, yaml=None, dtypes=None, size="64k", timing_dtype="float32", threads=1, repeats=11,
        check=True, timing=True, cflags=(), budget=CHECK_BUDGET, gtest=True) -> DevResult:
    """Builds the kernel files `paths` (files, or folders of them) of an ExecuTorch
    checkout or an out-of-tree kernel folder against the installed wheel, swaps
    their operators in for the session (override; register when an operator has no
    kernel), checks each against ATen and against the kernel it replaced, and times
    new / built-in / ATen on one input (A/B, interleaved rounds).

    ``root``: the checkout (default: found from the file's includes); ``yaml``: the
    kernel YAML(s) (default: the nearest above the file); ``dtypes``: conformance
    dtypes (default: every dtype the OpInfos list); ``size``/``timing_dtype``: the
    timing input; ``threads``: for timing (default 1); ``check``/``timing``: False
    leaves that step out; ``cflags``: more compiler flags; ``budget``: seconds the
    conformance of one file may take (float32 first; the cases left out are
    counted; None: no limit); ``gtest``: run the checkout's upstream test of the file
    (``kernels/test/op_<name>_test.cpp``, etops.gtest) on the kernels it replaces
    and on the edit: a test the edit turns from pass to fail is a finding."""
    from .checkout import kernel_files

    from pathlib import Path

    start = time.perf_counter()
    given = [paths] if isinstance(paths, (str, bytes, Path)) or not hasattr(paths, "__iter__") else list(paths)
    named = {Path(p).resolve() for p in given if Path(p).is_file()}
    results, skipped = [], []
    for f in kernel_files(given):
        r = run_file(f, root=root, yaml=yaml, dtypes=dtypes, size=size, timing_dtype=timing_dtype, threads=threads,
                     repeats=repeats, check=check, timing=timing, cflags=cflags, budget=budget, gtest=gtest)
        if r.no_operators and f not in named:
            skipped.append(str(f))  # a helper source of a folder, not a kernel file
        else:
            results.append(r)
    return DevResult(results, time.perf_counter() - start, skipped)


class _CallableModule(types.ModuleType):
    def __call__(self, paths, **options) -> DevResult:
        return dev(paths, **options)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["CheckoutError", "DevResult", "FileResult", "dev", "run_file", "watch"]
