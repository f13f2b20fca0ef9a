"""The record types of the per-operator rules table and its merge.

A ``Rule`` is one entry of a family module (aten.py, prim.py, quantized.py): the
operators it applies to (exact names, or ``fnmatch`` patterns such as
``quantized_decomposed::*``) and what it says about them. ``OpRules`` is the merged
record of one operator: the guards and torch checks of every entry naming it, in table order, and
its out upper bound, comparison kind and known findings.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from typing import Any, Callable

import torch

from ..compare import KINDS, VALUES

#: a guard: guard(bound arguments, KernelInfo) raises naming the argument, or returns
Guard = Callable[[dict, object], None]


@dataclasses.dataclass(frozen=True)
class Finding:
    """A known ExecuTorch abort the guards turn into an exception naming
    `argument` (or, `computes`, one the normalizers turn into a call that computes
    torch's result): a summary fit for an upstream report, a reproducer (a fuzz
    case, pure data: etops.fuzz's worker builds it) and the abort it replaces."""

    op: str
    summary: str
    argument: str
    case: dict
    abort: str
    computes: bool = False


#: the layouts the rules table records kernels as silently wrong on: channels-last
#: (rank 4/5, as programs give them: direct calls pass them as they are) and
#: permuted (any other non-contiguous dim order: etops copies those to contiguous
#: unless etops.layout("preserve"))
WRONG_LAYOUTS = ("channels-last", "permuted")


@dataclasses.dataclass(frozen=True)
class LayoutFinding:
    """A kernel computing wrong values, with no error, on inputs in `layout` (one
    of WRONG_LAYOUTS), as etops' dim-order axis (``etops check --dim-order-axis``,
    ``make conformance-dim-orders``) found it: `found` says how (fit for a warning)."""

    layout: str
    found: str

    def __post_init__(self):
        if self.layout not in WRONG_LAYOUTS:
            raise ValueError(f"LayoutFinding: argument 'layout' is {self.layout!r}; one of {WRONG_LAYOUTS}")


@dataclasses.dataclass(frozen=True)
class Rule:
    """One table entry. `names`: exact operator names or fnmatch patterns;
    `optional`: the optional library the exact names come from (None: every exact
    name must be a registered kernel); `sized_from_data`: the out shapes depend on
    the input values and have no upper bound, so once torch's fake kernel reports
    that (a data-dependent-shape exception) ATen's functional runs on the real
    inputs to size them. No other operator ever runs ATen to size its outs.
    `torch_checks`: guards for what torch's real kernel refuses and its meta kernel
    lets through; they depend on dtypes and shapes only, so they run with torch's
    checks, once per argument signature (guards run before every call).
    `normalize`: normalizers (etops.ops.normalizers) rewriting arguments torch
    accepts into the equivalent form the kernel handles, before the guards.
    `no_work(bound) -> bool`: the call has nothing to compute (an empty input the
    kernel mishandles): its outs are sized as torch sizes them, the kernel is not
    called. `contiguous_only`: the kernel mishandles every dim order but the
    contiguous one (channels-last included, which programs do give it): every
    tensor reaches it as a contiguous copy, even under etops.layout("preserve").
    `wrong_layouts`: LayoutFindings, the layouts on which the kernel is known to
    compute wrong values silently; a direct call passing such a tensor as it is
    warns once per kernel and layout (unless the user opted in with
    etops.layout("preserve")), and explain says it.
    `memory`: what the rule keeps from the kernel corrupts memory or kills the
    process by a signal (not an ExecuTorch abort, which etops unwinds): its guards and
    workarounds stay in force for the kernel as a program calls it (``as_program``,
    the judge's view); the other rules' guards, normalizers, no_work and
    contiguous_only do not apply there."""

    names: tuple
    guards: tuple = ()
    torch_checks: tuple = ()
    normalize: tuple = ()
    no_work: Callable | None = None
    contiguous_only: bool = False
    upper_bound: Callable | None = None
    sized_from_data: bool = False
    compare: str | None = None
    tolerance: tuple | None = None
    findings: tuple = ()
    optional: str | None = None
    wrong_layouts: tuple = ()
    memory: bool = False

    def __post_init__(self):
        if isinstance(self.names, str) or not self.names:
            raise TypeError("Rule: argument 'names' must be a non-empty tuple of operator names or patterns")
        if self.compare is not None and self.compare not in KINDS:
            raise ValueError(f"Rule: argument 'compare' is {self.compare!r}; one of {KINDS}")
        if self.tolerance is not None and not (
            isinstance(self.tolerance, tuple) and len(self.tolerance) == 2
            and all(isinstance(t, (int, float)) and not isinstance(t, bool) and t >= 0 for t in self.tolerance)
        ):
            raise ValueError(f"Rule: argument 'tolerance' must be (rtol, atol), two numbers >= 0, got {self.tolerance!r}")
        for f in self.findings:
            if not self.applies_to(f.op):
                raise ValueError(f"Rule: finding for {f.op!r} is not about the rule's operators {self.names}")

    def applies_to(self, name: str) -> bool:
        return any(n == name or (is_pattern(n) and fnmatch.fnmatchcase(name, n)) for n in self.names)


def is_pattern(name: str) -> bool:
    return any(c in name for c in "*?[")


@dataclasses.dataclass(frozen=True)
class OpRules:
    """Everything the table says about one operator (the default record when no
    entry names it: no guards, no upper bound, values compared, no findings)."""

    name: str
    guards: tuple = ()
    torch_checks: tuple = ()
    normalize: tuple = ()
    no_work: Callable | None = None
    contiguous_only: bool = False
    upper_bound: Callable | None = None
    sized_from_data: bool = False
    compare: str = VALUES
    tolerance: tuple | None = None  #: (rtol, atol) every comparison of its results uses, or None
    findings: tuple = ()
    wrong_layouts: tuple = ()  #: LayoutFindings: layouts the kernel is silently wrong on

    def wrong_on(self, layout: str):
        """The LayoutFinding of `layout` (a WRONG_LAYOUTS name), or None."""
        return next((f for f in self.wrong_layouts if f.layout == layout), None)

    @property
    def has_guards(self) -> bool:
        return bool(self.guards)

    @property
    def has_precheck(self) -> bool:
        """Whether every call goes through the slow path's precheck first."""
        return bool(self.guards or self.normalize or self.no_work)

    def normalized(self, bound: dict, info) -> dict | None:
        """The bound arguments with every normalizer's rewrite applied, or None when
        none applies (the call goes on as it is)."""
        changed: dict[str, Any] = {}
        for normalizer in self.normalize:
            rewrite = normalizer({**bound, **changed}, info)
            if rewrite:
                changed.update(rewrite)
        return {**bound, **changed} if changed else None

    def tolerance_of(self, policy):
        """`policy` (an etops.compare Tolerance) with this operator's (rtol, atol)
        override, or `policy` itself when the operator has none or the policy is
        already overridden (a user's explicit rtol/atol wins)."""
        if self.tolerance is None or policy.overridden:
            return policy
        return policy.override(*self.tolerance)

    def check(self, bound: dict, info) -> None:
        """Runs every guard in order; the first refusal raises, naming the argument."""
        for guard in self.guards:
            guard(bound, info)

    def check_like_torch(self, bound: dict, info) -> None:
        """Runs the checks torch's real kernel makes and its meta kernel lacks."""
        for check in self.torch_checks:
            check(bound, info)


def refuse_workarounds(rule: Rule) -> Guard:
    """The judge's guard for a `memory` rule's workarounds: raises ValueError, naming
    the rule's finding, on a call its normalizers would rewrite, its no_work would
    skip or (contiguous_only) with a tensor that is not contiguous. On such calls the
    kernel corrupts memory or dies by a signal, so it is not called; and a workaround's
    result would read as the kernel's pass."""
    finding = rule.findings[0] if rule.findings else None
    what = finding.summary if finding is not None else f"{', '.join(rule.names)} mishandles such calls"
    argument = f"argument '{finding.argument}': " if finding is not None else ""

    def refuse_workarounds(bound, info):
        kind = workaround_kind(rule, bound, info)
        if kind is not None:
            raise ValueError(f"{info.name}: {argument}not called as a program calls it: {what}; {_WHY_REFUSED[kind]}")

    return refuse_workarounds


_WHY_REFUSED = {
    "no_work": "etops' direct calls skip the kernel (nothing to compute)",
    "normalize": "etops' direct calls rewrite the arguments",
    "contiguous": "a tensor is not contiguous; etops' direct calls pass a contiguous copy",
}


def workaround_kind(record, bound: dict, info, tensors: bool = True) -> str | None:
    """Which workaround of `record` (a Rule or an OpRules) a direct call with these
    arguments gets: "no_work" (the kernel is skipped), "normalize" (a normalizer
    rewrites them), "contiguous" (contiguous_only; with `tensors`, only when a tensor
    is not contiguous) or None."""
    if record.no_work is not None and record.no_work(bound):
        return "no_work"
    if any(normalizer(bound, info) for normalizer in record.normalize):
        return "normalize"
    if record.contiguous_only and (not tensors or any(_not_contiguous(v) for v in bound.values())):
        return "contiguous"
    return None


def _not_contiguous(value) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_not_contiguous(v) for v in value)
    return isinstance(value, torch.Tensor) and not value.is_contiguous()


