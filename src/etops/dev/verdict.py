"""The verdict of ``etops dev`` on one pass of the judge against the base's: the
edit's cases matched with the base's one by one on their structured outcomes
(etops.conformance.outcome.change: new, fails otherwise, precision regression, a
numerics difference, also in base, fixed), never by message text, then grouped by
root cause (check's clusters) into Findings, each saying its category (check's,
a crash placed in an argument's guard region being ``memory``), whether the base
shares it, whether it gates, and which side disagrees with the reference.

May import etops.conformance (clusters, gating, outcome, values, sweep's Report).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from ..conformance import clusters as cl
from ..conformance.gating import AGAINST_BASE, DEV_GATING, gates
from ..conformance.outcome import (FIXED, NEW, NUMERICS, OTHER, PRECISION_FACTOR, PRECISION_MIN_ULPS, REGRESSION, SHARED,
                                   UNCHANGED, change, outcome_of, same_failure)
from ..conformance.sweep import Report
from ..conformance.values import PRECISION_REGRESSION

#: finding categories that make the edit fail (exit 1) when the base does not share them
#: (etops.conformance.gating's rule: "unsupported" only when there is a base that passed)
GATING = DEV_GATING
_INPUT_DTYPE = re.compile(r"Tensor\[[^\]]*\]:(\w+)")


def category(cluster) -> str:
    """check's category of a finding, a crash placed in a tensor argument's guard
    region (or caught by etops' canaries) being ``memory``: gating.classify of the
    cases' Outcomes judged against a base, never their messages."""
    return cluster.kind_against(AGAINST_BASE)


def memory_site(cluster) -> str:
    """'write past the end of argument 'out'' for a memory finding (from the first
    of its cases whose fault was placed in an argument), "outside its memory (etops'
    canaries)" for a write the canaries caught, else ''."""
    for case in [cluster.example, *cluster.cases]:
        outcome = getattr(case, "outcome", None)
        if outcome is None or outcome.status != "crash":
            continue
        if outcome.argument is not None and outcome.where is not None:
            return f"{outcome.access or 'access'} {outcome.where} of argument '{outcome.argument}'"
        if outcome.signal == "canary":
            return "write outside its memory (etops' canaries)"
    return ""


def input_dtype(case) -> str:
    """The dtype of the case's first tensor input (the label shown), else the task's."""
    m = _INPUT_DTYPE.search(getattr(case, "inputs", "") or "")
    return m.group(1) if m else case.dtype


@dataclass
class Side:
    """One pass: the Report (check's), its clusters, per operator the cases run and
    the tasks left out (budget)."""

    name: str
    report: Report
    clusters: list = field(default_factory=list)
    cases: dict = field(default_factory=dict)  #: operator -> cases run
    seconds: float = 0.0


@dataclass
class Finding:
    """One root cause of the edit's: check's cluster, its category (memory split
    from crash), whether the base shows it too, and which side disagrees."""

    cluster: Any  #: the check cluster (etops.conformance.clusters)
    category: str
    in_base: bool
    base_kind: str  #: "git", "built-in" or "" (no base: a new operator)

    @property
    def gating(self) -> bool:
        """Whether this finding fails the edit (exit 1): gating.gates."""
        return gates(self.category, self.base_kind, shared=self.in_base)

    def side(self) -> str:
        """Which side disagrees with the reference, in words."""
        ex = self.cluster.example or self.cluster.cases[0]
        who = "the edit and the base" if self.in_base else "the edit" + (" (the base agrees)" if self.base_kind else "")
        if getattr(ex, "base_ulps", None) is not None:  # a precision regression: the three errors
            return (f"the edit off a more precise reference by {ex.ulps:.3g} ulps of its dtype, the base by "
                    f"{ex.base_ulps:.3g}, ATen by {ex.aten_ulps or 0.0:.3g}")
        if self.cluster.kind == "mismatch" and getattr(ex, "ulps", None) is not None and not self.in_base:
            return (f"{who} off a more precise reference by {ex.ulps:.3g} ulps of its dtype, ATen by "
                    f"{ex.aten_ulps or 0.0:.3g}")
        if self.cluster.kind == "mismatch" and getattr(ex, "reference_error", None) is not None:
            return (f"{who} off the float64 reference by {ex.reference_error:.3g}, ATen by "
                    f"{ex.aten_reference_error:.3g}")
        if self.cluster.kind == "mismatch":
            return f"{who} disagrees with ATen"
        return who

    def to_json(self) -> dict:
        return {**self.cluster.to_json(), "category": self.category, "in_base": self.in_base, "gating": self.gating,
                "side": self.side(), "memory": memory_site(self.cluster) or None,
                "input_dtypes": sorted({input_dtype(c) for c in self.cluster.cases})}



def _regression_case(case, before):
    """`case` (the edit's) as the precision regression it is: a mismatch with that
    verdict, its message the three errors."""
    dtype = (case.aten_op and case.dtype) or case.dtype
    message = (f"{case.ulps:.3g} ulps of {dtype} from a more precise reference ({case.reference or 'ATen float64'}); "
               f"the base {before.ulps:.3g} ulps, ATen {case.aten_ulps or 0.0:.3g} ulps: more than "
               f"{PRECISION_FACTOR:g}x both and at least {PRECISION_MIN_ULPS:g} ulp beyond")
    # its message the three errors of the whole case: no one output's, no structural difference
    return dataclasses.replace(case, status="mismatch", verdict=PRECISION_REGRESSION, message=message, base_ulps=before.ulps,
                               outcome=dataclasses.replace(outcome_of(case), status="mismatch", verdict=PRECISION_REGRESSION,
                                                           output=None))


def changes(edit: Side, base: Side | None, only=None) -> dict:
    """Case by case, what the edit did (etops.conformance.outcome.change) to each case
    it ran (`only`: to these case ids): change -> [(the edit's case, the base's or
    None)]. With no base, every failing case is new."""
    base_cases = base.report.every_case if base is not None else {}
    found: dict = {}
    for case_id, case in edit.report.every_case.items():
        if only is not None and case_id not in only:
            continue
        before = base_cases.get(case_id)
        what = change(outcome_of(case), outcome_of(before) if before is not None else None)
        if what != UNCHANGED:
            found.setdefault(what, []).append((case, before))
    return found


def compare(edit: Side, base: Side | None, base_kind: str, *, only=None, base_only=None,
            clusters=None) -> tuple[list[Finding], list]:
    """The edit's findings and the base's findings the edit fixed, decided case by
    case on structured outcomes (``changes``): a case the base passes and the edit
    fails is new whatever its message resembles; a case both fail the same way is
    "also in base"; a case whose error regressed beyond the base's and ATen's is a
    precision regression; a base case the edit passes is fixed. The cases of each
    group are then clustered by root cause for reading (`clusters(cases, first)`:
    the clusterer, cl.group's by default; `first` numbers its reproducers).
    `only` / `base_only`: the edit's / base's case ids to consider (None: all)."""
    def cluster(cases, first=0):
        return (clusters or (lambda c, _first: cl.group(c)))(cases, first) if cases else []

    found = changes(edit, base, only)
    own = [c for what in (NEW, OTHER) for c, _ in found.get(what, ())]
    own += [_regression_case(c, b) for c, b in found.get(REGRESSION, ())]
    listed = [c for c, _ in found.get(NUMERICS, ())]
    shared = [c for c, _ in found.get(SHARED, ())]
    kind = base_kind if base is not None else ""
    findings = [Finding(c, category(c), False, kind) for c in cluster(own + listed)]
    findings += [Finding(c, category(c), True, kind) for c in cluster(shared, len(findings))]
    fixed_cases = [b for c, b in found.get(FIXED, ()) if base_only is None or b.id in base_only]
    return findings, cl.group(fixed_cases)



def failing_ids(laid: Side, contiguous: Side) -> set:
    """The ids of the cases of `laid` (an axis' pass: a layout, a transform) that
    fail, and do not fail the same way contiguous (same_failure of their Outcomes)."""
    ids = set()
    for case_id, case in laid.report.every_case.items():
        outcome = outcome_of(case)
        if not outcome.failed:
            continue
        flat = contiguous.report.every_case.get(case_id)
        if flat is None or not same_failure(outcome, outcome_of(flat)):
            ids.add(case_id)
    return ids


__all__ = ["GATING", "Finding", "Side", "category", "changes", "compare", "failing_ids", "input_dtype", "memory_site",
           "outcome_of"]
