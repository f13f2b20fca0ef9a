"""The judge of ``etops dev``: ``etops check``'s runner, case source, classifier and
clustering, run on the edit and on the base, and the two compared.

Each side is one pass of check's TaskRunner over the same tasks (cases.plan),
with the sweep's hooks: by default every kernel call is guarded
(``etops.guard.call``: tensors against guard pages, in a forked guard process), so
a crash, an abort or a write past an out is a case, not the end of the process.
Every case of both sides is kept; etops.dev.verdict matches the edit's with the
base's one by one on their Outcomes and groups them into findings (new, also in
base, fixed) by root cause with check's clusters.

The dim-order axis (check's ``--dim-order-axis``, on by default): the tasks the edit
ran on contiguous inputs run again in each dense layout of check's axis
(channels-last for rank 4 and 5, the last two dims transposed for rank >= 2, under
``etops.layout("preserve")``; guarded as the contiguous pass is), on the edit and on
the base. A case that fails laid out and not (or otherwise) contiguous is a
dim-order finding of that layout, clustered with the layout in its key. Other axes
(the numerics axis, etops.dev.numerics_pass) are given to ``judge`` and run the same
way: their passes right after the contiguous one, then their own comparison.
"""

from __future__ import annotations

from typing import Any

import dataclasses
import pickle
import time
from dataclasses import dataclass, field

from ..conformance import case_clock
from ..conformance import clusters as cl
from ..conformance.dim_orders import AXIS_LAYOUTS, AXIS_MAX_DETAILS
from ..conformance.generated import TASK_PREFIX as GENERATED_PREFIX
from ..conformance.hooks import with_guard
from ..conformance.recorded import Recorder
from ..conformance.runner import TaskRunner, default_kmap, dtype_from_name
from ..conformance.sweep import Report
from .. import signature_cache
from .derived import DERIVED_PREFIX, run_derived
from . import learned, progress, stream
from .verdict import Side, compare, failing_ids, outcome_of

#: the hooks of a guarded pass (etops check --guard's)
GUARDED = "etops.guard.hooks:guarded"
#: the OpInfo tasks' calls, recorded at their first run and replayed after (the edit,
#: the base and each dim-order layout run the same tasks; so does each --watch round,
#: and a later process: the recordings are kept on disk, etops.dev.learned)
RECORDER = Recorder(store=learned.RECORDINGS)

#: (operator, pass, case id) -> why: the cases skipped for size in this judge() (TaskResult.too_large)
TOO_LARGE: dict = {}

#: the base's task results, kept for the process: (base identity, guarded, operator,
#: task, dtype) -> TaskResult (the base is the same until HEAD or its headers change,
#: so ``--watch`` judges it once)
BASE_RESULTS: dict = {}


@dataclass
class Pass:
    """One pass of the judge's tasks: its Side's name, the runner's hooks, where its
    reproducers go (None: none), how many details it keeps per kernel and status,
    when none of its tasks starts any more (time.monotonic(); None: no limit), and
    the (operator, task id) pairs it runs (None: every task; a later pass only)."""

    name: str
    hooks: Any
    report_dir: Any = None
    max_details: int = 3
    deadline: float | None = None
    tasks: frozenset | None = None


def run_side(name: str, plan: dict, *, hooks=GUARDED, report_dir=None, deadline: float | None = None, only=None,
             max_details: int = 3, cache_key=None, forked: bool = False, alongside=None) -> tuple[Side, list]:
    """One pass of check's runner over `plan` (run_passes with that pass alone):
    the Side and the (operator, task) pairs run."""
    return run_passes([Pass(name, hooks, report_dir, max_details, deadline)], plan, only=only, cache_key=cache_key,
                      forked=forked, alongside=alongside)[0]


