"""Running a conformance task and checking every call it makes that has an
ExecuTorch kernel against that kernel.

One *task* is the calls of one source at one dtype: an OpInfo's samples, run under
the dispatch mode ``_CheckMode`` (``run_opinfo_task``), or a kernel's reference
samples (``ref:<kernel>``: etops.conformance.references), or a kernel's generated
cases (``gen:<kernel>``: etops.conformance.generated). Each call whose kernel is
selected is one *case*: the inputs are cloned (storage, offset and strides kept),
ATen (or the reference) runs on the originals (the sample goes on with its result),
the ExecuTorch kernel on the clones, and its result is compared with each of the
runner's *comparisons*, with OpInfo's tolerance for the dtype (the rules table's
``tolerance_of``): ATen's result (``AGAINST_ATEN``) for ``etops check``, and for
``etops dev`` also what the kernel an override replaced computes (etops.dev.check).
The two commands differ only in the sources and comparisons they pass.

Each kernel call is published on this process's case clock (case_clock.started /
ended, with ATen's time for the same call: measured here, or the recording's), so
that a parent can kill a process whose kernel never returns (a ``hang`` case); each
case is published for its whole run (case_clock.entered / left), so that a parent
that kills a process grown past its memory limit knows the case to skip for size.

May import: torch, the core, and etops.conformance's case, case_clock, values, mapping,
hooks, guarded, opinfos, reproducer, references and generated modules (none of which imports it).
"""

from __future__ import annotations

import time
import traceback
import warnings
import zlib
from contextlib import nullcontext
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import _logs
from ..compare import OPINFO
from ..errors import KernelAborted, KernelCrashed, KernelError, NoMatchingKernelError, UnrepresentableError
from ..ops import rules_for
from ..registry import as_program, registry
from . import case_clock
from .case import STATUSES, CaseInfo, CaseResult, KernelCall, Tally, TaskResult, bind, call_kernel, describe_call, plan_call  # noqa: F401 - runner's API too
from .guarded import refusing_rule
from .hooks import load_hooks
from .mapping import KernelMap, overload_name
from .opinfos import dtype_from_name, opinfo_dtypes, opinfo_id, opinfos, tolerance  # noqa: F401 - runner's API too
from .references.run import run_reference_task
from .references.spec import TASK_PREFIX as REFERENCE_TASK_PREFIX
from .generated.run import TASK_PREFIX as GENERATED_TASK_PREFIX, run_generated_task
from .effective import judge, measure, more_precise
from .outcome import Outcome, of_exception
from .reproducer import write_reproducer
from .values import WRONG, clip, compare, describe, difference, difference_kind, digest, dtype_name, errors, exact_clone, precision_verdict, reported_errors, values_compared  # noqa: F401 - runner's API too

#: Detailed records (and reproducers) kept per (comparison, kernel, OpInfo, dtype,
#: status); the counts are always complete.
DEFAULT_MAX_DETAILS = 3

# ---- comparisons ----------------------------------------------------------------------

#: what a comparison's ``reference`` returns to leave a case out of it
NO_REFERENCE = object()


class AgainstATen:
    """The kernel's result against ATen's (or the reference's) result for the same
    call, or the value the hooks' ``reference`` gives instead: the sweep's check."""

    name = "aten"

    def reference(self, runner: "TaskRunner", case: CaseInfo, func, args, kwargs, expected):
        """What the kernel's result must equal (`args`/`kwargs`: the case's inputs,
        not to be written; `expected`: ATen's result)."""
        hooks = runner.hooks
        return hooks.reference(case, expected) if hooks is not None and hasattr(hooks, "reference") else expected


AGAINST_ATEN = AgainstATen()

#: ``etops check``'s comparisons: ATen's result only
COMPARISONS = (AGAINST_ATEN,)

# ---- task sources: OpInfo samples -------------------------------------------------------


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


def reference_call(func, args, kwargs):
    """`func`'s result on `args`/`kwargs` (ATen's, a reference's); what ExecuTorch
    logged outside etops' calls meanwhile is taken as `func`'s (an ATen wrapper of a
    kernel, torch's shape functions of a library's ops), never as the kernel's."""
    try:
        return func(*args, **kwargs)
    finally:
        _logs.drain_as(overload_name(func))


