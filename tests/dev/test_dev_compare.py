"""etops.dev.verdict.compare: the edit's cases matched with the base's one by one on
their structured outcomes (etops.conformance.outcome), never by message: a case
the base passes and the edit fails is new whatever its message resembles; "also
in base" is the same case failing the same way; a precision regression is an
error beyond the base's and ATen's; a base finding is "fixed" only when its cases
pass on the edit."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from etops.conformance.case import CaseResult
from etops.conformance.outcome import NEW, NUMERICS, OTHER, REGRESSION, SHARED, Outcome, change
from etops.dev.verdict import Finding, Side, changes, compare


def _case(case_id: str, status: str = "pass", *, message: str = "", dtype: str = "float32", verdict=None, ulps=None,
          aten_ulps=None, digest=None, what=None, inputs="Tensor[3]:float32", **crash):
    kernel, sample = case_id.split("/")
    result = CaseResult(f"aten::{kernel}", kernel, "op", dtype, int(sample), 0, status, message=message, inputs=inputs,
                        verdict=verdict, ulps=ulps, aten_ulps=aten_ulps, max_abs_error=1.0 if status == "mismatch" else None,
                        max_rel_error=1.0 if status == "mismatch" else None)
    if status == "mismatch" and what is None:
        what = "values"
    result.outcome = Outcome(status, verdict, what, ulps, aten_ulps, result.max_abs_error, digest, **crash)
    return result


def _side(name: str, cases: list) -> Side:
    report = SimpleNamespace(every_case={c.id: c for c in cases}, failing={c.id: (c.status, c.verdict) for c in cases if c.status != "pass"})
    return Side(name, report)  # type: ignore[arg-type]


def _summary(findings):
    return sorted((f.cluster.kernel, f.category, f.in_base, f.gating, len(f.cluster.cases)) for f in findings)


def test_a_new_wrong_value_is_new_though_the_base_has_a_finding_worded_the_same():
    """op_abs.cpp returning inf for float inputs above 5: the base already fails
    complex cases with a non-finite mismatch. The float cases the base passes are
    the edit's own, gating, whatever their message; the complex case is also in base."""
    message = "values differ: non-finite where ATen's are finite"
    base = _side("base", [_case("abs/1", "mismatch", message=message, dtype="complex64", verdict="wrong", what="non-finite",
                                digest=7),
                          _case("abs/2"), _case("abs/3")])
    edit = _side("edit", [_case("abs/1", "mismatch", message=message, dtype="complex64", verdict="wrong", what="non-finite",
                                digest=7),
                          _case("abs/2", "mismatch", message=message, verdict="wrong", what="non-finite", digest=8),
                          _case("abs/3", "mismatch", message=message, verdict="wrong", what="non-finite", digest=9)])
    findings, fixed = compare(edit, base, "git")
    assert fixed == []
    assert _summary(findings) == [("aten::abs", "wrong", False, True, 2), ("aten::abs", "wrong", True, False, 1)]


def test_the_same_case_failing_the_same_way_is_shared_whatever_the_message():
    """Matching reads the outcome's fields: a reworded message is still the same
    failure; the same message with another argument is not."""
    crash = {"signal": "SIGSEGV", "argument": "out", "access": "write", "where": "past the end"}
    base = _side("base", [_case("add/1", "crash", message="old words", **crash),
                          _case("add/2", "crash", message="same words", **crash)])
    elsewhere = {**crash, "argument": "self", "access": "read"}
    edit = _side("edit", [_case("add/1", "crash", message="new words", **crash),
                          _case("add/2", "crash", message="same words", **elsewhere)])
    found = changes(edit, base)
    assert {w: [c.id for c, _ in cs] for w, cs in found.items()} == {SHARED: [_case("add/1").id], OTHER: [_case("add/2").id]}
    findings, _ = compare(edit, base, "git")
    assert [(f.category, f.in_base, f.gating) for f in findings] == [("memory", False, True), ("memory", True, False)]


def test_a_refusal_whose_check_moved_lines_is_the_same_failure():
    """An edit that removes lines above a kept check moves its site's line: the same
    refusal (error and file), not a new one; another error is another failure."""
    base = _side("base", [_case("mm/1", "unsupported", error="InvalidArgument", site="op_mm.cpp:42")])
    moved = _side("edit", [_case("mm/1", "unsupported", error="InvalidArgument", site="op_mm.cpp:39")])
    other = _side("edit", [_case("mm/1", "unsupported", error="NotSupported", site="op_mm.cpp:39")])
    assert list(changes(moved, base)) == [SHARED]
    assert list(changes(other, base)) == [OTHER]


def test_a_base_finding_whose_cases_now_crash_is_not_fixed():
    base = _side("base", [_case("add/1", "mismatch", verdict="wrong", digest=1)])
    crashing = _side("edit", [_case("add/1", "crash", signal="SIGSEGV")])
    findings, fixed = compare(crashing, base, "git")
    assert fixed == [] and [(f.category, f.in_base, f.gating) for f in findings] == [("crash", False, True)]
    findings, fixed = compare(_side("edit", [_case("add/1")]), base, "git")
    assert findings == [] and [len(c.cases) for c in fixed] == [1]


