"""One outcome, one classifier, one gating rule: a case's Outcome is a value made
once (pickled and read back unchanged), clusters key and name findings from its
fields alone (a reworded message changes no key), ``classify`` gives a finding's
kind and ``gates`` whether it fails etops check or etops dev."""

from __future__ import annotations

import json
import pickle
import signal
import types

import pytest

from etops.conformance import gating
from etops.conformance.case import CaseResult
from etops.conformance.cli import exit_status
from etops.conformance.clusters import cluster_key, group, signature
from etops.conformance.outcome import CORRUPTED, EXITED, HUNG, KILLED, Outcome, of_death, of_exception, outcome_of
from etops.errors import KernelAborted, KernelCrashed


def _case(status, message, outcome, kernel="aten::k.out"):
    return CaseResult(kernel, "aten::k", "k", "float32", 0, 0, status, message=message, outcome=outcome)


# ---- the value -------------------------------------------------------------------


def test_an_outcome_pickles_and_reads_back_from_json_unchanged():
    made = [of_exception(KernelCrashed("aten::k.out", "SIGSEGV", "out", "write", "past the end"), "crash"),
            of_exception(KernelAborted("aten::k.out", log="check failed", site="op_k.cpp:12"), "abort"),
            Outcome("mismatch", "wrong", "shape", output=1, abs_error=2.0, reason="sign flipped"),
            of_death(-signal.SIGBUS), of_death(None, hung=True)]
    for outcome in made:
        assert pickle.loads(pickle.dumps(outcome)) == outcome
        assert Outcome.from_json(json.loads(json.dumps(outcome.to_json()))) == outcome
        case = _case(outcome.status, "m", outcome)
        assert CaseResult.from_json(json.loads(json.dumps(case.to_json()))).outcome == outcome


def test_how_a_process_ended_is_its_signal_or_its_status():
    assert of_death(-signal.SIGSEGV) == Outcome("crash", signal="SIGSEGV", ended=KILLED)
    assert of_death(128 + signal.SIGABRT) == Outcome("crash", signal="SIGABRT", ended=KILLED)  # a fault reporter's exit
    assert of_death(3) == Outcome("crash", error="exit status 3", ended=EXITED)
    assert of_death(None, hung=True) == Outcome("crash", ended=HUNG)


def test_an_error_outcome_says_where_it_was_raised():
    try:
        raise TypeError("anything at all")
    except TypeError as exc:
        outcome = of_exception(exc, "error")
    assert outcome.error == "TypeError" and outcome.site.startswith("test_conformance_gating.py:")


def test_a_record_without_an_outcome_has_its_status_and_verdict():
    case = CaseResult("aten::k.out", "aten::k", "k", "float32", 0, 0, "mismatch", verdict="precision loss")
    assert outcome_of(case) == Outcome("mismatch", "precision loss")


# ---- keys from the value, never the message ----------------------------------------


def test_a_signature_is_the_outcomes_whatever_the_message_says():
    """The message says shape / SIGSEGV; the Outcome says values / SIGBUS: the Outcome wins."""
    values = _case("mismatch", "shape [2] (ExecuTorch) vs [3] (ATen)", Outcome("mismatch", "wrong", "values", abs_error=1.0))
    assert signature(values) == "values differ: wrong"
    second = _case("mismatch", "Mismatched elements: 1 / 4", Outcome("mismatch", "wrong", "dtype", output=1))
    assert signature(second) == "output 1: another dtype"
    bus = _case("crash", "worker killed by SIGSEGV", of_death(-signal.SIGBUS))
    assert signature(bus) == "SIGBUS"
    hung = _case("crash", "worker killed by SIGKILL", of_death(None, hung=True))
    assert signature(hung) == "hung"


def test_a_reworded_message_changes_no_key():
    site = Outcome("abort", error="Aborted", site="op_k.cpp:40")
    a = _case("abort", "ExecuTorch kernel aten::k.out aborted: Check failed (dim < 3) [op_k.cpp:40]", site)
    b = _case("abort", "ExecuTorch kernel aten::k.out aborted: the dim must be below three [op_k.cpp:40]", site)
    assert cluster_key(a) == cluster_key(b)
    other = _case("abort", a.message, Outcome("abort", error="Aborted", site="op_k.cpp:41"))
    assert cluster_key(other) != cluster_key(a)  # another check, however alike its words
    clusters = group([a, b, other])
    assert sorted(len(c.cases) for c in clusters) == [1, 2]


def test_a_crash_of_the_same_signal_is_one_finding_whatever_its_process_wrote():
    one = _case("crash", "worker killed by SIGSEGV: some SIGILL in the stderr tail", of_death(-signal.SIGSEGV))
    two = _case("crash", "worker killed by SIGSEGV", of_death(-signal.SIGSEGV))
    assert cluster_key(one) == cluster_key(two) and signature(one) == "SIGSEGV"
    corrupted = _case("crash", "task process killed by SIGSEGV, but passes ...", Outcome("crash", ended=CORRUPTED))
    assert cluster_key(corrupted) != cluster_key(one)


