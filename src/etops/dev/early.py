"""A first run's early cases: on a fresh cache, discovery (which OpInfos reach the
file's operators: every OpInfo's samples at three dtypes, minutes) comes before the
judge, and a round would print nothing until it ends. Before it, when the round
streams (etops.dev.stream), right after the edit's build and swap (before the base's
build: etops.dev.loop), the edit runs the tasks that need no discovery at one
dtype (float32 unless the round's dtypes leave it out): the OpInfos named after the
file's operators, their reference and generated cases, in one pass of the judge's
runner (guarded when the round is; each task in the dim-order layouts right after it,
as the judge runs them), so that its first failing cases are printed
within seconds of the build, then a line of its counts.

Its tasks need no kernel to be recorded (OpInfo's samples, ATen's results, the
generated cases): they are recorded while the edit's build runs (``while_building``:
the compiler is a subprocess; the build waits for it in a thread), so that the import
of OpInfo's database and the samples' ATen calls cost no time after the build.

The pass only streams. Its recordings are the judge's (judge.RECORDER: the judge's
passes replay them, nothing is recorded twice); its results are dropped, and the
judge runs the same tasks with the rest, so the report, the verdict and the exit
code are those of a round without it. With the discovery on disk (a warm cache),
the plan is quick and the judge streams its float32 tasks first itself: no early pass.

May import the core, etops.conformance and this package's cases, judge, progress
and stream.
"""

from __future__ import annotations

import threading
import time

from . import progress, stream

#: seconds in which the early pass may start tasks (one begun runs to its end)
EARLY_BUDGET = 20.0


def early_dtype(dtypes) -> str:
    """The dtype of the early tasks: float32, unless `dtypes` (the round's; None:
    all) leaves it out, then the first of them."""
    import torch

    from ..conformance.runner import dtype_from_name, dtype_name

    names = None if dtypes is None else [dtype_name(d if isinstance(d, torch.dtype) else dtype_from_name(str(d)))
                                         for d in dtypes]
    return "float32" if not names or "float32" in names else names[0]


def early_plan(names, dtypes=None, generated: bool = True) -> dict[str, list[dict]]:
    """Operator -> its tasks that need no discovery, at early_dtype(dtypes): the
    OpInfos named after it (cases.named_opinfos), its reference and, when
    `generated`, its generated cases; operators with none left out."""
    from ..conformance.runner import opinfos
    from .cases import named_opinfos, tasks_for

    dtype = early_dtype(dtypes)
    found = {name: tasks_for(name, sorted(named_opinfos(name) & set(opinfos())), [dtype], generated) for name in names}
    return {name: tasks for name, tasks in found.items() if tasks}


def prepare_early(names, dtypes=None, generated: bool = True) -> None:
    """The early tasks (early_plan) recorded and their generated cases made in this
    process, no kernel called (judge.prepare): the judge's passes replay them."""
    from .judge import RECORDER, prepare

    plan = early_plan(names, dtypes, generated)
    RECORDER.keep_only(plan)
    prepare(plan)


def while_building(build, meanwhile):
    """`build()`'s value (a compiler subprocess, waited for in a thread) with
    `meanwhile()` run here until both end; build's exception first, then meanwhile's.
    Nothing forks meanwhile (a fork while the thread runs would copy it half way)."""
    done: dict = {}

    def run() -> None:
        try:
            done["value"] = build()
        except BaseException as exc:  # noqa: BLE001 - raised here, in the caller's thread
            done["error"] = exc

    thread = threading.Thread(target=run, name="etops dev build", daemon=True)
    thread.start()
    failed = None
    try:
        meanwhile()
    except BaseException as exc:  # noqa: BLE001 - raised once the build ended (its own error first)
        failed = exc
    finally:
        thread.join()
    if "error" in done:
        raise done["error"]
    if failed is not None:
        raise failed
    return done["value"]


def needed(discovered: bool) -> bool:
    """Whether a round runs the early pass: it streams (stream.STREAM), and discovery
    is not on disk (`discovered`: sweep.discovery_path exists)."""
    return stream.STREAM.enabled() and not discovered


def run_early(names, *, dtypes=None, generated: bool = True, guarded: bool = True, dim_orders: bool = True,
              budget: float = EARLY_BUDGET) -> list:
    """The early pass over early_plan(names, dtypes, generated) on the edit (installed
    now; with `dim_orders`, each task in the dim-order axis' layouts too, right after
    it, as the judge runs them), its failing cases streamed as their tasks come back,
    then one line of its counts (a first judged result even when nothing fails); no
    task starts after `budget` seconds. The (operator, OpInfo, dtype) tasks it ran."""
    from .judge import GUARDED, RECORDER, Pass, layout_passes, run_passes

    plan = early_plan(names, dtypes, generated)
    if not plan:
        return []
    RECORDER.keep_only(plan)
    deadline = time.monotonic() + budget
    edit = Pass("edit", GUARDED if guarded else None, None, 3, deadline)
    dtype = early_dtype(dtypes)
    with progress.phase(f"early {dtype} cases, before discovery"):
        (side, ran), *laid = run_passes([edit, *(layout_passes(guarded, deadline) if dim_orders else ())], plan,
                                         forked=guarded)
    counts = ", ".join(f"{n} of {op.removeprefix('aten::')}" for op, n in sorted(side.cases.items()))
    laid_out = sum(len(s.report.failing) for s, _ran in laid)
    stream.line(f"early {dtype} cases on the edit, before discovery: {counts}; {len(side.report.failing)} failing"
                + (f", {laid_out} failing in the dim-order layouts" if laid else "")
                + " (the judge runs them again with the rest)")
    return ran


__all__ = ["EARLY_BUDGET", "early_dtype", "early_plan", "needed", "prepare_early", "run_early", "while_building"]