def run_passes(passes: list, plan: dict, *, only=None, cache_key=None, forked: bool = False,
               alongside=None) -> list[tuple[Side, list]]:
    """Passes of check's runner over `plan` (operator -> tasks), float32 tasks of
    every operator first, then the tasks a later pass is limited to (its
    ``tasks``: the numerics axis'), then the rest: each task runs under the first pass's hooks, then under
    each later pass's (the edit's dim-order layouts) in the same process, which
    spares a pass of task processes each; a later pass runs only the tasks the
    first one ran. `only`: run just these (operator, task) pairs; a pass's
    `deadline`: no task of it starts after; `cache_key` (one pass only): the results are kept
    in BASE_RESULTS under it (and taken from there when present); `forked`: the
    tasks run in task processes (task_processes.py: guarded calls without a round
    trip each; a task whose process dies runs again here, through the guard
    process). `alongside`: the round's alongside.Alongside (the timing), started
    once the tasks are recorded (its samples may be recorded cases) and polled while
    the task processes run. Returns each pass's Side and the (operator, task) pairs it ran."""
    if cache_key is not None and len(passes) > 1:
        raise ValueError("run_passes: argument 'cache_key' is for one pass only")
    start = time.perf_counter()
    first = passes[0]
    names = sorted(plan)
    kmap = default_kmap()
    chosen = set().union(*(p.tasks for p in passes if p.tasks is not None))
    order = sorted(((n, t) for n in names for t in plan[n]),
                   key=lambda p: (p[1]["dtype"] != "float32", (p[0], p[1]["opinfo"]) not in chosen, p[0]))
    order = [(op, task) for op, task in order if only is None or (op, task["opinfo"], task["dtype"]) in only]
    keys = [None if cache_key is None else (cache_key, first.hooks is not None, op, task["opinfo"], task["dtype"])
            for op, task in order]
    cached = [BASE_RESULTS.get(key) if key is not None else None for key in keys]
    results: list = [None if r is None else [r] for r in cached]
    todo = [i for i, r in enumerate(results) if r is None]
    kernels: dict = {}

    started: set = set()  # tasks begun here before the deadline: recorded now, so run whatever the time

    def one(i: int, hangs: tuple = (), here: bool = False) -> list:
        """Task i under each pass (the k-th pass's cases labelled k on the case clock);
        `hangs`: its cases past their limit in earlier task processes (skipped, recorded
        as hang cases; the task runs whatever the deadline: it has begun); `here`: run
        again in this process, whatever the deadline (case_clock.exhausted's `here`)."""
        op, task = order[i]
        out: list = []
        for k, p in enumerate(passes):
            case_clock.set_label(k)
            late = not here and not hangs and p.deadline is not None and time.monotonic() > p.deadline
            if (late and not (p is first and i in started)) or (out and out[0] is None) \
                    or (p.tasks is not None and (op, task["opinfo"]) not in p.tasks):
                out.append(None)
            elif case_clock.exhausted(hangs, k, here) or (
                    hangs and p.deadline is not None and time.monotonic() > p.deadline):
                # a kernel hanging again and again costs at most the budget (and a limit per task process)
                out.append(case_clock.given_up(task["opinfo"], task["dtype"], hangs, k))
            else:
                result = _run_task(kmap, op, task, p.hooks, p.report_dir, p.max_details, kernels, case_clock.skipped(hangs, k))
                out.append(case_clock.with_hangs(result, hangs, k))
        return out

    label = f"{first.name}" + (f" +{len(passes) - 1} layouts" if len(passes) > 1 else "") + " tasks"
    with progress.phase(label):
        found = _run_todo(todo, order, one, passes, kmap, started, forked, alongside)
    RECORDER.save()  # the recordings made here (with their wide references), for later processes
    learned.save_generated()  # and the generated cases made here
    for i, result in zip(todo, found):
        results[i] = result
        if result[0] is not None and keys[i] is not None:
            BASE_RESULTS[keys[i]] = result[0]
    return [_side_of(p, names, order, [r[k] for r in results], start) for k, p in enumerate(passes)]



def _stream_failing_cases(passes, results) -> None:
    """Each pass' first failing cases of one task, streamed as they come (dev.stream)."""
    for p, r in zip(passes, results):
        stream.STREAM.failing_cases(p.name, r)

