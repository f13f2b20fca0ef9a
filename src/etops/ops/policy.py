"""Call policies: what a kernel object does before the kernel runs, given when the
callable is built (etops.kernel.make_kernel).

- ``DIRECT``: etops' direct calls (``etops.registry().aten.add.out(...)``): the
  operator's ``direct`` and ``safety`` parts, guards and workarounds alike;
- ``PROGRAM``: the kernel as an exported program calls it (``etops.as_program``,
  what the judges call): only the ``safety`` part, and only as refusals (its
  workarounds become refusals: a workaround's result would read as the kernel's
  pass), so the verdict is the kernel's own.

``CallRules`` is what one operator's kernel runs under one policy; its guards'
refusals raise ``etops.errors.GuardRefusal`` carrying the declaration and the
finding that refused. Torch's checks (an entry's ``torch_checks``, and its
``footprint`` checks of the tensor values its footprint depends on, which run
before every call) are not a policy's: every kernel gets them. Imports torch, the standard library and
etops.errors only; entries are duck-typed (etops.ops.rules.OpPolicy).
"""

from __future__ import annotations

import torch

from ..errors import GuardRefusal, refusal_type, refusing


class CallRules:
    """The guards and workarounds a kernel of operator `op` made with `policy` runs
    before each call: `guards` ((guard, declaration) pairs, in table order),
    `normalize`, `no_work`, `contiguous_only` (etops.ops.parts), and
    `footprint`: the entry's checks of the tensor values its footprint depends on
    (every policy's)."""

    __slots__ = ("op", "policy", "guards", "normalize", "no_work", "contiguous_only", "footprint", "footprint_in_python", "_findings")

    def __init__(self, op: str, policy: CallPolicy, guards=(), normalize=(), no_work=None, contiguous_only=False, findings=(),
                 footprint=()):
        self.op, self.policy = op, policy
        self.guards, self.normalize, self.no_work, self.contiguous_only = tuple(guards), tuple(normalize), no_work, contiguous_only
        self.footprint = tuple(footprint)
        #: the footprint checks the precheck runs (the others, index checks, run in C)
        self.footprint_in_python = tuple(check for check in self.footprint if not hasattr(check, "index_range"))
        self._findings = tuple(findings)

    def __repr__(self) -> str:
        return f"<CallRules {self.op} {self.policy.name}: {len(self.guards)} guards, {len(self.normalize)} normalizers>"

    @property
    def has_guards(self) -> bool:
        return bool(self.guards)

    @property
    def has_precheck(self) -> bool:
        """Whether every call goes through the slow path's precheck first."""
        return bool(self.guards or self.normalize or self.no_work or self.footprint_in_python)

    @property
    def index_ranges(self) -> tuple:
        """The (index, source, dim) of the footprint checks the C call path makes
        itself (etops.ops.footprints.indices_in_dim; kernel_footprint.c)."""
        return tuple(check.index_range for check in self.footprint if hasattr(check, "index_range"))

    def check_footprint(self, bound: dict, info, every: bool = False) -> None:
        """Runs the footprint checks (etops.ops.footprints) the precheck runs, or
        `every` one (the C path found an index out of range: the refusal's words):
        torch's refusal of a value the kernel's footprint depends on raises
        ValueError naming the argument, as torch's other checks do."""
        for check in self.footprint if every else self.footprint_in_python:
            check(bound, info)

    def normalized(self, bound: dict, info) -> dict | None:
        """The bound arguments with every normalizer's rewrite applied, or None when
        none applies (the call goes on as it is)."""
        changed: dict = {}
        for normalizer in self.normalize:
            rewrite = normalizer({**bound, **changed}, info)
            if rewrite:
                changed.update(rewrite)
        return {**bound, **changed} if changed else None

    def nothing_to_compute(self, bound: dict) -> bool:
        """Whether the call has nothing to compute (its outs are only sized)."""
        return self.no_work is not None and bool(self.no_work(bound))

    def check(self, bound: dict, info) -> None:
        """Runs every guard in order; the first refusal raises a GuardRefusal (of the
        guard's exception type too) naming the argument, the declaration and the
        known finding."""
        for guard, rule in self.guards:
            try:
                guard(bound, info)
            except (ValueError, TypeError, IndexError, ZeroDivisionError) as exc:
                refusal = self.refusal(exc, guard, rule)
                if refusal is None:
                    raise
                try:
                    raise refusal.with_traceback(exc.__traceback__) from None
                finally:
                    del refusal  # the traceback holds this frame: no cycle keeping the arguments alive

    def refusal(self, exc: BaseException, guard, rule) -> GuardRefusal | None:
        """The GuardRefusal standing for `exc`, raised by `guard` of declaration
        `rule`; None when `exc` is no refusal (already one, or a guard's failure)."""
        kind = refusal_type(exc)
        if kind is None:
            return None
        message = str(exc)
        argument = getattr(exc, "argument", None)  # the guard's (etops.errors.refusing), never its words
        own = getattr(getattr(rule, "judging", None), "findings", None) or ()
        finding = next((f for f in [*own, *self._findings] if f.argument == argument and not f.computes), None)
        return kind(message, self.op, argument=argument, rule=rule, guard=guard, finding=finding, policy=self.policy.name)


