"""The numerics axis of ``etops dev``: for the operators that accumulate
(``accumulates``: reductions, scans, softmaxes, normalizations, matmul-like
products), the tasks the edit ran contiguous run again under each transform of
``etops check --numerics-axis`` (etops.conformance.numerics: offset, cancel, huge,
tiny, long; ATen and the kernel on the same new values, guarded as the contiguous
pass is), on the edit and then on the base, and the two compared as the dim-order
layouts are (judge.layout_findings): the transformed cases that pass, and those
that fail and do not fail the same way contiguous, are matched with the base's one by
one (verdict.compare): a finding of that transform (``numerics:<transform>`` in its key
and JSON), gating unless the base fails those cases the same way; a precision
regression on the new values gates too.

Unlike check's axis (float32 and float64 only), dev's runs at every dtype the edit
ran: float16 and bfloat16 (an accumulator of the input's own type loses what
ATen's float accumulator keeps), and the integer dtypes, whose inputs move too when
a call has no floating tensor (``Transform(name, integers=True)``): an int16
accumulator overflows on values of max(int16) / 8 where ATen's int64 one does not.

Which tasks: of each accumulating operator, those of the OpInfos named after it and
of its reference (numerics_tasks; all its tasks when it has none). Budget: the
edit's transforms run in the same task process right after the task's contiguous
run (passes of judge.run_passes, one per transform, limited to those tasks), like
the dim-order layouts: with either axis the
contiguous tasks start within judge.CONTIGUOUS_SHARE (60%) of the budget, and the
axes' passes of a task started may start until the budget's end (the axes share
the last 40% at least). The base runs the transformed tasks the edit ran, its
results kept per base and transform (judge.BASE_RESULTS) for ``--watch``.

May import: torch, etops.conformance (numerics, hooks, references) and
etops.dev (judge, cases, derived).
"""

from __future__ import annotations

import functools

from ..conformance.hooks import with_guard
from ..conformance.numerics import AXIS_MAX_DETAILS, TRANSFORMS, WITH_INTEGERS, layout_name
from ..conformance.generated import TASK_PREFIX as GENERATED_PREFIX
from ..conformance.references.spec import TASK_PREFIX as REFERENCE_PREFIX
from .judge import Pass, clusterer, run_base_variants
from .verdict import compare, failing_ids

#: the families of accumulating operators no torch tag marks (torch tags only the
#: plain reductions, ``Tag.reduction``: sum, mean, prod, var, amax, argmax, any, ...),
#: by the base name of the operator (``aten::cumsum.out`` -> ``cumsum``)
ACCUMULATING = frozenset({
    "cumsum", "cumprod",  # scans
    "_softmax", "_log_softmax", "logsumexp",  # softmaxes
    "native_layer_norm", "native_group_norm", "native_batch_norm", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "var_mean", "std", "std_mean", "linalg_vector_norm",  # normalizations, moments
    "mm", "bmm", "addmm", "baddbmm", "linear", "matmul", "dot", "mv", "convolution",  # matmul-like products
    "_cdist_forward", "_pdist_forward", "avg_pool2d", "_adaptive_avg_pool2d",  # sums over windows, distances
    "mixed_mm", "mixed_linear",  # quantized_decomposed's products
})
#: the transforms dev runs, in order (check's axis: every one)
NUMERICS_TRANSFORMS = tuple(TRANSFORMS)


def _tagged_reduction(namespace: str, base: str, overload: str) -> bool:
    """Whether torch tags the overload ``namespace::base.overload`` a reduction (False when torch has no such overload)."""
    import torch

    try:
        op = getattr(getattr(getattr(torch.ops, namespace), base), overload or "default")
    except (AttributeError, RuntimeError):
        return False
    return torch.Tag.reduction in getattr(op, "tags", ())


@functools.lru_cache(maxsize=None)
def accumulates(op: str) -> bool:
    """Whether operator `op` (``aten::sum.IntList_out``) accumulates, so the numerics
    axis runs on it: torch tags its overload ``Tag.reduction`` (derived from
    ATen's native_functions.yaml), or its base name is one of ACCUMULATING (the
    families torch tags nowhere: scans, softmaxes, normalizations, products)."""
    if not isinstance(op, str) or "::" not in op:
        raise TypeError(f"accumulates: argument 'op' must be an operator name such as 'aten::sum.IntList_out', got {op!r}")
    namespace, _, name = op.partition("::")
    base, _, overload = name.partition(".")
    return base in ACCUMULATING or _tagged_reduction(namespace, base, overload)


def numerics_operators(plan: dict) -> frozenset:
    """The operators of `plan` (operator -> tasks) the numerics axis runs on."""
    return frozenset(op for op in plan if accumulates(op))