def _run_todo(todo: list, order: list, one, passes: list, kmap, started: set, forked: bool, alongside) -> list:
    """The results of tasks `todo` (indexes into `order`), run by `one`: in task
    processes when `forked` (each OpInfo task recorded here first), else here; the
    status line counts them (progress.count)."""
    from .task_processes import default_workers, run_tasks

    first = passes[0]

    if not (forked and todo):
        found = []
        for n, i in enumerate(todo):
            _prepare_generated(*order[i])
            found.append(one(i))
            for p, r in zip(passes, found[-1]):
                stream.STREAM.failing_cases(p.name, r)
            progress.count(n + 1, len(todo))
        return found
    with progress.phase("recording the cases"):
        for n, i in enumerate(todo):  # recorded here, before the forks: every task process replays the same cases
            progress.count(n, len(todo))
            if first.deadline is not None and time.monotonic() > first.deadline:
                break  # the task processes start none of the rest
            if _prepare(kmap, *order[i]):
                started.add(i)
    progress.count(0, len(todo))
    if alongside is not None:
        alongside.start()
    # every core counted, the timing's too: the task processes get it back when the timing ends
    workers = default_workers(alongside.cores if alongside is not None else None)
    handed = run_tasks(todo, _with_torch_answers(one),
                       lambda i, ended, _failure, hangs: ([_run_again(r, order[i], ended)
                                                     for r in one(i, hangs, here=True)], {}),
                       workers=workers, on_cycle=None if alongside is None else alongside.poll, on_done=progress.count,
                       on_result=lambda _n, handed: _stream_failing_cases(passes, handed[0]))
    for _result, made in handed:  # later forks (the base, each layout, the next round) start with them
        signature_cache.keep(made)
    return [result for result, _made in handed]


def _side_of(p: Pass, names: list, order: list, results: list, start: float) -> tuple[Side, list]:
    """The Side of pass `p` from its results (None: not run), and the (operator,
    task) pairs it ran."""
    report = Report(names, None, p.hooks is not None, 1, report_dir=str(p.report_dir) if p.report_dir else None)
    side = Side(p.name, report, cases=dict.fromkeys(names, 0))
    ran = []
    for (op, task), result in zip(order, results):
        if result is None:  # past the deadline
            continue
        report.add(result)
        side.cases[op] += sum(sum(t.counts.values()) for (k, _), t in result.tallies.items() if k == op)
        TOO_LARGE.update({(op, p.name, case): words for case, words in result.too_large.items()})
        ran.append((op, task["opinfo"], task["dtype"]))
    report.details.sort(key=lambda c: (c.kernel, c.status, c.opinfo, c.dtype, c.sample, c.call))
    side.seconds = time.perf_counter() - start
    return side, ran


def _with_torch_answers(run):
    """`run` for a task process: (its result, torch's answers the process worked out
    for it: etops.signature_cache's entries, none when they do not pickle), so that
    no process works one out twice."""

    def run_and_hand_back(i, hangs=()):
        result = run(i, hangs)
        made = signature_cache.made_here()
        try:
            pickle.dumps(made)
        except Exception:  # noqa: BLE001 - an argument that does not pickle: worked out again where needed
            made = {}
        return result, made

    return run_and_hand_back


def sources() -> tuple:
    """The judge's task sources: derived tasks (etops.dev.derived), then check's, the
    OpInfo tasks recorded once and replayed (RECORDER)."""
    return ((DERIVED_PREFIX, run_derived), *RECORDER.sources())


def _runner(kmap, op: str, hooks, report_dir, max_details: int, kernels: dict, skip=()) -> TaskRunner:
    return TaskRunner(kmap, [op], hooks=hooks, report_dir=report_dir, max_details=max_details, kernels=kernels,
                      sources=sources(), skip=skip, keep_cases=True, measure=True)


def _run_task(kmap, op: str, task: dict, hooks, report_dir, max_details: int, kernels: dict, skip=()):
    """One task's TaskResult on check's runner, the (sample, call) cases in `skip` left out."""
    runner = _runner(kmap, op, hooks, report_dir, max_details, kernels, skip)
    return runner.run(task["opinfo"], dtype_from_name(task["dtype"]))


def _prepare(kmap, op: str, task: dict) -> bool:
    """The task recorded in this process (RECORDER), when it comes from OpInfo's
    source and was not recorded yet; whether it was recorded now (the task has begun,
    as it would have in a pass run here: it runs past the deadline)."""
    if task["opinfo"].startswith(DERIVED_PREFIX):
        return False  # run_derived's, never recorded
    if _prepare_generated(op, task):
        return False  # its cases made here (or read), never recorded: it runs them
    dtype = dtype_from_name(task["dtype"])
    recorded = RECORDER.prepare(_runner(kmap, op, None, None, 0, {}), task["opinfo"], dtype)
    RECORDER.measure_ahead(task["opinfo"], dtype)  # the wide references, once, before the forks
    return recorded


def prepare(plan: dict) -> None:
    """Every task of `plan` (operator -> tasks) made ready in this process without
    calling a kernel (_prepare: an OpInfo task recorded, a generated one's cases
    made): the edit's early tasks while its build runs (etops.dev.early)."""
    kmap = default_kmap()
    for op, tasks in plan.items():
        for task in tasks:
            _prepare(kmap, op, task)


