"""etops.dev.judge.compare: a base finding is "fixed" only when none of its cases
fails on the edit in any way (a mismatch that now crashes is not fixed: the crash
is a new finding)."""

from __future__ import annotations

from types import SimpleNamespace

from etops.dev.judge import Side, compare


def _case(case_id: str, status: str):
    return SimpleNamespace(id=case_id, status=status, message="")


def _cluster(key: str, kind: str, cases: list):
    return SimpleNamespace(key=key, kind=kind, category={"crash": "crash", "mismatch": "wrong"}[kind],
                           example=cases[0], cases=cases)


def _side(name: str, clusters: list) -> Side:
    failing = {c.id: (c.status, None) for cluster in clusters for c in cluster.cases}
    return Side(name, SimpleNamespace(failing=failing), clusters=clusters)


def test_a_base_finding_whose_cases_now_crash_is_not_fixed():
    base = _side("base", [_cluster("wrong-add", "mismatch", [_case("add/1", "mismatch")])])
    crashing = _side("edit", [_cluster("crash-add", "crash", [_case("add/1", "crash")])])
    findings, fixed = compare(crashing, base, "git")
    assert fixed == [] and [(f.in_base, f.gating) for f in findings] == [(False, True)]  # the crash is the edit's own
    passing = _side("edit", [])
    findings, fixed = compare(passing, base, "git")
    assert findings == [] and [c.key for c in fixed] == ["wrong-add"]


def test_a_finding_the_base_shares_is_listed_apart_and_does_not_gate():
    """A finding of the edit whose root cause (cluster key) or cases the base shows
    too is "also in base": listed apart, never a reason for exit 1."""
    shared = [_cluster("wrong-add", "mismatch", [_case("add/1", "mismatch")])]
    own = _cluster("crash-mul", "crash", [_case("mul/1", "crash")])
    findings, fixed = compare(_side("edit", [*shared, own]), _side("base", shared), "git")
    assert fixed == []
    assert [(f.cluster.key, f.in_base, f.gating) for f in findings] == [("wrong-add", True, False),
                                                                     ("crash-mul", False, True)]
    by_case = _side("base", [_cluster("other-key", "mismatch", [_case("add/1", "mismatch")])])
    [f] = compare(_side("edit", shared), by_case, "git")[0]
    assert f.in_base and not f.gating  # the same case failing the same way on the base
