"""Running OpInfo samples under a torch dispatch mode and checking every ATen call
that has an ExecuTorch kernel against that kernel.

One *task* is one OpInfo at one dtype: its samples run one after the other, under
``_CheckMode``; each ATen call the mode sees whose kernel is selected is one *case*:
the inputs are cloned (storage, offset and strides kept), ATen runs on the originals
(the sample goes on with ATen's result), the ExecuTorch kernel on the clones, and the
two results are compared with OpInfo's tolerance for the dtype.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import traceback
import warnings
from contextlib import nullcontext
import zlib
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..compare import TORCH as _TORCH_TOLERANCE
from ..ops import rules_for
from .hooks import load_hooks
from .mapping import KernelMap, overload_name
from .references.spec import TASK_PREFIX as REFERENCE_TASK_PREFIX
from .effective import judge, merged, note
from .values import WRONG, clip, compare, describe, dtype_name, errors, exact_clone, precision_verdict, reported_errors, values_compared  # noqa: F401 - runner's API too

#: guarded: etops' own pre-call guard refused the call (the kernel is known to
#: corrupt memory on such inputs: only the rules table's ``memory`` rules guard the
#: kernel as a program calls it); CaseResult.rule names the guard. abort: ExecuTorch
#: aborted inside the kernel (an ET_CHECK; etops unwound it), as it would abort a
#: program; crash: the kernel killed its worker or guard process
STATUSES = ("pass", "mismatch", "unsupported", "guarded", "error", "crash", "abort")

#: Detailed records (and reproducers) kept per (kernel, OpInfo, dtype, status);
#: the counts are always complete.
DEFAULT_MAX_DETAILS = 3

# ---- OpInfo ----------------------------------------------------------------------

_OPS: dict[str, object] | None = None


def opinfo_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def opinfos() -> dict[str, object]:
    """OpInfo id ('add', 'nn.functional.conv2d', 'max.reduction_with_dim') -> OpInfo."""
    global _OPS
    if _OPS is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torch.testing._internal.common_methods_invocations import op_db
        _OPS = {opinfo_id(op): op for op in op_db}
    return _OPS


def dtype_from_name(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dtype


def opinfo_dtypes(op) -> list[torch.dtype]:
    """The dtypes OpInfo lists for CPU, in a stable order."""
    return sorted(op.supported_dtypes("cpu"), key=str)


def tolerance(op, dtype: torch.dtype) -> tuple[float | None, float | None]:
    """(atol, rtol) for `dtype`: the largest override OpInfo's decorators give
    (toleranceOverride / precisionOverride, any test), else (None, None): the
    defaults of torch.testing.assert_close."""
    atol = rtol = None
    for info in getattr(op, "decorators", ()) or ():
        for dec in getattr(info, "decorators", (info,)):
            table = getattr(dec, "d", None)
            if not isinstance(table, dict) or dtype not in table:
                continue
            value = table[dtype]
            if hasattr(value, "atol"):
                atol = max(atol or 0.0, value.atol)
                rtol = max(rtol or 0.0, value.rtol)
            elif isinstance(value, (int, float)):
                atol = max(atol or 0.0, float(value))
    if atol is None and rtol is None:
        return None, None
    default_rtol, default_atol = _TORCH_TOLERANCE.pair(dtype)
    return max(atol or 0.0, default_atol), max(rtol or 0.0, default_rtol)


# ---- records ---------------------------------------------------------------------


@dataclass
class CaseInfo:
    """Where a case comes from (what hooks receive)."""

    kernel: str
    aten_op: str
    opinfo: str
    dtype: str
    sample: int
    call: int

    @property
    def id(self) -> str:
        return f"{self.kernel}|{self.opinfo}|{self.dtype}|s{self.sample}c{self.call}"


@dataclass
class CaseResult(CaseInfo):
    """A case's outcome: where it comes from (CaseInfo), then what happened."""

    status: str = ""
    message: str = ""
    inputs: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    atol: float | None = None
    rtol: float | None = None
    reproducer: str | None = None
    rule: str | None = None  #: guarded: the guard that refused (etops.conformance.guarded); abort: what etops' direct calls do about it
    #: mismatch: "within ATen's error", "precision loss" or "wrong" (values.precision_verdict)
    verdict: str | None = None
    #: mismatch: ExecuTorch's and ATen's max abs error against the higher-precision reference
    reference_error: float | None = None
    aten_reference_error: float | None = None
    #: floating results: the worst error in ulps of the dtype at the output's scale, ExecuTorch's and ATen's,
    #: the reference they were measured against, and why a wrong result is wrong (etops.conformance.effective)
    ulps: float | None = None
    aten_ulps: float | None = None
    reference: str | None = None
    reason: str | None = None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class Tally:
    """Counts for one (kernel, dtype)."""

    counts: dict = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    opinfos: set = field(default_factory=set)
    ulps: dict | None = None  #: effective precision (etops.conformance.effective.note)

    def add(self, status: str, opinfo: str, abs_err=None, rel_err=None, n: int = 1) -> None:
        self.counts[status] = self.counts.get(status, 0) + n
        self.opinfos.add(opinfo)
        if abs_err is not None and math.isfinite(abs_err):
            self.max_abs_error = max(self.max_abs_error or 0.0, abs_err)
        if rel_err is not None and math.isfinite(rel_err):
            self.max_rel_error = max(self.max_rel_error or 0.0, rel_err)

    def merge(self, other: "Tally") -> None:
        for k, v in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + v
        self.opinfos |= other.opinfos
        self.ulps = merged(self.ulps, other.ulps)
        for attr in ("max_abs_error", "max_rel_error"):
            theirs = getattr(other, attr)
            if theirs is not None:
                setattr(self, attr, max(getattr(self, attr) or 0.0, theirs))

    def to_json(self) -> dict:
        return {"counts": self.counts, "max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error, "opinfos": sorted(self.opinfos),
                **({"ulps": self.ulps} if self.ulps else {})}

    @classmethod
    def from_json(cls, d: dict) -> "Tally":
        return cls(dict(d["counts"]), d.get("max_abs_error"), d.get("max_rel_error"), set(d.get("opinfos", ())), d.get("ulps"))