class CallPolicy:
    """How a kernel object is made (``DIRECT`` or ``PROGRAM``): `works_around`
    says whether its calls get the workarounds of the table (else the safety
    part's become refusals and the direct part is left out)."""

    __slots__ = ("name", "works_around")

    def __init__(self, name: str, works_around: bool):
        self.name, self.works_around = name, works_around

    def __repr__(self) -> str:
        return f"etops.ops.{self.name.upper()}"

    def __reduce__(self):
        return (_policy_named, (self.name,))

    def calls(self, entry) -> CallRules:
        """What a kernel of `entry`'s operator made with this policy runs before each
        call (entry: etops.ops.rules.OpPolicy)."""
        guards: list = []
        findings = entry.judging.findings
        if self.works_around:
            for rule in entry.rules:
                guards.extend((g, rule) for g in rule.safety.guards + rule.direct.guards)
            return CallRules(entry.name, self, guards, entry.safety.normalize + entry.direct.normalize,
                             entry.direct.no_work or entry.safety.no_work, entry.direct.contiguous_only or entry.safety.contiguous_only,
                             findings, entry.footprint.checks)
        for rule in entry.rules:  # refused, never worked around: a workaround's pass is not the kernel's
            guards.extend((g, rule) for g in rule.safety.guards)
            if rule.safety.works_around:
                guards.append((refuse_workarounds(rule), rule))
        return CallRules(entry.name, self, guards, findings=findings, footprint=entry.footprint.checks)


#: etops' direct calls: the direct and safety parts, workarounds applied
DIRECT = CallPolicy("direct", works_around=True)
#: the kernel as an exported program calls it (the judge's): the safety part's refusals only
PROGRAM = CallPolicy("program", works_around=False)


def _policy_named(name: str) -> CallPolicy:
    return {"direct": DIRECT, "program": PROGRAM}[name]


def refuse_workarounds(rule):
    """The PROGRAM guard of a declaration whose safety part works around: raises
    ValueError, naming the rule's finding, on a call its normalizers would rewrite,
    its no_work would skip or (contiguous_only) with a tensor that is not contiguous.
    On such calls the kernel corrupts memory or dies by a signal, so it is not
    called; and a workaround's result would read as the kernel's pass."""
    finding = rule.judging.findings[0] if rule.judging.findings else None
    what = finding.summary if finding is not None else f"{', '.join(rule.names)} mishandles such calls"
    argument = f"argument '{finding.argument}': " if finding is not None else ""

    def refuse_workarounds(bound, info):
        kind = workaround_kind(rule.safety, bound, info)
        if kind is not None:
            named = rule.judging.findings[0].argument if rule.judging.findings else None  # read from `rule`: the guard closes over nothing new (its description in reports stays)
            raise refusing(ValueError, named, f"{info.name}: {argument}not called as a program calls it: {what}; {_WHY_REFUSED[kind]}")

    return refuse_workarounds


_WHY_REFUSED = {
    "no_work": "etops' direct calls skip the kernel (nothing to compute)",
    "normalize": "etops' direct calls rewrite the arguments",
    "contiguous": "a tensor is not contiguous; etops' direct calls pass a contiguous copy",
}


def workaround_kind(calls, bound: dict, info, tensors: bool = True) -> str | None:
    """Which workaround of `calls` (a part, or a CallRules) a call with these
    arguments gets: "no_work" (the kernel is skipped), "normalize" (a normalizer
    rewrites them), "contiguous" (contiguous_only; with `tensors`, only when a
    tensor is not contiguous) or None."""
    if calls.no_work is not None and calls.no_work(bound):
        return "no_work"
    if any(normalizer(bound, info) for normalizer in calls.normalize):
        return "normalize"
    if calls.contiguous_only and (not tensors or any(_not_contiguous(v) for v in bound.values())):
        return "contiguous"
    return None


def _not_contiguous(value) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_not_contiguous(v) for v in value)
    return isinstance(value, torch.Tensor) and not value.is_contiguous()


def workaround_note(entry, bound: dict, info) -> str | None:
    """What a kernel made with DIRECT does about a call with these arguments that
    one made with PROGRAM does not (a guard's refusal naming the argument, a
    normalizer's rewrite, a call with nothing to compute skipped, contiguous
    copies), worded for a report; None when it does the same. A note beside a
    verdict: the verdict itself is PROGRAM's."""
    direct = entry.calls(DIRECT)
    try:
        kind = workaround_kind(direct, bound, info, tensors=False)
        if kind == "normalize":
            return "etops' direct calls work around this (a normalizer rewrites the arguments)"
        if kind == "no_work":
            return "etops' direct calls work around this (nothing to compute: the kernel is not called)"
        direct.check(bound, info)
    except GuardRefusal as exc:  # a guard's refusal is the workaround
        return f"etops' direct calls refuse this naming the argument ({exc})"
    except Exception as exc:  # noqa: BLE001 - a guard's or normalizer's own failure, said as one (a note, not a verdict)
        return f"etops' direct calls fail in a workaround's own check ({type(exc).__name__}: {exc})"
    if kind == "contiguous":
        return "etops' direct calls work around this (every tensor reaches the kernel contiguous)"
    return None