def numerics_tasks(plan: dict) -> frozenset:
    """The (operator, task id) pairs of `plan` the axis transforms: of each
    accumulating operator, the tasks of the OpInfos named after it
    (cases.named_opinfos) and of its reference, when it has any; else all its
    tasks (derived tasks, made once the judge finds an operator unreached, are
    not transformed; nor are generated cases, whose value classes are the axis' own
    huge, tiny and overflowing values). The transforms move values, not shapes: the named OpInfo's
    samples give the operator's own arguments (dims, keepdim, dtype) at every dtype,
    where the other OpInfos reach it as a step of a composite on much the same
    shapes (sum has 33 OpInfos; the axis on all of them took its judge from 17 s to
    202 s, docs/dev.md)."""
    from .cases import named_opinfos
    from .derived import DERIVED_PREFIX

    chosen = set()
    for op in numerics_operators(plan):
        ids = {t["opinfo"] for t in plan[op] if not t["opinfo"].startswith((DERIVED_PREFIX, GENERATED_PREFIX))}
        own = (named_opinfos(op) & ids) | {i for i in ids if i.startswith(REFERENCE_PREFIX)}
        chosen |= {(op, i) for i in (own or ids)}
    return frozenset(chosen)


def _hooks(transform: str, guarded: bool):
    spec = WITH_INTEGERS[transform]
    return with_guard(spec) if guarded else spec


class NumericsPass:
    """The numerics axis as judge.judge runs an axis (its ``axes``): the edit's
    passes (``passes``), run with the contiguous one, then the base's and the
    comparison (``findings``). ``name``: the key of its cases in the judgement."""

    name = "numerics"

    def passes(self, plan: dict, guarded: bool, deadline) -> list:
        """The edit's passes, one per transform of NUMERICS_TRANSFORMS, each running
        only the accumulating operators' chosen tasks (numerics_tasks; run with its contiguous pass,
        judge.run_passes): none of their tasks starts after `deadline`. None when
        no operator of `plan` accumulates."""
        tasks = numerics_tasks(plan)
        if not tasks:
            return []
        return [Pass(f"edit, {layout_name(t)}", _hooks(t, guarded), None, AXIS_MAX_DETAILS, deadline, tasks)
                for t in NUMERICS_TRANSFORMS]

    def findings(self, plan: dict, ran: list, edit, base, install_base, restore_base, *, base_kind: str, guarded: bool,
                 moved: list, report_dir, base_key, alongside=None) -> tuple[list, list, dict]:
        """(findings, fixed, per transform: its cases per operator and the tasks left
        out) over the accumulating operators' tasks in `ran` ((operator, OpInfo,
        dtype), which `edit` and `base`, the contiguous Sides, ran); `moved`: the
        edit's (Side, tasks run) per pass of ``passes`` (empty: none ran). The base
        runs the tasks the edit ran under each transform, `install_base()` once."""
        if not moved:
            return [], [], {}
        operators, tasks = numerics_operators(plan), numerics_tasks(plan)
        eligible = {r for r in ran if (r[0], r[1]) in tasks}
        moved_ran = {t: set(t_ran) for t, (_side, t_ran) in zip(NUMERICS_TRANSFORMS, moved)}
        by_name = run_base_variants(plan, {layout_name(t): (_hooks(t, guarded), moved_ran[t]) for t in NUMERICS_TRANSFORMS},
                                    install_base if base is not None else None, restore_base, guarded=guarded,
                                    base_key=base_key, alongside=alongside)
        moved_base = {t: by_name[layout_name(t)] for t in NUMERICS_TRANSFORMS if layout_name(t) in by_name}
        findings: list = []
        fixed: list = []
        cases: dict = {}
        for t, (side, _tasks) in zip(NUMERICS_TRANSFORMS, moved):
            cases[t] = {"cases": {op: n for op, n in side.cases.items() if op in operators},
                        "tasks left out": len(eligible - moved_ran[t])}
            base_side = moved_base.get(t)
            base_only = failing_ids(base_side, base) if base_side is not None and base is not None else None
            more, gone = compare(side, base_side if base is not None else None, base_kind, only=_judged_ids(side, edit),
                                 base_only=base_only, clusters=clusterer(side.report, report_dir, _hooks(t, guarded),
                                                                         layout_name(t), preserve=False))
            side.clusters = [f.cluster for f in more]
            findings += more
            fixed += gone
        return findings, fixed, cases


def _judged_ids(moved, contiguous) -> set:
    """The ids of the transformed cases matched with the base's (verdict.compare): those
    that pass (an error regressed beyond the base's and ATen's on the new values is
    a precision regression) and those that fail and do not fail the same way as they
    are (verdict.failing_ids)."""
    passing = {i for i, c in moved.report.every_case.items() if c.status == "pass"}
    return passing | failing_ids(moved, contiguous)


#: the axis judge.judge runs when given it (etops dev's default; --no-numerics leaves it out)
NUMERICS = NumericsPass()

__all__ = ["ACCUMULATING", "NUMERICS", "NUMERICS_TRANSFORMS", "NumericsPass", "accumulates", "numerics_operators",
           "numerics_tasks"]