@dataclass
class TaskResult:
    """What one (OpInfo, dtype) task found."""

    opinfo: str
    dtype: str
    tallies: dict = field(default_factory=dict)  # (kernel, dtype) -> Tally
    details: list = field(default_factory=list)  # CaseResult for non-pass cases (capped)
    samples: int = 0
    samples_failed: int = 0
    sample_error: str = ""
    seconds: float = 0.0

    def record(self, result: CaseResult, keep: bool) -> None:
        tally = self.tallies.setdefault((result.kernel, result.dtype), Tally())
        tally.add(result.status, result.opinfo, result.max_abs_error, result.max_rel_error)
        tally.ulps = note(tally.ulps, result)
        if keep:
            self.details.append(result)

    def to_json(self) -> dict:
        return {
            "opinfo": self.opinfo,
            "dtype": self.dtype,
            "tallies": [[k, d, t.to_json()] for (k, d), t in self.tallies.items()],
            "details": [r.to_json() for r in self.details],
            "samples": self.samples,
            "samples_failed": self.samples_failed,
            "sample_error": self.sample_error,
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, d: dict) -> "TaskResult":
        r = cls(d["opinfo"], d["dtype"])
        r.tallies = {(k, dt): Tally.from_json(t) for k, dt, t in d["tallies"]}
        r.details = [CaseResult(**c) for c in d["details"]]
        r.samples, r.samples_failed = d["samples"], d["samples_failed"]
        r.sample_error, r.seconds = d.get("sample_error", ""), d.get("seconds", 0.0)
        return r


def bind(func, args, kwargs) -> dict:
    schema = func._schema
    bound = {}
    positional = [a for a in schema.arguments if not a.kwarg_only]
    for arg, value in zip(positional, args):
        bound[arg.name] = value
    bound.update(kwargs)
    return bound


@dataclass
class KernelCall:
    """How to call a kernel for one ATen call: positional and keyword arguments
    (by the kernel's schema) and whether outs must be given (factory ops whose
    TensorOptions the out variant does not take)."""

    args: list
    kwargs: dict
    outs_from_aten: bool


