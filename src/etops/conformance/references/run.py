"""Running one reference task (one kernel at one dtype) with the sweep's
TaskRunner: each valid Sample is one case, checked exactly as an OpInfo call is
(the reference's result stands for ATen's); each invalid Sample is one case
that passes when the kernel refuses it as the reference does.

A task source of the runner (etops.conformance.runner.SOURCES): takes the runner
as an argument and never imports it."""

from __future__ import annotations

import time
from contextlib import nullcontext
import warnings
import zlib

import torch

from ..._logs import drain_as
from ...errors import KernelAborted, KernelCrashed
from ...layouts import layout
from ...ops import rules_for
from ...registry import registry
from .. import case_clock
from ..outcome import Outcome, of_exception
from ..case import CaseInfo, CaseResult, describe_call
from ..values import dtype_name
from ..values import on_meta as meta_copies
from .spec import TASK_PREFIX, ReferenceOp


def kernel_of(ref):
    """The kernel object of `ref` (with its schema when the reference gives one);
    loads the kernel's library first."""
    import importlib

    if ref.library:
        importlib.import_module(ref.library)
    if ref.schema:
        return registry().get_kernel(ref.kernel, schema=ref.schema)
    return registry().get_kernel(ref.kernel)


def compared_as(ref) -> str:
    """The comparison kind of `ref`'s cases (an etops.compare kind): the one the
    reference gives, else the rules table's record of its kernel."""
    return str(ref.compare or rules_for(ref.kernel).judging.compare)


def reference_of(ref, kernel):
    """The callable `ref`'s cases compare with: its own, else ATen's functional
    counterpart of `kernel` (ValueError when torch has none)."""
    if ref.reference is not None:
        return ref.reference
    functional = kernel._info.functional_overload()
    if functional is None:
        raise ValueError(f"{ref.kernel}: the reference names no callable and torch has no functional counterpart of the kernel")
    return functional


def reference_call(task_id: str) -> ReferenceOp:
    """The callable the cases of reference task `task_id` (``ref:<kernel>``) are
    compared with, as the runner calls it (a reproducer's expected value)."""
    from . import find

    if not task_id.startswith(TASK_PREFIX):
        raise ValueError(f"reference_call: argument 'task_id' must start with {TASK_PREFIX!r}, got {task_id!r}")
    ref = find(task_id[len(TASK_PREFIX):])
    kernel = kernel_of(ref)
    return ReferenceOp(reference_of(ref, kernel), kernel._info._schema, compared_as(ref))


def run_reference_task(runner, task_id: str, dtype: torch.dtype):
    """Runs the samples of the reference named by `task_id` (``ref:<kernel>``) at
    `dtype` on `runner` (a conformance TaskRunner in any of its modes) and
    returns its TaskResult."""
    from . import find

    ref = find(task_id[len(TASK_PREFIX):])
    tolerance = ref.tolerance_of(dtype_name(dtype))
    runner.begin(task_id, dtype, *((tolerance[1], tolerance[0]) if tolerance else (None, None)))
    if not ref.kernel.startswith("aten::"):
        runner.report_dir = None  # reproducer scripts call torch.ops.aten
    start = time.perf_counter()
    torch.manual_seed(zlib.crc32(f"{task_id}|{dtype_name(dtype)}".encode()))
    try:
        kernel = kernel_of(ref)
        runner.use_kernel(ref.kernel, kernel, (lambda k: WritesJudged(k, ref.writes, ref.placeholder)) if ref.writes else None)
        func = ReferenceOp(reference_of(ref, kernel), kernel._info._schema, compared_as(ref))
        witnesses = [ReferenceOp(w, kernel._info._schema, compared_as(ref)) for w in ref.witnesses]
        with warnings.catch_warnings(), (layout(ref.layout) if ref.layout else nullcontext()):
            warnings.simplefilter("ignore")
            for index, sample in enumerate(ref.samples(dtype)):
                runner.sample_index, runner.call_index = index, 0
                runner.result.samples += 1
                if not sample.valid:
                    check_refusal(runner, func, ref.kernel, runner.kernel(ref.kernel), sample, ref.refusal_on_meta)
                    continue
                try:
                    # an out placeholder makes the runner size the outs as the reference's results
                    placeholders = dict.fromkeys(func.out_names) if ref.outs_from_reference else {}
                    for judge in (func, *witnesses):  # one case per judge: call 0 the reference, then the witnesses
                        runner.handle(judge, ref.kernel, list(sample.args), {**sample.kwargs, **placeholders})
                except Exception:  # noqa: BLE001 - the reference (or a witness) refused a valid sample
                    runner.result.samples_failed += 1
    except BaseException as exc:  # noqa: BLE001
        if runner.captured is not None:  # capture mode found its case (the runner's stop signal)
            pass
        elif isinstance(exc, Exception):  # the generator or the kernel lookup failed
            runner.result.sample_error = f"{type(exc).__name__}: {exc}"[:300]
        else:
            raise
    runner.result.seconds = time.perf_counter() - start
    return runner.result