def merge(name: str, rules, program: bool = False) -> OpRules:
    """The record of `name` from every rule that applies to it: guards composed in
    order; an upper bound or comparison kind given twice differently is refused.
    With `program` (the kernel as an exported program calls it), only the rules
    marked `memory` contribute, and only refusals: their guards, and for their
    normalizers, no_work and contiguous_only a guard refusing what those would
    rewrite (refuse_workarounds); nothing is worked around."""
    guards: list[Any] = []
    torch_checks: list[Any] = []
    normalize: list[Any] = []
    findings: list[Any] = []
    wrong_layouts: list[Any] = []
    single = {"upper_bound": None, "compare": None, "tolerance": None, "no_work": None}
    sized_from_data = contiguous_only = False
    for rule in rules:
        if not rule.applies_to(name):
            continue
        torch_checks.extend(rule.torch_checks)
        if not program:
            guards.extend(rule.guards)
            normalize.extend(rule.normalize)
            contiguous_only = contiguous_only or rule.contiguous_only
        elif rule.memory:  # refused, never worked around: a workaround's pass is not the kernel's
            guards.extend(rule.guards)
            if rule.normalize or rule.no_work is not None or rule.contiguous_only:
                guards.append(refuse_workarounds(rule))
        sized_from_data = sized_from_data or rule.sized_from_data
        findings.extend(f for f in rule.findings if f.op == name)
        wrong_layouts.extend(f for f in rule.wrong_layouts if f not in wrong_layouts)
        for field in single:
            value = getattr(rule, field)
            if field == "no_work" and program:
                continue
            if value is not None and single[field] is not None and single[field] != value:
                raise ValueError(f"{name}: two rules give different '{field}' ({single[field]!r}, {value!r})")
            if value is not None:
                single[field] = value
    if sized_from_data and single["upper_bound"] is not None:
        raise ValueError(f"{name}: a rule gives an upper bound and another says the outs are sized from the data")
    return OpRules(name, tuple(guards), tuple(torch_checks), tuple(normalize), single["no_work"], contiguous_only, single["upper_bound"], sized_from_data, single["compare"] or VALUES,
                   single["tolerance"], tuple(findings), tuple(wrong_layouts))
