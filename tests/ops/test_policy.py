"""Call policies (etops.ops.policy): a kernel is made with DIRECT or PROGRAM, and a
guard's refusal is a GuardRefusal carrying the declaration, guard and finding that
refused (of the guard's own exception type too)."""

from __future__ import annotations

import pickle
import types

import pytest
import torch

import etops
from etops.errors import refusing
from etops import ops
from etops.ops import DIRECT, PROGRAM, Direct, Judging, Safety
from etops.ops.rules import Rule, merge

OP = types.SimpleNamespace(name="ns::op.out")


def test_a_direct_calls_refusal_carries_its_rule_guard_and_finding():
    unfold = etops.registry().get_kernel("aten::unfold_copy.out")
    with pytest.raises(etops.GuardRefusal) as refused:
        unfold(torch.tensor(1.0), 0, 1, 1)
    exc = refused.value
    assert isinstance(exc, ValueError) and isinstance(exc, etops.EtopsError)
    assert (exc.op, exc.argument, exc.policy) == ("aten::unfold_copy.out", "self", "direct")
    assert exc.rule in ops.policy_of("aten::unfold_copy.out").rules and exc.guard in exc.rule.direct.guards
    assert exc.finding is not None and exc.finding.argument == "self" and "0-dim input" in exc.finding.summary
    assert str(exc).startswith("aten::unfold_copy.out: argument 'self'")
    # the guard's frame is where the traceback ends (a report's file:line)
    tail = exc.__traceback__
    while tail.tb_next is not None:
        tail = tail.tb_next
    assert tail.tb_frame.f_code is exc.guard.__code__


def test_a_refusal_is_still_the_exception_type_its_guard_raised():
    unfold = etops.registry().get_kernel("aten::unfold_copy.out")
    with pytest.raises(IndexError, match="argument 'dimension'") as refused:  # dim_valid raises IndexError
        unfold(torch.zeros(1, 1, 1), -4, 1, 1)
    assert isinstance(refused.value, etops.GuardRefusal) and refused.value.finding.argument == "dimension"
    with pytest.raises(TypeError, match="argument 'self'") as typed:  # floating raises TypeError
        etops.registry().get_kernel("aten::_fft_r2c.out")(torch.zeros(2, dtype=torch.int64), [0], 0, True)
    assert isinstance(typed.value, etops.GuardRefusal) and typed.value.policy == "direct"


def test_a_refusal_pickles_without_its_functions():
    unfold = etops.registry().get_kernel("aten::unfold_copy.out")
    with pytest.raises(etops.GuardRefusal) as refused:
        unfold(torch.zeros(1, 1, 1), -4, 1, 1)
    again = pickle.loads(pickle.dumps(refused.value))
    assert type(again) is type(refused.value) and str(again) == str(refused.value)
    assert (again.op, again.argument, again.finding, again.policy) == (refused.value.op, "dimension", refused.value.finding, "direct")
    assert again.rule is None and again.guard is None


def test_a_guards_own_failure_is_not_a_refusal():
    def broken(bound, info):
        raise RuntimeError("a bug in the guard")

    def refuses(bound, info):
        raise refusing(ValueError, "x", f"{info.name}: argument 'x' is wrong")

    entry = merge(OP.name, [Rule((OP.name,), direct=Direct(guards=(broken,)))])
    with pytest.raises(RuntimeError, match="a bug") as failed:
        entry.calls(DIRECT).check({}, OP)
    assert not isinstance(failed.value, etops.GuardRefusal)
    entry = merge(OP.name, [Rule((OP.name,), direct=Direct(guards=(refuses,)))])
    with pytest.raises(etops.GuardRefusal) as refused:
        entry.calls(DIRECT).check({}, OP)
    assert refused.value.argument == "x" and refused.value.finding is None and refused.value.guard is refuses


def test_a_refusals_argument_is_the_guards_never_its_words():
    """The argument a refusal carries is what the guard raised it with
    (etops.errors.refusing); a message naming one in words names none."""
    def says(bound, info):
        raise ValueError(f"{info.name}: argument 'x' is wrong")

    def names(bound, info):
        raise refusing(ValueError, "y", f"{info.name}: the second input is wrong")

    for guard, argument in ((says, None), (names, "y")):
        entry = merge(OP.name, [Rule((OP.name,), direct=Direct(guards=(guard,)))])
        with pytest.raises(etops.GuardRefusal) as refused:
            entry.calls(DIRECT).check({}, OP)
        assert refused.value.argument == argument


def test_the_program_policy_gets_the_safety_part_only_and_refuses_its_workarounds():
    def guard(bound, info):
        raise ValueError(f"{info.name}: argument 'x' refused")

    nothing = lambda bound: True  # noqa: E731 - every call has nothing to compute
    entry = merge(OP.name, [Rule((OP.name,), direct=Direct(guards=(guard,))), Rule((OP.name,), safety=Safety(no_work=nothing))])
    direct, program = entry.calls(DIRECT), entry.calls(PROGRAM)
    assert direct.no_work is nothing and direct.nothing_to_compute({})
    assert program.no_work is None and not program.normalize and len(program.guards) == 1  # the workaround's refusal
    with pytest.raises(etops.GuardRefusal, match="not called as a program calls it") as refused:
        program.check({}, OP)
    assert refused.value.policy == "program" and refused.value.rule is entry.rules[1]
    assert entry.calls(PROGRAM) is program  # made once per policy


def test_kernels_are_made_with_a_policy_once():
    direct = etops.registry().get_kernel("aten::narrow_copy.out")
    judged = etops.as_program(direct)
    assert direct._info.policy is DIRECT and judged._info.policy is PROGRAM and judged._info is not direct._info
    assert etops.as_program(judged) is judged and etops.as_program("aten::narrow_copy.out") is judged
    assert judged._info._plan is direct._info._plan  # one plan per operator, computed once
    assert judged in direct._info.other_policies()
    assert pickle.loads(pickle.dumps(PROGRAM)) is PROGRAM


def test_every_memory_finding_is_kept_from_the_judge_too():
    """A finding that corrupts memory or kills by a signal is refused as a program
    calls the kernel too (the safety part's guards, or torch's checks): the judge
    never runs it. The other findings the judge meets as the kernel's aborts."""
    memory = [f for f in ops.findings() if f.memory]
    assert memory and not any(f.memory for f in ops.abort_findings())
    for finding in memory:
        entry = ops.policy_of(finding.op)
        assert entry.calls(PROGRAM).has_guards or entry.torch_checks, finding.op


def test_the_judging_part_is_one_place_per_operator():
    entry = ops.policy_of("aten::native_dropout.out")
    assert entry.judging.compare == "metadata" and entry.judging.inputs is ops.INPUTS["aten::native_dropout.out"]
    assert isinstance(entry.judging, Judging)
    # tolerance_of applies the operator's (rtol, atol) to a policy, and a user's explicit one wins
    from etops.compare import Tolerance

    policy = Tolerance("p", default=(0.5, 0.5))
    tight = Judging(tolerance=(1e-3, 1e-4))
    assert tight.tolerance_of(policy).overridden and (tight.tolerance_of(policy).rtol, tight.tolerance_of(policy).atol) == (1e-3, 1e-4)
    assert Judging().tolerance_of(policy) is policy
    users = policy.override(0.25, 0.125)
    assert tight.tolerance_of(users) is users