def task_seed(opinfo: str, dtype: torch.dtype) -> int:
    """The seed an OpInfo task's samples are made with (run_opinfo_task)."""
    return zlib.crc32(f"{opinfo}|{dtype_name(dtype)}".encode())


def run_opinfo_task(runner: "TaskRunner", opinfo: str, dtype: torch.dtype) -> TaskResult:
    """Runs the samples of OpInfo `opinfo` at `dtype` on `runner` (in any of its
    modes) under the dispatch mode and returns its TaskResult."""
    op = opinfos()[opinfo]
    runner.begin(opinfo, dtype, *tolerance(op, dtype), op=op)
    start = time.perf_counter()
    torch.manual_seed(task_seed(opinfo, dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            # OpInfo's own sample_inputs() wraps this generator in a tracker that
            # crawls the stack and reseeds for every sample (most of the time of a
            # sweep); the task is seeded once instead.
            samples = op.sample_inputs_func(op, "cpu", dtype, False)
            for index, sample in enumerate(samples):
                runner.sample_index, runner.call_index = index, 0
                runner.result.samples += 1
                try:
                    with _CheckMode(runner):
                        op(sample.input, *sample.args, **sample.kwargs)
                except _Abort:
                    raise
                except Exception:  # noqa: BLE001 - ATen refused the sample itself
                    runner.result.samples_failed += 1
        except _Abort:
            pass
        except Exception as exc:  # noqa: BLE001 - the sample generator failed
            runner.result.sample_error = f"{type(exc).__name__}: {exc}"[:300]
    runner.result.seconds = time.perf_counter() - start
    return runner.result


#: where a task's calls come from, by its id: (id prefix, runs the task on a runner);
#: the first source whose prefix the id starts with runs it
SOURCES = ((REFERENCE_TASK_PREFIX, run_reference_task), (GENERATED_TASK_PREFIX, run_generated_task), ("", run_opinfo_task))

# ---- the runner -------------------------------------------------------------------------


def _no_recorder(*_call) -> None:
    raise RuntimeError("TaskRunner: mode 'record' needs a recorder")


class TaskRunner:
    """Runs one task at a time and checks the kernels its calls reach.

    sources: where a task's calls come from (``SOURCES``); comparisons: what each
    case's result is compared with (``COMPARISONS``), each comparison's cases in
    ``results[name]`` (``result``: the first's, with the task's sample counts);
    deadline: a ``time.monotonic()`` after which cases are left out (counted in
    ``left_out``; the sample goes on with ATen's result). keep_cases: every case's
    CaseResult kept in its TaskResult's ``cases`` (etops dev's judge matches them
    with the base's one by one); measure: every floating case's error measured in
    ulps against a more precise reference, passing ones too (the precision rule
    of etops.conformance.outcome needs the edit's, the base's and ATen's). mode: "check" (call
    kernels and compare), "discover" (record which kernels the calls map to, call
    nothing), "capture" (return the inputs of one case), "record" (give each case
    to ``recorder``, call nothing: etops.conformance.recorded)."""

    def __init__(self, kmap: KernelMap, selected=None, *, hooks=None, report_dir=None, max_details=DEFAULT_MAX_DETAILS,
                 skip=(), on_start=None, mode: str = "check", capture_at=None, kernels=None, sources=SOURCES,
                 comparisons=COMPARISONS, deadline: float | None = None, keep_cases: bool = False,
                 measure: bool = False):
        if not comparisons or len({c.name for c in comparisons}) != len(comparisons):
            raise ValueError("TaskRunner: argument 'comparisons' must name at least one comparison, each once")
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
        self.sources = tuple(sources)
        self.comparisons = tuple(comparisons)
        self.deadline = deadline
        self.keep_cases, self.measure = keep_cases, measure
        self.left_out = 0
        self.sample_index = self.call_index = 0  # where in the task the next call is (set by the task's source)
        #: mode "record": called with (func, target, sample, call, args, kwargs) for
        #: each case (etops.conformance.recorded keeps a task's calls this way)
        self.recorder: Callable[..., Any] = _no_recorder

    def kernel(self, name: str):
        """The kernel of `name` as an exported program calls it (etops.as_program):
        the verdict is the kernel's, not etops' workarounds'."""
        k = self._kernels.get(name)
        if k is None:
            k = self._kernels[name] = as_program(registry().get_kernel(name))
        return k

    # -- one task --

    def run(self, task_id: str, dtype: torch.dtype) -> TaskResult:
        """Runs task `task_id` at `dtype` with the first source whose prefix the id
        starts with; returns the first comparison's TaskResult."""
        for prefix, run in self.sources:
            if task_id.startswith(prefix):
                return run(self, task_id, dtype)
        raise ValueError(f"no task source of this runner runs task {task_id!r}")

    def begin(self, task_id: str, dtype: torch.dtype, atol, rtol, op=None) -> None:
        """Starts a task: its id, dtype, tolerance and an empty TaskResult per comparison."""
        self.op, self.opinfo, self.dtype = op, task_id, dtype
        self.dname = dtype_name(dtype)
        self.atol, self.rtol = atol, rtol
        self.results = {c.name: TaskResult(task_id, self.dname) for c in self.comparisons}
        self.result = self.results[self.comparisons[0].name]
        self._kept: dict = {}

    def use_kernel(self, name: str, kernel, view=None) -> None:
        """Calls `kernel` (made as a program calls it) for `name`'s cases, through
        `view(kernel)` when given (what a reference judges of the call)."""
        made = as_program(kernel)  # a kernel object made with a given schema
        self._kernels[name] = made if view is None else view(made)

    def keep(self, result: CaseResult, comparison: str | None = None) -> bool:
        """Whether `result` (of `comparison`, the first when None) is recorded in
        detail (non-pass, under max_details)."""
        key = (comparison or self.comparisons[0].name, result.kernel, result.dtype, result.status)
        kept = self._kept.get(key, 0)
        if result.status == "pass" or kept >= self.max_details:
            return False
        self._kept[key] = kept + 1
        return True

    # -- one case --

    def handle(self, func, target: str, args, kwargs, recorded=None):
        """One call of a task: the case (or cases, one per comparison) it makes of the
        selected kernel; returns ATen's result for the task to go on with.
        `recorded`: the call as etops.conformance.recorded kept it (its arguments,
        which no one may write, and ATen's result on them), for a replay: ATen is not
        called again, and the only copy made is the kernel's."""
        if recorded is not None and (self.mode != "check" or hasattr(self.hooks, "transform")):
            args, kwargs, recorded = exact_clone(args), exact_clone(kwargs), None  # a live call on a copy
        if self.deadline is not None and self.mode == "check" and time.monotonic() > self.deadline:
            self.left_out += 1
            # the sample goes on with ATen's result, the kernel is not called
            return recorded.expected if recorded is not None else reference_call(func, args, kwargs)
        sample, call = self.sample_index, self.call_index
        self.call_index += 1
        self.reached.add(target)
        if self.mode == "discover":
            return reference_call(func, args, kwargs)
        if self.mode == "capture":
            if (sample, call) == self.capture_at:
                self.captured = (func, target, exact_clone(args), exact_clone(kwargs))  # type: ignore[assignment]
                raise _Abort()
            return reference_call(func, args, kwargs)
        if self.mode == "record":  # the case kept (etops.conformance.recorded), no kernel called
            kept = self.recorder(func, target, sample, call, args, kwargs)
            begun = time.perf_counter()
            expected = reference_call(func, args, kwargs)
            if kept is not None:
                kept.keep_result(expected, time.perf_counter() - begun)
            return expected
        case = CaseInfo(target, overload_name(func), self.opinfo, self.dname, sample, call)
        # the case published for its whole run (case_clock.entered): a parent that kills
        # this process for its memory knows which case to skip
        case_clock.entered(case)
        try:
            if recorded is None:  # ATen may write its arguments: the kernel's copy is taken first
                inputs_args, inputs_kwargs = exact_clone(args), exact_clone(kwargs)
                begun = time.perf_counter()
                expected = reference_call(func, args, kwargs)
                aten_seconds: float | None = time.perf_counter() - begun
            else:  # the recording's arguments, which no one writes: copied below, for a case that runs
                inputs_args, inputs_kwargs, expected = args, kwargs, recorded.expected
                aten_seconds = recorded.seconds
            applies = getattr(self.hooks, "applies", None)
            if (sample, call) in self.skip or (applies is not None and not applies(case, inputs_args, inputs_kwargs)):
                return expected  # crashed a worker before (the parent recorded it), or the hooks leave it out
            if recorded is not None and not (getattr(self.hooks, "leaves_inputs", False) and not func._schema.is_mutable):
                inputs_args, inputs_kwargs = exact_clone(args), exact_clone(kwargs)  # the kernel may write its copy
            case_expected = expected
            if hasattr(self.hooks, "transform"):  # the numerics axis: ATen and the kernel on the same new values
                moved = self.hooks.transform(case, func, inputs_args, inputs_kwargs)
                if moved is None:
                    return expected  # nothing to transform, or ATen refuses the new values
                inputs_args, inputs_kwargs, case_expected = moved
            last = len(self.comparisons) - 1
            for i, comparison in enumerate(self.comparisons):
                # each comparison calls the kernel on its own copy (kernels may write their inputs)
                c_args, c_kwargs = (inputs_args, inputs_kwargs) if i == last else (exact_clone(inputs_args), exact_clone(inputs_kwargs))
                reference = comparison.reference(self, case, func, c_args, c_kwargs, case_expected)
                if reference is not NO_REFERENCE:
                    self._record(comparison.name, self.check(case, func, target, c_args, c_kwargs, case_expected, reference, recorded,
                                                             aten_seconds), func)
            return expected
        finally:
            case_clock.left()

    def _record(self, comparison: str, result: CaseResult, func) -> None:
        """Records `result` in `comparison`'s TaskResult (in detail, with a reproducer
        for a mismatch when the runner has a report folder, while under max_details)."""
        keep = self.keep(result, comparison)
        if keep and result.status == "mismatch" and self.report_dir is not None:
            try:
                result.reproducer = write_reproducer(self.report_dir, result, func, self._saved_args, self._saved_kwargs,
                                                     self._saved_reference, values_compared(func))
            except Exception as exc:  # noqa: BLE001
                result.message += f" (no reproducer: {type(exc).__name__}: {exc})"
        self.results[comparison].record(result, keep, self.keep_cases)

    def check(self, case: CaseInfo, func, target, args, kwargs, expected, reference=NO_REFERENCE,
              recorded=None, aten_seconds: float | None = None) -> CaseResult:
        """One case: the kernel of `target` called on `args`/`kwargs` and its result
        compared with `reference` (by default what AGAINST_ATEN gives: `expected`,
        ATen's result, or the hooks' reference). `recorded`: the recorded call
        `args`/`kwargs` are a copy of (handle's), whose description and arguments
        serve as they are (an operator that writes its arguments gets copies).
        `aten_seconds`: ATen's time for the call (None: not known), part of the
        case's limit on this process's case clock."""
        if recorded is not None and func._schema.is_mutable:
            recorded = None  # ATen may be called on the saved inputs: copies, not the recording's
        result = CaseResult(case.kernel, case.aten_op, case.opinfo, case.dtype, case.sample, case.call, "pass",
                            inputs=recorded.inputs if recorded is not None else describe_call(args, kwargs),
                            atol=self.atol, rtol=self.rtol)
        if reference is NO_REFERENCE:
            reference = AGAINST_ATEN.reference(self, case, func, args, kwargs, expected)
        self._saved_reference = reference if reference is not expected else None
        # inputs as they were before the kernel ran (kernels may write mutable args):
        # a replayed call's recorded ones, which no one writes (ATen is not called on them)
        self._saved_args, self._saved_kwargs = ((recorded.args, recorded.kwargs) if recorded is not None
                                                else (exact_clone(args), exact_clone(kwargs)))
        try:
            kernel = self.kernel(target)
            if self.hooks is not None and hasattr(self.hooks, "inputs"):
                args, kwargs = self.hooks.inputs(case, args, kwargs)
            plan = plan_call(kernel, func, args, kwargs)
            if self.on_start is not None:
                self.on_start(case)
            # in flight from here (a test's before_call hook stands for the kernel dying)
            since = case_clock.started(result, aten_seconds)
            try:
                if self.hooks is not None and hasattr(self.hooks, "before_call"):
                    self.hooks.before_call(case)
                calling = self.hooks.calling(case) if self.hooks is not None and hasattr(self.hooks, "calling") else nullcontext()
                invoke = getattr(self.hooks, "invoke", None) if self.hooks is not None else None
                with calling:
                    errors_before = _logs.errors_logged()
                    actual = call_kernel(kernel, plan, expected, invoke)
                    result.logged = clip("; ".join(_logs.errors_since(errors_before)), 500) or None
            finally:
                seconds = case_clock.ended(since)
                if getattr(self, "result", None) is not None:  # a task's case (not a case checked again alone)
                    self.result.case_seconds[result.id] = seconds
        except KernelCrashed as exc:  # a guarded call's child died (--guard)
            result.status = "crash"
            result.message = clip(str(exc), 500)
            result.outcome = of_exception(exc, result.status)
            return result
        except KernelAborted as exc:  # an ET_CHECK: a program would abort here
            result.status = "abort"
            result.message = clip(str(exc), 500)
            result.rule = _workaround(kernel, plan)
            result.outcome = of_exception(exc, result.status)
            return result
        except (KernelError, NoMatchingKernelError, UnrepresentableError) as exc:  # ExecuTorch's refusals
            result.status = "unsupported"
            result.message = clip(f"{type(exc).__name__}: {exc}", 500)
            result.outcome = of_exception(exc, result.status)
            return result
        except Exception as exc:  # noqa: BLE001 - a pre-call guard refused, or etops could not make the call
            result.rule = refusing_rule(target, exc)
            result.status = "error" if result.rule is None else "guarded"
            tb = traceback.extract_tb(exc.__traceback__)
            where = f" [{tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}]" if tb else ""
            result.message = clip(f"{type(exc).__name__}: {exc}", 500) + where
            result.outcome = of_exception(exc, result.status, result.rule)
            return result
        # OpInfo's tolerance for the dtype (torch.testing's defaults when it gives
        # none), with its entry's judging part's for this kernel when it has one
        tol = rules_for(target).judging.tolerance_of(OPINFO.override(rtol=self.rtol, atol=self.atol))
        result.atol, result.rtol = tol.atol, tol.rtol
        found = difference(actual, reference, tol.atol, tol.rtol, values_compared(func))
        why = found.message if found is not None else None
        if reference is expected and values_compared(func):  # against a more precise reference (etops.conformance.effective)
            why = judge(result, func, self._saved_args, self._saved_kwargs, actual, expected, why)
        if self.measure and result.ulps is None and values_compared(func):
            measure(result, func, self._saved_args, self._saved_kwargs, actual, expected,
                    recorded.wide_reference() if recorded is not None else None)
        if why is not None:
            result.status = "mismatch"
            result.message = clip(why, 500)
            result.max_abs_error, result.max_rel_error = reported_errors(why, actual, reference)
            result.verdict = result.verdict or WRONG
        precise = more_precise(result)  # an error measured against ATen's own float64 result is no precision
        structure = found if found is not None and found.what != "values" and why is not None else None
        what = (structure.what if structure is not None else difference_kind(actual, reference)) if why is not None else None
        result.outcome = Outcome(result.status, result.verdict, what,
                                 result.ulps if precise else None, result.aten_ulps if precise else None,
                                 result.max_abs_error, digest(actual) if values_compared(func) else None,
                                 output=found.output if found is not None and why is not None else None,
                                 reason=result.reason if why is not None else None)
        return result


def _workaround(kernel, plan: KernelCall) -> str | None:
    """What etops' direct calls do about a case the kernel fails as a program calls
    it (KernelInfo.workaround), or None."""
    info = kernel._info
    try:
        return info.workaround(info.bind(tuple(plan.args), dict(plan.kwargs))) if hasattr(info, "workaround") else None
    except Exception:  # noqa: BLE001 - the note is optional
        return None


def capture(kmap: KernelMap, selected, opinfo: str, dtype: torch.dtype, sample: int, call: int, sources=SOURCES):
    """(ATen overload, kernel name, args, kwargs) of one case, found by running the
    task again from its source among `sources` without calling any kernel (used to
    write a finding's reproducer); None when the task never makes that call."""
    runner = TaskRunner(kmap, selected, mode="capture", capture_at=(sample, call), sources=sources)
    try:
        runner.run(opinfo, dtype)
    except _Abort:  # a source that does not stop at the captured call itself
        pass
    return runner.captured


def default_kmap() -> KernelMap:
    return KernelMap(registry().operator_names)