def plan_call(kernel, func, args, kwargs) -> KernelCall:
    info = kernel._info
    schema = info._schema
    bound = bind(func, args, kwargs)
    k_args, k_kwargs = [], {}  # type: ignore[var-annotated]
    names = set()
    for arg in schema.arguments:
        if arg.is_out:
            continue
        names.add(arg.name)
        if arg.name not in bound:
            continue
        if arg.kwarg_only or len(k_args) != _positional_index(schema, arg.name):
            k_kwargs[arg.name] = bound[arg.name]
        else:
            k_args.append(bound[arg.name])
    dropped = [n for n in bound if n not in names]
    outs_from_aten = bool(info.out_names()) and (bool(dropped) or _no_shape_inference(info))
    return KernelCall(k_args, k_kwargs, outs_from_aten)


def _positional_index(schema, name: str) -> int:
    i = 0
    for arg in schema.arguments:
        if arg.kwarg_only:
            break
        if arg.name == name:
            return i
        i += 1
    return -1


def _no_shape_inference(info) -> bool:
    from ..out_shapes import is_data_dependent

    return not is_data_dependent(info.name) and info.functional_overload() is None


def _empty_like(value):
    if isinstance(value, torch.Tensor):
        dense = value.is_contiguous() or value.is_contiguous(memory_format=torch.channels_last)
        return torch.empty_like(value) if dense else torch.empty(value.shape, dtype=value.dtype)
    if isinstance(value, (list, tuple)):
        return [_empty_like(v) for v in value]
    return value


def call_kernel(kernel, plan: KernelCall, expected, invoke=None):
    """The kernel's result for one case (`invoke(kernel, args, kwargs)` makes the
    call when given: the hooks' invoke, e.g. a guarded call)."""
    kwargs = dict(plan.kwargs)
    if plan.outs_from_aten:
        names = kernel._info.out_names()
        results = [expected] if len(names) == 1 else list(expected)
        for name, value in zip(names, results):
            kwargs[name] = _empty_like(value)
    if invoke is not None:
        return invoke(kernel, plan.args, kwargs)
    return kernel(*plan.args, **kwargs)


# ---- the dispatch mode --------------------------------------------------------------


class _Abort(BaseException):
    """Stops a capture once the wanted call is found."""


class _CheckMode(TorchDispatchMode):
    def __init__(self, runner: "TaskRunner") -> None:
        super().__init__()
        self.runner = runner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        runner = self.runner
        target = runner.kmap.target(func)
        if target is None or (runner.selected is not None and target not in runner.selected):
            return func(*args, **kwargs)
        return runner.handle(func, target, args, kwargs)