# ---- classify and gates --------------------------------------------------------------


def _refusal(kernel, *args, **kwargs):
    import etops
    from etops.errors import KernelError

    with pytest.raises(KernelError) as raised:
        etops.get_kernel(kernel)(*args, **kwargs)
    return raised.value


def test_two_inner_checks_one_outer_check_reports_are_two_findings():
    """roll.out's check_roll_args fails at one ET_KERNEL_CHECK (the site) for two
    causes, a rank check and the shifts/dims check: the first check each call logged
    (the origin, from the bridge's log sites, not its text) keeps them two findings;
    the origin travels in the exception's pickle and the Outcome's JSON."""
    import torch

    rank = _refusal("aten::roll.out", torch.tensor(2.0), [1], [], out=torch.empty(()))
    sizes = _refusal("aten::roll.out", torch.randn(2, 3), [1], [], out=torch.empty(2, 3))
    assert rank.site == sizes.site and rank.site.startswith("op_roll.cpp:")
    assert rank.origin and sizes.origin and rank.origin != sizes.origin
    assert rank.site not in (rank.origin, sizes.origin)  # an outer check reported them
    assert pickle.loads(pickle.dumps(rank)).origin == rank.origin
    outcomes = [of_exception(exc, "unsupported") for exc in (rank, sizes)]
    assert [o.origin for o in outcomes] == [rank.origin, sizes.origin]
    assert [Outcome.from_json(json.loads(json.dumps(o.to_json()))) for o in outcomes] == outcomes
    cases = [_case("unsupported", "the same words", o, kernel="aten::roll.out") for o in outcomes]
    assert cluster_key(cases[0]) != cluster_key(cases[1]) and len(group(cases)) == 2


def test_a_check_that_failed_alone_has_no_origin():
    from etops.call_failure import failure_origin

    alone = types.SimpleNamespace(file="op_k.cpp", line=12, origin_file="op_k.cpp", origin_line=12)
    inner = types.SimpleNamespace(file="op_k.cpp", line=12, origin_file="util.cpp", origin_line=3)
    assert failure_origin(alone) == "" and failure_origin(inner) == "util.cpp:3"
    assert of_exception(KernelAborted("aten::k.out", log="check failed", site="op_k.cpp:12"), "abort").origin is None


def test_classify_reads_the_status_the_verdict_and_the_crashs_place():
    placed = Outcome("crash", signal="SIGSEGV", argument="out", access="write", where="past the end")
    assert gating.classify(placed) == "crash"
    assert gating.classify(placed, gating.AGAINST_BASE) == "memory"
    assert gating.classify(Outcome("crash", signal="canary"), gating.AGAINST_BASE) == "memory"
    assert gating.classify(Outcome("crash", signal="SIGSEGV"), gating.AGAINST_BASE) == "crash"
    assert gating.classify(Outcome("mismatch", "precision loss")) == "precision loss"
    assert gating.classify(Outcome("mismatch")) == "wrong"  # no verdict: wrong
    assert gating.classify(Outcome("abort", error="Aborted")) == "abort"
    with pytest.raises(ValueError, match="comparison"):
        gating.classify(placed, "aten")


def test_gates_is_checks_rule_and_devs_rule():
    check = {k for k in gating.CATEGORIES if gating.gates(k, None)}
    assert check == {"crash", "hang", "abort", "error", "wrong"}
    strict = {k for k in gating.CATEGORIES if gating.gates(k, None, strict=True)}
    assert strict == set(gating.CATEGORIES) - {"unsupported"}
    assert gating.gates("memory", "git") and gating.gates("guarded", "") and not gating.gates("precision loss", "git")
    assert not gating.gates("crash", "git", shared=True)  # the base fails the same way
    assert gating.gates("unsupported", "built-in") and not gating.gates("unsupported", "")  # a refusal where a base passed


def test_etops_checks_exit_status_is_gates():
    def report(**counts):
        return types.SimpleNamespace(totals=lambda: {"cases": sum(counts.values()), "pass": 0, **counts})

    loss = types.SimpleNamespace(category="precision loss")
    wrong = types.SimpleNamespace(category="wrong")
    assert exit_status(report(unsupported=3), []) == 0
    assert exit_status(report(abort=1), []) == 1
    assert exit_status(report(mismatch=1), [loss]) == 0 and exit_status(report(mismatch=1), [loss], strict=True) == 1
    assert exit_status(report(mismatch=1), [wrong]) == 1 and exit_status(report(mismatch=1), [wrong], report_only=True) == 0
    assert exit_status(report(guarded=1), []) == 0 and exit_status(report(guarded=1), [], strict=True) == 1