def test_a_mismatch_further_off_than_the_base_is_the_edits():
    """Both wrong on one case: a precision regression when the edit's error regressed
    by the rule, another failure when what differs changed (values -> non-finite),
    else the same failure (the case was wrong before the edit)."""
    base = _side("base", [_case("sum/1", "mismatch", verdict="wrong", ulps=40.0, aten_ulps=0.5, digest=1)])
    same = _side("edit", [_case("sum/1", "mismatch", verdict="wrong", ulps=41.0, aten_ulps=0.5, digest=2)])
    worse = _side("edit", [_case("sum/1", "mismatch", verdict="wrong", ulps=400.0, aten_ulps=0.5, digest=3)])
    non_finite = _side("edit", [_case("sum/1", "mismatch", verdict="wrong", what="non-finite", digest=4)])
    assert list(changes(same, base)) == [SHARED]
    assert list(changes(worse, base)) == [REGRESSION]
    assert list(changes(non_finite, base)) == [OTHER]
    ints = _side("base", [_case("sum/2", "mismatch", verdict="wrong", digest=5)])
    assert list(changes(_side("edit", [_case("sum/2", "mismatch", verdict="wrong", digest=6)]), ints)) == [SHARED]


@pytest.mark.parametrize("edit_ulps, base_ulps, aten_ulps, expected", [
    (10.0, 0.0, 0.0, REGRESSION),  # float16 x 0.99: ~10 ulps where the base and ATen are exact
    (1.28, 0.0, 0.0, REGRESSION),  # bfloat16 x 0.99: 1.28 ulps (one bfloat16 step)
    (1.7, 0.5, 0.29, None),  # less than 4x the base's: a rounding, not a regression
    (2.5, 0.5, 0.29, REGRESSION),
    (0.9, 0.0, 0.0, None),  # under one ulp beyond: never a regression
])
def test_a_passing_case_whose_error_regressed_is_a_precision_regression(edit_ulps, base_ulps, aten_ulps, expected):
    edit = Outcome("pass", ulps=edit_ulps, aten_ulps=aten_ulps, digest=1)
    base = Outcome("pass", ulps=base_ulps, aten_ulps=aten_ulps, digest=2)
    assert change(edit, base) == (expected or "unchanged")
    assert change(Outcome("pass", ulps=edit_ulps, aten_ulps=aten_ulps, digest=2), base) == "unchanged"  # the same result


def test_a_precision_regression_gates_and_prints_the_three_errors():
    base = _side("base", [_case("neg/1", dtype="float16", ulps=0.0, aten_ulps=0.0, digest=1)])
    edit = _side("edit", [_case("neg/1", dtype="float16", ulps=10.0, aten_ulps=0.0, digest=2)])
    [finding], fixed = compare(edit, base, "git")
    assert (finding.category, finding.gating, finding.in_base, fixed) == ("precision regression", True, False, [])
    message = finding.cluster.cases[0].message
    assert "10 ulps" in message and "the base 0 ulps" in message and "ATen 0 ulps" in message


def test_a_new_numerics_difference_whose_error_did_not_regress_is_listed_not_gating():
    base = _side("base", [_case("exp/1", dtype="float16", ulps=0.5, aten_ulps=0.5, digest=1)])
    edit = _side("edit", [_case("exp/1", "mismatch", dtype="float16", verdict="within ATen's error", ulps=0.6,
                                aten_ulps=0.5, digest=2)])
    assert list(changes(edit, base)) == [NUMERICS]
    [finding], _ = compare(edit, base, "git")
    assert (finding.category, finding.gating, finding.in_base) == ("within ATen's error", False, False)


def test_without_a_base_every_failing_case_is_new_and_a_refusal_does_not_gate():
    edit = _side("edit", [_case("new/1", "mismatch", verdict="wrong"), _case("new/2", "unsupported", error="InvalidArgument")])
    assert {w for w in changes(edit, None)} == {NEW}
    findings, _ = compare(edit, None, "git")
    assert [(f.category, f.gating) for f in findings] == [("wrong", True), ("unsupported", False)]


def test_only_a_wrong_value_a_crash_an_abort_a_memory_error_or_a_precision_regression_gates():
    """check's classifier decides: precision loss and a difference within ATen's
    own error are listed, never exit 1; a refusal gates only against a base that
    passed (none without a base: a new operator); a mismatch's side names the
    reference when the case has one."""
    ex = SimpleNamespace(reference_error=0.5, aten_reference_error=0.01, ulps=None)
    cluster = SimpleNamespace(kind="mismatch", example=ex, cases=[ex])
    gates = {c: Finding(cluster, c, False, "git").gating
             for c in ("wrong", "memory", "crash", "abort", "precision regression", "precision loss", "within ATen's error",
                       "unsupported")}
    assert gates == {"wrong": True, "memory": True, "crash": True, "abort": True, "precision regression": True,
                     "precision loss": False, "within ATen's error": False, "unsupported": True}
    assert not Finding(cluster, "unsupported", False, "").gating
    assert Finding(cluster, "wrong", False, "git").side() == "the edit (the base agrees) off the float64 reference by 0.5, ATen by 0.01"
