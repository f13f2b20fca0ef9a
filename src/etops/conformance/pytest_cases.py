"""etops.testing's checks (the public names are that module's, documented there):
one OpInfo or one reference's samples at one dtype as a case (``OpInfoCase``,
``ReferenceCase``), what fails a check (``assert_result``), and the cases of a
kernel (``opinfo_cases``, ``reference_cases``, ``parametrize``). Here so that
``pytest --pyargs etops.conformance`` (test_opinfo.py) uses them from inside this
package. Imports the core and this package only."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from .references.spec import Sample, invalid
from ..errors import UnsupportedCheck

#: the case statuses that fail a check (the kernel's fault, or etops' own)
FAILING = ("crash", "abort", "mismatch", "error")


#: raised by check() outside pytest when the kernel refused every case
Unsupported = UnsupportedCheck


def _hooks(hooks, guard: bool):
    """The hooks a case runs with: `hooks`, every call guarded when `guard`."""
    if not guard:
        return hooks
    from .hooks import with_guard

    return with_guard(hooks)

__all__ = ["FAILING", "OpInfoCase", "ReferenceCase", "Sample", "Unsupported", "invalid", "opinfo_cases", "parametrize", "reference_cases"]


@dataclass
class OpInfoCase:
    """The samples of one OpInfo at one dtype, checked against one kernel."""

    kernel: str
    opinfo: str
    dtype: torch.dtype
    aten: tuple = ()  #: ATen overloads the kernel stands in for (empty: found from schemas)
    hooks: object = None
    report_dir: str | None = None
    guard: bool = False  #: every kernel call made by etops.guard.call
    _kmap: Any = field(default=None, repr=False, compare=False)

    @property
    def id(self) -> str:
        return f"{self.kernel}-{self.opinfo}-{str(self.dtype).replace('torch.', '')}"

    def __str__(self) -> str:
        return self.id

    def run(self, guard: bool | None = None) -> Any:
        """The TaskResult of the samples (`guard`: None takes the case's own)."""
        from .mapping import KernelMap
        from .runner import TaskRunner, default_kmap

        if self._kmap is None:
            self._kmap = KernelMap([self.kernel], overrides={a: self.kernel for a in self.aten}) if self.aten else default_kmap()
        hooks = _hooks(self.hooks, self.guard if guard is None else guard)
        runner = TaskRunner(self._kmap, [self.kernel], hooks=hooks, report_dir=self.report_dir)
        return runner.run(self.opinfo, self.dtype)

    def check(self, guard: bool | None = None) -> Any:
        """Runs the case (`guard=True`: every call guarded); AssertionError listing
        the crashes, aborts, mismatches and errors with their inputs; the refusal
        of every case reported (see the module doc). Returns the TaskResult."""
        return assert_result(self.id, self.run(guard))


class KernelLoggedError(UserWarning):
    """A case passed but its kernel logged a message at Error level (CaseResult.logged)."""


def assert_result(case_id: str, result):
    """`result` (a TaskResult) when no case crashed, aborted, mismatched or was an
    etops error; else AssertionError counting them and listing the recorded ones
    with their inputs. When no case passed: the kernel's refusal of every case
    reported as such (a pytest skip starting "unsupported" under pytest,
    Unsupported elsewhere), or a skip when no sample reached the kernel. Passing
    cases whose kernel logged an error warn (KernelLoggedError)."""
    counts: dict[str, int] = {}
    for tally in result.tallies.values():
        for status, n in tally.counts.items():
            counts[status] = counts.get(status, 0) + n
    failed = {s: counts.get(s, 0) for s in FAILING if counts.get(s, 0)}
    if failed:
        bad = [d for d in result.details if d.status in FAILING]
        what = ", ".join(f"{n} {s}" for s, n in failed.items())
        lines = [f"{case_id}: {what} of {sum(counts.values())} cases"]
        for d in bad:
            errs = f" (max abs {d.max_abs_error:.3g}, rel {d.max_rel_error:.3g})" if d.max_abs_error is not None and d.max_rel_error is not None else ""
            lines.append(f"  {d.status} {d.aten_op} sample {d.sample} call {d.call}{errs}: {d.message}")
            lines.append(f"    inputs: {d.inputs}")
            if d.reproducer:
                lines.append(f"    reproducer: {d.reproducer}")
        raise AssertionError("\n".join(lines))
    if result.sample_error:
        raise AssertionError(f"{case_id}: the samples could not run: {result.sample_error}")
    logged = list(getattr(result, "logged", {}).values())
    if logged:  # passes, but not silent ones: a warning pytest lists
        import warnings

        warnings.warn(f"{case_id}: {len(logged)} passing case(s) whose kernel logged an error, e.g. sample {logged[0].sample}: "
                      f"{logged[0].logged}", KernelLoggedError, stacklevel=3)
    if not counts:
        _skip(f"{case_id}: no sample reached the kernel")
    elif not counts.get("pass"):
        refused = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        first = next((d for d in result.details if d.status in ("unsupported", "guarded")), None)
        why = f"unsupported: the kernel refused every case ({refused})" + (f": {first.message}" if first is not None else "")
        if not _under_pytest():
            raise Unsupported(f"{case_id}: {why}")
        _skip(f"{case_id}: {why}")
    return result


@dataclass
class ReferenceCase:
    """The samples of one Reference at one dtype, checked against its kernel."""

    reference: Any  #: an etops.conformance.references.Reference
    dtype: torch.dtype
    hooks: object = None
    guard: bool = False  #: every kernel call made by etops.guard.call

    @property
    def id(self) -> str:
        return f"{self.reference.kernel}-reference-{str(self.dtype).replace('torch.', '')}"

    def __str__(self) -> str:
        return self.id

    def run(self, guard: bool | None = None):
        """The TaskResult of the samples (`guard`: None takes the case's own)."""
        from . import references
        from .runner import TaskRunner, default_kmap

        references.add(self.reference)
        hooks = _hooks(self.hooks, self.guard if guard is None else guard)
        return TaskRunner(default_kmap(), [self.reference.kernel], hooks=hooks).run(self.reference.task_id, self.dtype)

    def check(self, guard: bool | None = None):
        """As OpInfoCase.check (an invalid sample the kernel accepts is a mismatch).
        Returns the TaskResult."""
        return assert_result(self.id, self.run(guard))


def _as_sample(item) -> Sample:
    if isinstance(item, Sample):
        return item
    if isinstance(item, dict):
        return Sample((), dict(item))
    if isinstance(item, (tuple, list)):
        return Sample(tuple(item))
    raise TypeError(f"reference_cases: argument 'samples' must yield Samples, argument tuples or keyword dicts, got {type(item).__name__}")


def reference_cases(kernel, reference, samples, *, dtypes=("float32",), schema=None, library=None, compare=None, tolerance=None,
                    hooks=None, guard: bool = False) -> list[ReferenceCase]:
    """Cases checking `kernel` (a registered kernel's name or object, any
    namespace: a custom kernel, a loaded library's) against `reference`, a
    callable taking the kernel's arguments without its outs and returning what
    the kernel must return (raising on an invalid input).

    samples(dtype) yields the calls: Samples (``etops.testing.invalid(why, ...)``
    for inputs both must refuse), argument tuples or keyword dicts; dtypes: torch
    dtypes or names, one case each; schema: the kernel's schema when no package
    defines one; library: a module to import first; compare: "metadata" for
    uninitialized results; tolerance: (rtol, atol); guard: every call made by
    etops.guard.call (a fault fails the case as a crash, naming the argument)."""
    from .references import Reference
    from .opinfos import dtype_from_name

    name = kernel.name if hasattr(kernel, "_info") else kernel
    if not isinstance(name, str):
        raise TypeError(f"reference_cases: argument 'kernel' must be a kernel name or kernel object, got {type(kernel).__name__}")
    if not callable(samples):
        raise TypeError("reference_cases: argument 'samples' must be a callable (dtype -> samples)")
    names = [dtypes] if isinstance(dtypes, (str, torch.dtype)) else list(dtypes)
    wanted = [d if isinstance(d, torch.dtype) else dtype_from_name(d) for d in names]
    ref = Reference(name, reference, lambda dtype: (_as_sample(s) for s in samples(dtype)),
                    tuple(str(d).replace("torch.", "") for d in wanted), schema=schema, library=library, compare=compare,
                    tolerance=tolerance)
    return [ReferenceCase(ref, d, hooks, guard) for d in wanted]


def _under_pytest() -> bool:
    import os

    return "PYTEST_CURRENT_TEST" in os.environ


def _skip(reason: str) -> None:
    try:
        import pytest
    except ImportError:  # pragma: no cover
        return
    pytest.skip(reason)


def _names(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    return list(value)


def opinfo_cases(kernel: Any = None, op: str | Iterable[str] | None = None, *, aten: str | Iterable[str] | None = None,
                 dtypes: Any = None, hooks: Any = None, report_dir: str | None = None, guard: bool = False) -> list[OpInfoCase]:
    """The OpInfo cases for `kernel` (a registered kernel name or kernel object;
    None: every registered aten kernel).

    op: OpInfo ids whose samples to run (default: the OpInfos whose samples reach
    the kernel, found by running them all once, cached); aten: the ATen overload(s)
    a kernel of another namespace stands in for (its calls go to the kernel);
    dtypes: torch dtypes or names (default: every dtype the OpInfo lists for CPU);
    guard: every kernel call made by etops.guard.call (a kernel that faults fails
    its case as a crash naming the argument instead of killing the process)."""
    from .opinfos import dtype_from_name, opinfo_dtypes, opinfos
    from .sweep import discover, resolve_kernels

    ops = opinfos()
    aten = tuple(_names(aten) or ())
    wanted_dtypes = None
    if dtypes is not None:
        wanted_dtypes = [d if isinstance(d, torch.dtype) else dtype_from_name(d) for d in _names(dtypes) or ()]
    names = _names(kernel.name if hasattr(kernel, "_info") else kernel)
    opinfo_names = _names(op)
    for o in opinfo_names or ():
        if o not in ops:
            raise ValueError(f"no OpInfo named {o!r}")
    if names and any(not n.startswith("aten::") for n in names) and not (aten and opinfo_names):
        raise ValueError("a kernel outside the aten namespace needs op= (OpInfo names) and aten= (the ATen overload it stands in for)")
    if aten:
        kernels = names
    else:
        from .runner import default_kmap

        kmap = default_kmap()
        kernels = resolve_kernels(names, kmap)
        discovered = None if opinfo_names else discover(kmap)
    cases = []
    for k in kernels or ():
        if opinfo_names is not None:
            chosen = opinfo_names
        else:
            chosen = sorted(oid for oid, info in (discovered or {}).items() if k in info["kernels"] and oid in ops)
        for oid in chosen:
            for dtype in opinfo_dtypes(ops[oid]):
                if wanted_dtypes is not None and dtype not in wanted_dtypes:
                    continue
                cases.append(OpInfoCase(k, oid, dtype, aten, hooks, report_dir, guard))
    return cases


def parametrize(kernel: Any = None, op: str | Iterable[str] | None = None, *, aten: str | Iterable[str] | None = None,
                dtypes: Any = None, argname: str = "case", guard: bool = False) -> Any:
    """``pytest.mark.parametrize`` over ``opinfo_cases(...)``, ids like
    ``aten::add.out-add-float32`` (`guard=True`: every call guarded)."""
    import pytest

    cases = opinfo_cases(kernel, op, aten=aten, dtypes=dtypes, guard=guard)
    return pytest.mark.parametrize(argname, cases, ids=[c.id for c in cases])