class WritesJudged:
    """A kernel object whose call returns what a Reference with `writes` judges:
    ``(result, *written)``, or the written arguments alone when `placeholder`
    (each as the kernel left it: the kernel writes the caller's tensors)."""

    def __init__(self, kernel, writes: tuple, placeholder: bool):
        names = [a.name for a in kernel._info._schema.arguments if not a.is_out]
        missing = [n for n in writes if n not in names]
        if missing:
            raise ValueError(f"WritesJudged: argument 'writes' names {missing}, not arguments of {kernel._info.name}")
        self._kernel, self._writes, self._placeholder = kernel, tuple(writes), placeholder
        self._positions = {n: names.index(n) for n in writes}

    def __getattr__(self, name):
        return getattr(self._kernel, name)

    def __call__(self, *args, **kwargs):
        result = self._kernel(*args, **kwargs)
        written = tuple(kwargs[n] if n in kwargs else args[self._positions[n]] for n in self._writes)
        if self._placeholder:
            return written[0] if len(written) == 1 else written
        return (result, *written)


def check_refusal(runner, func, target, kernel, sample, on_meta: bool = False, refused: bool = False) -> None:
    """An invalid sample: pass when both refuse it, mismatch when the kernel
    accepts it, error when the reference accepts it (a wrong sample). The
    reference sees meta copies of the tensors when `on_meta`; with `refused` it is
    known to refuse the sample (a generated case its meta kernel refused when the
    case was made) and is not asked again."""
    sample_index, call = runner.sample_index, runner.call_index
    runner.call_index += 1
    runner.reached.add(target)
    if runner.mode != "check" or (sample_index, call) in runner.skip:
        return
    args, kwargs = list(sample.args), dict(sample.kwargs)
    case = CaseInfo(target, f"{func._schema.name}.{func._schema.overload_name}", runner.opinfo, runner.dname, sample_index, call)
    result = CaseResult(**vars(case), status="pass", inputs=describe_call(args, kwargs))
    if not refused:
        try:
            func(*meta_copies(args), **{k: meta_copies(v) for k, v in kwargs.items()}) if on_meta else func(*args, **kwargs)
        except Exception:  # noqa: BLE001 - refused, as expected
            pass
        else:
            result.status, result.message = "error", f"invalid sample ({sample.why}) accepted by the reference"
        drain_as(case.aten_op)  # what the reference logged is its own
    if result.status == "pass":
        if runner.on_start is not None:
            runner.on_start(case)
        try:
            since = case_clock.started(result, None)  # no time of the reference's says how long a refusal takes
            try:
                kernel(*args, **kwargs)
            finally:
                case_clock.ended(since)
        except KernelCrashed as exc:
            result.status, result.message = "crash", str(exc)[:500]
            result.outcome = of_exception(exc, "crash")
        except KernelAborted as exc:  # refused by aborting, as it would abort a program
            result.status, result.message = "abort", str(exc)[:500]
            result.outcome = of_exception(exc, "abort")
        except Exception as exc:  # noqa: BLE001 - the kernel (or etops' checks) refused it
            result.message = f"refused ({sample.why}): {type(exc).__name__}: {exc}"[:500]
        else:
            result.status, result.message = "mismatch", f"the kernel accepted an invalid input: {sample.why}"
    if result.outcome is None and result.status == "error":  # the reference accepted what the spec calls invalid
        result.outcome = Outcome("error", error="reference accepted", reason=sample.why)
    elif result.outcome is None:
        result.outcome = Outcome(result.status, what="accepted an invalid input" if result.status == "mismatch" else None)
    runner.result.record(result, runner.keep(result), runner.keep_cases)