def _prepare_generated(op: str, task: dict) -> bool:
    """When `task` is a generated one: its cases made (or read from the store) in
    this process (learned.prepare_generated), before any task process forks, so that
    none makes them again. Whether it is one."""
    if not task["opinfo"].startswith(GENERATED_PREFIX):
        return False
    learned.prepare_generated(task["opinfo"][len(GENERATED_PREFIX):], task["dtype"])
    return True


def _run_again(result, where: tuple, ended):
    """The result of a task run again here after its task process died or hung
    (`ended`: how, of_death's Outcome) or its runner failed there (None): as run here,
    where a fault is a crash case naming the argument; when it shows none (a kernel
    that corrupted the task process's memory in an earlier call, outside every guard
    region), a crash case of its own, so the death is a finding: its Outcome is the
    death's (the signal, the exit status, the limit of a hang), ended CORRUPTED."""
    from ..conformance.case import CaseResult
    from ..conformance.outcome import CORRUPTED, death_in_words

    if result is None or ended is None or any(status == "crash" for status, _v in result.failing.values()) \
            or any(outcome_of(c).error == "GuardTimeout" for c in result.details):
        return result
    op, task = where
    case = CaseResult(op, "", task["opinfo"], task["dtype"], -1, -1, "crash",
                      message=f"task {task['opinfo']} {task['dtype']}: its task process {death_in_words(ended)}, "
                              "but passes when its calls "
                              "go one by one through the guard process: an earlier call in that process wrote outside "
                              "every guard region (run etops check --guard on the file's operators to find it)",
                      outcome=dataclasses.replace(ended, status="crash", ended=CORRUPTED))
    result.record(case, keep=True, every=True)
    return result


def _merge(side: Side, more: Side) -> None:
    """Adds `more`'s cases to `side` (same operators or others)."""
    r, m = side.report, more.report
    for key, tally in m.tallies.items():
        r.tallies.setdefault(key, type(tally)()).merge(tally)
    r.details += m.details
    r.failing.update(m.failing)
    r.every_case.update(m.every_case)
    r.tasks += m.tasks
    r.samples += m.samples
    for op, n in more.cases.items():
        side.cases[op] = side.cases.get(op, 0) + n
    r.details.sort(key=lambda c: (c.kernel, c.status, c.opinfo, c.dtype, c.sample, c.call))


#: the dim-order axis's layouts (check's --dim-order-axis), in the order they run
LAYOUTS = tuple(AXIS_LAYOUTS)
#: the share of a budget in which the edit's contiguous tasks may start when the axis
#: runs; a task's layouts run right after it, and may start until the budget's end
CONTIGUOUS_SHARE = 0.6


def _hooks(layout: str, guarded: bool):
    spec = AXIS_LAYOUTS[layout]
    return with_guard(spec) if guarded else spec


def clusterer(report, report_dir, hooks, layout: str | None = None, preserve: bool | None = None):
    """compare's clusterer: check's clusters of the given cases, with their
    reproducers written to `report_dir` when given (run under
    etops.layout("preserve") when `preserve`, by default when there is a layout)."""
    preserve = layout is not None if preserve is None else preserve

    def clusters(cases: list, first: int) -> list:
        if report_dir is None:
            return cl.group(cases, layout)
        return cl.build(report, report_dir=report_dir, hooks=hooks, layout=layout, preserve=preserve,
                        shrink=False, cases=cases, first=first, sources=sources())

    return clusters


def polled_only(alongside):
    """`alongside` for a pass of the base (swapped in): only when it has started
    already, so that it is polled; never started there, where its fork would time
    the base as the edit."""
    return alongside if alongside is not None and alongside.started else None


def run_base_variants(plan: dict, variants: dict, install_base, restore_base, *, guarded: bool, base_key,
                      alongside=None) -> dict:
    """An axis' base passes: `variants` maps a variant's name (a layout, a numerics
    transform) to (its hooks, the (operator, OpInfo, dtype) tasks the edit ran in it);
    the base, swapped in once (`install_base()`, None: no base), runs each variant's
    tasks, its results kept per base and variant (BASE_RESULTS). The base's Side per
    variant that ran any task."""
    found: dict = {}
    if install_base is None or not any(tasks for _hooks, tasks in variants.values()):
        return found
    install_base()
    try:
        for name, (hooks, tasks) in variants.items():
            if tasks:
                found[name], _ = run_side(f"base, {name}", plan, hooks=hooks, only=set(tasks), max_details=AXIS_MAX_DETAILS,
                                          cache_key=None if base_key is None else (base_key, name, guarded),
                                          forked=guarded, alongside=polled_only(alongside))
    finally:
        restore_base()
    return found


