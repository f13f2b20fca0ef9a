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


def test_only_a_wrong_value_a_crash_an_abort_or_a_memory_error_gates_not_a_numerics_verdict():
    """check's classifier decides: precision loss and a difference within ATen's
    own error are listed, never exit 1; a refusal gates only against a base that
    passed (none without a base: a new operator); a mismatch's side names the
    float64 reference when the case has one."""
    from etops.dev.judge import Finding

    ex = SimpleNamespace(reference_error=0.5, aten_reference_error=0.01)
    cluster = SimpleNamespace(kind="mismatch", example=ex, cases=[ex])
    gates = {c: Finding(cluster, c, False, "git").gating
             for c in ("wrong", "memory", "crash", "abort", "precision loss", "within ATen's error", "unsupported")}
    assert gates == {"wrong": True, "memory": True, "crash": True, "abort": True, "precision loss": False,
                     "within ATen's error": False, "unsupported": True}
    assert not Finding(cluster, "unsupported", False, "").gating
    assert Finding(cluster, "wrong", False, "git").side() == "the edit (the base agrees) off the float64 reference by 0.5, ATen by 0.01"