class TaskRunner:
    """Runs the samples of one OpInfo at one dtype and checks the kernels reached.

    mode: "check" (call kernels and compare), "discover" (record which kernels the
    calls map to, call nothing), "capture" (return the inputs of one case)."""

    def __init__(self, kmap: KernelMap, selected=None, *, hooks=None, report_dir=None, max_details=DEFAULT_MAX_DETAILS,
                 skip=(), on_start=None, mode: str = "check", capture_at=None, kernels=None):
        self.kmap = kmap
        self.selected = set(selected) if selected is not None else None
        self.hooks = load_hooks(hooks)
        self.report_dir = report_dir
        self.max_details = max_details
        self.skip = {tuple(s) for s in skip}
        self.on_start = on_start
        self.mode = mode
        self.capture_at = capture_at
        self.captured = None
        self.reached: set[str] = set()
        self._kernels = kernels or {}

    def kernel(self, name: str):
        """The kernel of `name` as an exported program calls it (etops.as_program):
        the verdict is the kernel's, not etops' workarounds'."""
        k = self._kernels.get(name)
        if k is None:
            import etops

            k = self._kernels[name] = etops.as_program(etops.registry().get_kernel(name))
        return k

    # -- one task --

    def run(self, opinfo: str, dtype: torch.dtype) -> TaskResult:
        if opinfo.startswith(REFERENCE_TASK_PREFIX):  # a kernel against its reference (etops.conformance.references)
            from .references.run import run_reference_task
            return run_reference_task(self, opinfo, dtype)
        op = opinfos()[opinfo]
        self.begin(opinfo, dtype, *tolerance(op, dtype), op=op)
        start = time.perf_counter()
        torch.manual_seed(zlib.crc32(f"{opinfo}|{self.dname}".encode()))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                # OpInfo's own sample_inputs() wraps this generator in a tracker that
                # crawls the stack and reseeds for every sample (most of the time of a
                # sweep); the task is seeded once instead.
                samples = op.sample_inputs_func(op, "cpu", dtype, False)  # type: ignore[attr-defined]
                for index, sample in enumerate(samples):
                    self.sample_index, self.call_index = index, 0
                    self.result.samples += 1
                    try:
                        with _CheckMode(self):
                            op(sample.input, *sample.args, **sample.kwargs)  # type: ignore[operator]
                    except _Abort:
                        raise
                    except Exception:  # noqa: BLE001 - ATen refused the sample itself
                        self.result.samples_failed += 1
            except _Abort:
                pass
            except Exception as exc:  # noqa: BLE001 - the sample generator failed
                self.result.sample_error = f"{type(exc).__name__}: {exc}"[:300]
        self.result.seconds = time.perf_counter() - start
        return self.result

    def begin(self, task_id: str, dtype: torch.dtype, atol, rtol, op=None) -> None:
        """Starts a task: its id, dtype, tolerance and an empty TaskResult."""
        self.op, self.opinfo, self.dtype = op, task_id, dtype
        self.dname = dtype_name(dtype)
        self.atol, self.rtol = atol, rtol
        self.result = TaskResult(task_id, self.dname)
        self._kept: dict = {}

    def use_kernel(self, name: str, kernel) -> None:
        from ..kernel import as_program

        self._kernels[name] = as_program(kernel)  # a kernel object made with a given schema

    def keep(self, result: CaseResult) -> bool:
        """Whether `result` is recorded in detail (non-pass, under max_details)."""
        key = (result.kernel, result.dtype, result.status)
        kept = self._kept.get(key, 0)
        if result.status == "pass" or kept >= self.max_details:
            return False
        self._kept[key] = kept + 1
        return True

    # -- one case --

    def handle(self, func, target: str, args, kwargs):
        sample, call = self.sample_index, self.call_index
        self.call_index += 1
        self.reached.add(target)
        if self.mode == "discover":
            return func(*args, **kwargs)
        if self.mode == "capture":
            if (sample, call) == self.capture_at:
                self.captured = (func, target, exact_clone(args), exact_clone(kwargs))  # type: ignore[assignment]
                raise _Abort()
            return func(*args, **kwargs)
        inputs_args, inputs_kwargs = exact_clone(args), exact_clone(kwargs)
        expected = func(*args, **kwargs)
        if (sample, call) in self.skip:
            return expected  # crashed a worker before: the parent recorded it
        case = CaseInfo(target, overload_name(func), self.opinfo, self.dname, sample, call)
        if not getattr(self.hooks, "applies", lambda *_: True)(case, inputs_args, inputs_kwargs):
            return expected  # the hooks leave this case out (e.g. no input to lay out anew)
        case_expected = expected
        if hasattr(self.hooks, "transform"):  # the numerics axis: ATen and the kernel on the same new values
            moved = self.hooks.transform(case, func, inputs_args, inputs_kwargs)
            if moved is None:
                return expected  # nothing to transform, or ATen refuses the new values
            inputs_args, inputs_kwargs, case_expected = moved
        result = self.check(case, func, target, inputs_args, inputs_kwargs, case_expected)
        keep = self.keep(result)
        if keep:
            if result.status == "mismatch" and self.report_dir is not None:
                try:
                    from .reproducer import write_reproducer

                    result.reproducer = write_reproducer(self.report_dir, result, func, self._saved_args, self._saved_kwargs,
                                                         self._saved_reference, values_compared(func))
                except Exception as exc:  # noqa: BLE001
                    result.message += f" (no reproducer: {type(exc).__name__}: {exc})"
        self.result.record(result, keep)
        return expected

    def check(self, case: CaseInfo, func, target, args, kwargs, expected) -> CaseResult:
        from ..errors import KernelAborted, KernelCrashed, KernelError, NoMatchingKernelError, UnrepresentableError

        result = CaseResult(case.kernel, case.aten_op, case.opinfo, case.dtype, case.sample, case.call, "pass",
                            inputs=describe_call(args, kwargs), atol=self.atol, rtol=self.rtol)
        reference = expected
        if self.hooks is not None and hasattr(self.hooks, "reference"):
            reference = self.hooks.reference(case, expected)
        self._saved_reference = reference if reference is not expected else None
        # inputs as they were before the kernel ran (kernels may write mutable args)
        self._saved_args, self._saved_kwargs = exact_clone(args), exact_clone(kwargs)
        try:
            kernel = self.kernel(target)
            if self.hooks is not None and hasattr(self.hooks, "inputs"):
                args, kwargs = self.hooks.inputs(case, args, kwargs)
            plan = plan_call(kernel, func, args, kwargs)
            if self.on_start is not None:
                self.on_start(case)
            if self.hooks is not None and hasattr(self.hooks, "before_call"):
                self.hooks.before_call(case)
            calling = self.hooks.calling(case) if self.hooks is not None and hasattr(self.hooks, "calling") else nullcontext()
            invoke = getattr(self.hooks, "invoke", None) if self.hooks is not None else None
            with calling:
                actual = call_kernel(kernel, plan, expected, invoke)
        except KernelCrashed as exc:  # a guarded call's child died (--guard)
            result.status = "crash"
            result.message = clip(str(exc), 500)
            return result
        except KernelAborted as exc:  # an ET_CHECK: a program would abort here
            result.status = "abort"
            result.message = clip(str(exc), 500)
            result.rule = _workaround(kernel, plan)
            return result
        except (KernelError, NoMatchingKernelError, UnrepresentableError) as exc:  # ExecuTorch's refusals
            result.status = "unsupported"
            result.message = clip(f"{type(exc).__name__}: {exc}", 500)
            return result
        except Exception as exc:  # noqa: BLE001 - a pre-call guard refused, or etops could not make the call
            from .guarded import refusing_rule

            result.rule = refusing_rule(target, exc)
            result.status = "error" if result.rule is None else "guarded"
            tb = traceback.extract_tb(exc.__traceback__)
            where = f" [{tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}]" if tb else ""
            result.message = clip(f"{type(exc).__name__}: {exc}", 500) + where
            return result
        atol, rtol = self.atol, self.rtol
        override = rules_for(target).tolerance  # the rules table's (rtol, atol) for this kernel, if any
        if override is not None:
            rtol, atol = max(rtol or 0.0, override[0]), max(atol or 0.0, override[1])
        why = compare(actual, reference, atol, rtol, values_compared(func))
        if reference is expected and values_compared(func):  # against a more precise reference (etops.conformance.effective)
            why = judge(result, func, self._saved_args, self._saved_kwargs, actual, expected, why)
        if why is not None:
            result.status = "mismatch"
            result.message = clip(why, 500)
            result.max_abs_error, result.max_rel_error = reported_errors(why, actual, reference)
            result.verdict = result.verdict or WRONG
        return result


def _workaround(kernel, plan: KernelCall) -> str | None:
    """What etops' direct calls do about a case the kernel fails as a program calls
    it (KernelInfo.workaround), or None."""
    info = kernel._info
    try:
        return info.workaround(info.bind(tuple(plan.args), dict(plan.kwargs))) if hasattr(info, "workaround") else None
    except Exception:  # noqa: BLE001 - the note is optional
        return None


def describe_call(args, kwargs) -> str:
    parts = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in kwargs.items()]
    return clip(", ".join(parts), 400)


def capture(kmap: KernelMap, selected, opinfo: str, dtype: torch.dtype, sample: int, call: int):
    """(ATen overload, kernel name, args, kwargs) of one case, found by running the
    task again without calling any kernel (used to write a crash's reproducer)."""
    runner = TaskRunner(kmap, selected, mode="capture", capture_at=(sample, call))
    runner.run(opinfo, dtype)
    return runner.captured


def default_kmap() -> KernelMap:
    import etops

    return KernelMap(etops.registry().operator_names)


def ensure_env() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