def layout_passes(guarded: bool, deadline) -> list:
    """The edit's passes of the dim-order axis, one per layout of LAYOUTS (run with
    its contiguous pass, run_passes): none of their tasks starts after `deadline`."""
    return [Pass(f"edit, {layout}", _hooks(layout, guarded), None, AXIS_MAX_DETAILS, deadline) for layout in LAYOUTS]


def layout_findings(plan: dict, ran: list, edit: Side, base: Side | None, install_base, restore_base, *,
                    base_kind: str, guarded: bool, laid: list, report_dir, base_key, alongside=None) -> tuple[list, list, dict]:
    """(findings, fixed, per layout: its cases per operator and the tasks left out)
    of the axis over the (operator, OpInfo, dtype) tasks in `ran`, which `edit` and
    `base` (the contiguous passes: their every failing case, Report.failing) ran;
    `laid`: the edit's (Side, tasks run) per layout of LAYOUTS (layout_passes);
    the base runs the tasks the edit ran in each layout, with `install_base()` once, its
    results kept per base and layout (judge.BASE_RESULTS)."""
    laid_edit = {layout: side for layout, (side, _ran) in zip(LAYOUTS, laid)}
    laid_ran = {layout: layout_ran for layout, (_side, layout_ran) in zip(LAYOUTS, laid)}
    laid_base = run_base_variants(plan, {layout: (_hooks(layout, guarded), set(laid_ran[layout])) for layout in LAYOUTS},
                                  install_base if base is not None else None, restore_base, guarded=guarded,
                                  base_key=base_key, alongside=alongside)
    findings: list = []
    fixed: list = []
    cases: dict = {}
    for layout in LAYOUTS:
        side = laid_edit[layout]
        cases[layout] = {"cases": dict(side.cases), "tasks left out": len(set(ran) - set(laid_ran[layout]))}
        base_side = laid_base.get(layout)
        base_only = failing_ids(base_side, base) if base_side is not None and base is not None else None
        more, gone = compare(side, base_side if base is not None else None, base_kind, only=failing_ids(side, edit),
                             base_only=base_only, clusters=clusterer(side.report, report_dir, _hooks(layout, guarded), layout))
        side.clusters = [f.cluster for f in more]
        findings += more
        fixed += gone
    return findings, fixed, cases


