"""Running one generated task (``gen:<kernel>`` at the dtype of its cases' first
tensor) with the sweep's TaskRunner: each valid case goes through the runner's
``handle`` exactly as a call of an OpInfo sample does (ATen's functional overload
on the inputs, the kernel on copies, the runner's comparisons, numerics, hooks,
guarded calls and reproducers); each case ATen's meta kernel refuses is a refusal
case, judged as a reference's invalid sample is (it passes when the kernel refuses
it too), and so is each case ATen's CPU kernel refuses although its meta kernel
accepts it; a case ATen has no CPU kernel for counts as a sample ATen failed.

A task source of the runner (etops.conformance.runner.SOURCES): takes the runner
as an argument and never imports it. Imports torch, the standard library and the
conformance modules the runner imports (references.run, references.spec); its cases
come from kept.case_of (the cases a process keeps, else made).
"""

from __future__ import annotations

import time
import warnings

import torch

from ..references.run import check_refusal
from ..references.spec import invalid
from ..values import dtype_name
from .cases import NoGeneratedCases, case_key, plan
from .kept import case_of

#: task ids of generated tasks start with this (OpInfo ids and references' never do)
TASK_PREFIX = "gen:"


def task_id(kernel: str) -> str:
    return TASK_PREFIX + kernel


def kernel_of_task(task: str) -> str:
    if not task.startswith(TASK_PREFIX):
        raise ValueError(f"argument 'task' must start with {TASK_PREFIX!r}, got {task!r}")
    return task[len(TASK_PREFIX):]


def sample_key(task: str, dtype: str, sample: int) -> str:
    """The key of the case a task's `sample` is (case_of rebuilds it)."""
    rows = plan(kernel_of_task(task)).rows_of(dtype)
    if not 0 <= sample < len(rows):
        raise ValueError(f"sample_key: task {task} at {dtype} has {len(rows)} cases, not a case {sample}")
    return case_key(kernel_of_task(task), rows[sample])


def generated_tasks(selected, dtypes=None) -> list:
    """(generated task, dtype) tasks of the selected kernels that have generated
    cases, one per dtype of their cases' first tensor (`dtypes`: torch dtypes or
    names narrowing them), as the sweep's task dicts."""
    wanted = None if dtypes is None else {d if isinstance(d, str) else dtype_name(d) for d in dtypes}
    tasks = []
    for kernel in selected:
        try:
            p = plan(kernel)
        except NoGeneratedCases:
            continue
        for dtype in p.dtypes():
            if wanted is None or dtype in wanted:
                tasks.append({"opinfo": task_id(kernel), "dtype": dtype, "cost": 0.0})
    return tasks


def why_none(kernel: str) -> str | None:
    """Why `kernel` has no generated case (None: it has some)."""
    try:
        plan(kernel)
    except NoGeneratedCases as exc:
        return str(exc)
    return None


def run_generated_task(runner, task: str, dtype: torch.dtype):
    """Runs the generated cases of task `task` (``gen:<kernel>``) whose first tensor
    is of `dtype` on `runner` (a conformance TaskRunner in any of its modes) and
    returns its TaskResult."""
    kernel = kernel_of_task(task)
    runner.begin(task, dtype, None, None)
    start = time.perf_counter()
    try:
        p = plan(kernel)
        rows = p.rows_of(dtype_name(dtype))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for index, row in enumerate(rows):
                runner.sample_index, runner.call_index = index, 0
                runner.result.samples += 1
                case = case_of(case_key(kernel, row))
                if not case.valid:
                    # ATen's meta kernel refused it when the case was made: not asked again
                    check_refusal(runner, case.func, kernel, runner.kernel(kernel), invalid(case.why, *case.args, **case.kwargs),
                                  refused=True)
                    continue
                try:
                    runner.handle(case.func, kernel, list(case.args), dict(case.kwargs))
                except NotImplementedError:  # ATen has no CPU kernel for these dtypes: no reference
                    runner.result.samples_failed += 1
                except Exception as exc:  # noqa: BLE001 - ATen's CPU kernel refuses what its meta kernel accepted
                    # (torch's alpha check, say): a refusal case, which the kernel must refuse too
                    runner.call_index = 0
                    why = f"ATen's CPU kernel refuses it ({type(exc).__name__})"
                    check_refusal(runner, case.func, kernel, runner.kernel(kernel), invalid(why, *case.args, **case.kwargs))
    except BaseException as exc:  # noqa: BLE001
        if runner.captured is not None:  # capture mode found its case (the runner's stop signal)
            pass
        elif isinstance(exc, Exception):
            runner.result.sample_error = f"{type(exc).__name__}: {exc}"[:300]
        else:
            raise
    runner.result.seconds = time.perf_counter() - start
    return runner.result


__all__ = ["TASK_PREFIX", "generated_tasks", "kernel_of_task", "run_generated_task", "sample_key", "task_id", "why_none"]
