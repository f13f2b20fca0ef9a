"""The rules table's declarations and the one entry per operator they make.

A ``Rule`` is one declaration of a family module (aten.py, prim.py, quantized.py,
llm.py): the operators it applies to (exact names, or ``fnmatch`` patterns such as
``quantized_decomposed::*``) and what it says about them, in named parts
(etops.ops.parts): ``sizing``, ``direct``, ``safety``, ``footprint``, ``judging``,
plus ``torch_checks``. ``OpPolicy`` is the one entry of an operator: every declaration
naming it merged part by part, in table order; ``calls(policy)`` is what a kernel
made with a policy (etops.ops.policy: DIRECT, PROGRAM) runs before each call.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from typing import Any

from ..compare import VALUES
from .parts import Direct, Footprint, Judging, Safety, Sizing
from .policy import DIRECT, CallPolicy, CallRules
from ..errors import refusing


@dataclasses.dataclass(frozen=True)
class Rule:
    """One declaration. `names`: exact operator names or fnmatch patterns;
    `optional`: the optional library the exact names come from (None: every exact
    name must be a registered kernel). The parts (etops.ops.parts): `sizing` (what
    sizes the outs), `direct` (what direct calls do for the user), `safety` (what
    no call may do, whatever its policy), `footprint` (which tensor values decide
    the kernel's footprint, and their checks before every call), `judging` (how
    results are judged). `torch_checks`: guards for what torch's real kernel refuses and its meta kernel
    lets through; they depend on dtypes and shapes only, so they run with torch's
    checks, once per argument signature, for every policy (torch refuses what torch
    refuses)."""

    names: tuple
    sizing: Sizing = Sizing()
    direct: Direct = Direct()
    safety: Safety = Safety()
    footprint: Footprint = Footprint()
    judging: Judging = Judging()
    torch_checks: tuple = ()
    optional: str | None = None

    def __post_init__(self):
        if isinstance(self.names, str) or not self.names:
            raise refusing(TypeError, "names", "Rule: argument 'names' must be a non-empty tuple of operator names or patterns")
        for part, kind in (("sizing", Sizing), ("direct", Direct), ("safety", Safety), ("footprint", Footprint), ("judging", Judging)):
            if type(getattr(self, part)) is not kind:
                raise refusing(TypeError, f"{part}", f"Rule: argument '{part}' must be an etops.ops.parts.{kind.__name__}, got {type(getattr(self, part)).__name__}")
        for f in self.judging.findings:
            if not self.applies_to(f.op):
                raise ValueError(f"Rule: finding for {f.op!r} is not about the rule's operators {self.names}")

    def applies_to(self, name: str) -> bool:
        return any(n == name or (is_pattern(n) and fnmatch.fnmatchcase(name, n)) for n in self.names)


def is_pattern(name: str) -> bool:
    return any(c in name for c in "*?[")


@dataclasses.dataclass(frozen=True)
class OpPolicy:
    """Everything the table says about one operator, in named parts (the default
    entry when no declaration names it: nothing guarded or worked around, no upper
    bound, values compared, no findings). `rules`: the declarations naming it, in
    table order (what a refusal names)."""

    name: str
    sizing: Sizing = Sizing()
    direct: Direct = Direct()
    safety: Safety = Safety()
    footprint: Footprint = Footprint()
    judging: Judging = Judging(compare=VALUES)
    torch_checks: tuple = ()
    rules: tuple = ()
    _calls: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    def calls(self, policy: CallPolicy = DIRECT) -> CallRules:
        """What a kernel of this operator made with `policy` runs before each call
        (made once per policy)."""
        made = self._calls.get(policy)
        if made is None:
            made = self._calls[policy] = policy.calls(self)
        return made

    def check_like_torch(self, bound: dict, info) -> None:
        """Runs the checks torch's real kernel makes and its meta kernel lacks."""
        for check in self.torch_checks:
            check(bound, info)


_SINGLE = {"sizing": ("upper_bound",), "direct": ("no_work",), "safety": ("no_work",), "judging": ("compare", "tolerance", "inputs")}


def merge(name: str, rules) -> OpPolicy:
    """The entry of `name` from every declaration that applies to it, part by part:
    guards, normalizers and findings composed in table order; a value given twice
    differently (an upper bound, a comparison kind, a tolerance, no_work, input
    constraints) is refused."""
    mine = tuple(rule for rule in rules if rule.applies_to(name))
    fields: dict[str, dict[str, Any]] = {part: {} for part in _SINGLE}
    for rule in mine:
        for part, names in _SINGLE.items():
            for field in names:
                value = getattr(getattr(rule, part), field)
                given = fields[part].get(field)
                if value is not None and given is not None and given != value:
                    raise ValueError(f"{name}: two rules give different '{field}' ({given!r}, {value!r})")
                if value is not None:
                    fields[part][field] = value
    given_no_work = [fields[p].get("no_work") for p in ("direct", "safety") if fields[p].get("no_work") is not None]
    if len(given_no_work) == 2 and given_no_work[0] != given_no_work[1]:
        raise ValueError(f"{name}: two rules give different 'no_work' ({given_no_work[0]!r}, {given_no_work[1]!r})")
    sized_from_data = any(rule.sizing.sized_from_data for rule in mine)
    if sized_from_data and fields["sizing"].get("upper_bound") is not None:
        raise ValueError(f"{name}: a rule gives an upper bound and another says the outs are sized from the data")
    wrong_layouts: list = []
    for rule in mine:
        wrong_layouts.extend(f for f in rule.judging.wrong_layouts if f not in wrong_layouts)

    def calls(part, kind):
        parts = [getattr(rule, part) for rule in mine]
        return kind(
            guards=tuple(g for p in parts for g in p.guards), normalize=tuple(n for p in parts for n in p.normalize),
            no_work=fields[part].get("no_work"), contiguous_only=any(p.contiguous_only for p in parts))

    judging = fields["judging"]
    footprints = [rule.footprint for rule in mine if rule.footprint.data_dependent]
    footprint = Footprint(
        tuple(dict.fromkeys(a for f in footprints for a in f.arguments)), tuple(c for f in footprints for c in f.checks),
        "; ".join(f.bounded for f in footprints if f.bounded) or None)
    return OpPolicy(
        name,
        sizing=Sizing(fields["sizing"].get("upper_bound"), sized_from_data),
        direct=calls("direct", Direct),
        safety=calls("safety", Safety),
        footprint=footprint,
        judging=Judging(judging.get("compare") or VALUES, judging.get("tolerance"), tuple(wrong_layouts),
                        tuple(f for rule in mine for f in rule.judging.findings if f.op == name), judging.get("inputs")),
        torch_checks=tuple(c for rule in mine for c in rule.torch_checks),
        rules=mine,
    )