def judge(plan: dict, install_base, restore_base, *, base_kind: str = "", guarded: bool = True, report_dir=None,
          budget: float | None = None, max_details: int = 3, dtypes=None, base_key=None, dim_orders: bool = True,
          alongside=None, axes=(), opinfos=None) -> dict:
    """The edit (installed now) and the base (`install_base()` swaps it in,
    `restore_base()` puts the edit back; None: no base) judged on the same
    tasks; the base runs the tasks the edit ran (those judged before under
    `base_key`, the base's identity, are taken from BASE_RESULTS). An operator the planned samples
    never reach gets derived tasks (a sibling overload's samples). `dim_orders`: the
    dim-order axis too (layout_findings: the same tasks in each dense layout, within
    the budget). Returns edit / base Sides, findings, fixed, tasks left out per operator,
    cases per layout and operator, the cases skipped for size ((operator, pass, case id) -> why). `alongside`: the round's timing, started once the
    edit's tasks are recorded (run_passes). `axes`: more axes run as the dim-order
    one is (numerics_pass.NUMERICS): each gives its edit passes (``passes(plan,
    guarded, deadline)``, run with the contiguous one) and then its findings, fixed
    and cases (``findings``); their cases are under ``axes_cases[axis.name]``.
    `opinfos`: the derived tasks of these OpInfos alone (cases.only_opinfos)."""
    from .cases import only_opinfos
    from .derived import tasks_for as derived_tasks

    TOO_LARGE.clear()
    RECORDER.keep_only(plan)  # this file's operators' recordings (a --watch round's are the last round's)
    # the base's kernel times per case, from an earlier round (--watch): part of each case's limit (the forks inherit them)
    case_clock.know_base(case_clock.base_seconds(r for k, r in BASE_RESULTS.items() if base_key is not None and k[0] == base_key))
    hooks = GUARDED if guarded else None
    deadline = None if budget is None else time.monotonic() + budget
    # with the axis, contiguous tasks start within CONTIGUOUS_SHARE of the budget (all
    # of it that they need: the axis gets the rest)
    axis_passes = [axis.passes(plan, guarded, deadline) for axis in axes]
    contiguous_deadline = None if budget is None else time.monotonic() + budget * (
        CONTIGUOUS_SHARE if dim_orders or any(axis_passes) else 1)
    # the axes' passes run each task right after its contiguous run, in the same
    # task process; their tasks start before the budget's end
    layouts = layout_passes(guarded, deadline) if dim_orders else []
    passes = [Pass("edit", hooks, report_dir, max_details, contiguous_deadline), *layouts,
              *(p for more in axis_passes for p in more)]
    (edit, ran), *laid = run_passes(passes, plan, forked=guarded, alongside=alongside)
    derived_run = {r[0] for r in ran if r[1].startswith("derived:")}
    # an operator whose only cases are generated ones still gets a sibling's samples
    sampled = {c.kernel for c in edit.report.every_case.values() if not c.opinfo.startswith(GENERATED_PREFIX)}
    unreached = {op: derived_tasks(op, dtypes) for op in edit.cases if op not in sampled and op not in derived_run}
    unreached = only_opinfos(unreached, opinfos)
    unreached = {op: tasks for op, tasks in unreached.items() if tasks}
    if unreached:  # OpInfo samples planned for them reach none of their calls: cases derived from a sibling's
        (more, more_ran), *more_laid = run_passes(passes, unreached, forked=guarded, alongside=alongside)
        _merge(edit, more)
        ran += more_ran
        for (side, layout_ran), (more_side, more_layout_ran) in zip(laid, more_laid):
            _merge(side, more_side)
            layout_ran += more_layout_ran
        plan = {**plan, **{op: plan[op] + tasks for op, tasks in unreached.items()}}
    base = None
    if install_base is not None:
        pending = [r for r in ran if base_key is None or (base_key, hooks is not None, *r) not in BASE_RESULTS]
        if pending:
            install_base()
        try:
            base, _ = run_side("base", plan, hooks=hooks, only=set(ran), max_details=max_details, cache_key=base_key,
                               forked=guarded, alongside=polled_only(alongside))
        finally:
            if pending:
                restore_base()
        base.clusters = cl.group(base.report.details)
    findings, fixed = compare(edit, base, base_kind, clusters=clusterer(edit.report, report_dir, hooks))
    edit.clusters = [f.cluster for f in findings]
    stream.STREAM.findings("contiguous cases", findings)
    laid, moved = laid[:len(layouts)], laid[len(layouts):]
    layout_cases: dict = {}
    if dim_orders:
        laid_found, gone, layout_cases = layout_findings(plan, ran, edit, base, install_base, restore_base,
                                                         base_kind=base_kind, guarded=guarded, laid=laid,
                                                         report_dir=report_dir, base_key=base_key, alongside=alongside)
        stream.STREAM.findings("dim-order axis", laid_found)
        findings, fixed = findings + laid_found, fixed + gone
    axes_cases: dict = {}
    for axis, more in zip(axes, axis_passes):
        mine, moved = moved[:len(more)], moved[len(more):]
        found, gone, axes_cases[axis.name] = axis.findings(plan, ran, edit, base, install_base, restore_base,
                                                           base_kind=base_kind, guarded=guarded, moved=mine,
                                                           report_dir=report_dir, base_key=base_key, alongside=alongside)
        stream.STREAM.findings(f"{axis.name} axis", found)
        findings, fixed = findings + found, fixed + gone
    left_out = {op: sum(1 for t in plan[op] if (op, t["opinfo"], t["dtype"]) not in set(ran)) for op in plan}
    return {"edit": edit, "base": base, "findings": findings, "fixed": fixed, "left_out": left_out, "plan": plan,
            "layout_cases": layout_cases, "axes_cases": axes_cases, "too_large": dict(TOO_LARGE)}


__all__ = ["LAYOUTS", "Pass", "clusterer", "judge", "layout_findings", "layout_passes", "polled_only", "prepare",
           "run_base_variants", "run_passes", "run_side", "sources"]
