"""The `guarded` and `abort` statuses. The judge calls kernels as programs call
them: a kernel that aborts on a case (an ET_CHECK) is an `abort` finding, with a
note when etops' direct calls refuse or work around it; only the rules table's
`memory` rules still refuse (`guarded`), named by their guard, not an etops error."""

from __future__ import annotations

import pytest
import torch

import etops
from etops import conformance
from etops.conformance.guarded import refusing_guard, refusing_rule
from etops.conformance.runner import CaseInfo, TaskRunner, default_kmap


def test_unfold_copy_on_a_0d_input_is_an_abort_with_the_direct_calls_workaround():
    report = conformance.run(["aten::unfold_copy.out"], dtypes=["float32"], opinfo_filter={"unfold_copy"}, progress=False)
    aborts = report.cases("abort")
    assert aborts and report.totals()["abort"] == len(aborts), report.totals()
    assert report.totals()["error"] == 0 and report.totals()["guarded"] == 0
    case = aborts[0]
    assert "Dimension out of range" in case.message and "tensor_impl.h" in case.message
    assert case.rule.startswith("etops' direct calls refuse this naming the argument")
    assert "argument 'self'" in case.rule


def test_a_memory_rule_still_refuses_for_the_judge():
    """max_pool2d_with_indices_backward writes outside grad_input for indices beyond
    a plane of self: its rule is marked memory, so its guard refuses for the judge too."""
    runner = TaskRunner(default_kmap(), ["aten::max_pool2d_with_indices_backward.grad_input"])
    runner.begin("handmade", torch.float32, None, None)
    grad, x = torch.ones(1, 1, 1, 1), torch.ones(1, 1, 2, 2)
    indices = torch.full((1, 1, 1, 1), 99, dtype=torch.int64)
    args = [grad, x, [2, 2], [2, 2], [0, 0], [1, 1], False, indices]
    func = torch.ops.aten.max_pool2d_with_indices_backward.default
    case = CaseInfo("aten::max_pool2d_with_indices_backward.grad_input", "aten::max_pool2d_with_indices_backward", "handmade", "float32", 0, 0)
    result = runner.check(case, func, case.kernel, args, {}, torch.zeros(1, 1, 2, 2))
    assert result.status == "guarded", result
    assert result.rule.startswith("_pool_indices_in_range") and "writes outside grad_input" in result.rule


def test_a_memory_rules_workaround_is_a_refusal_for_the_judge_not_a_pass():
    """_log_softmax.out divides by an empty dim's size (SIGFPE): etops' direct calls
    skip the kernel (no_work); the judge reports the case guarded, never passing."""
    runner = TaskRunner(default_kmap(), ["aten::_log_softmax.out"])
    runner.begin("handmade", torch.float32, None, None)
    case = CaseInfo("aten::_log_softmax.out", "aten::_log_softmax", "handmade", "float32", 0, 0)
    x = torch.empty(0)
    result = runner.check(case, torch.ops.aten._log_softmax.default, case.kernel, [x, -1, False], {}, torch.empty(0))
    assert result.status == "guarded", result
    assert result.rule.startswith("refuse_workarounds") and "divides by the size" in result.rule


def test_a_guard_refusal_is_told_from_an_ordinary_argument_error():
    kernel = etops.registry().get_kernel("aten::unfold_copy.out")
    with pytest.raises(ValueError) as refused:
        kernel(torch.tensor(1.0), 0, 1, 1)
    assert refusing_guard("aten::unfold_copy.out", refused.value) is not None
    # the same kernel refusing a bad argument by torch's own checks: no guard raised it
    with pytest.raises(Exception) as ordinary:
        kernel(torch.ones(3), 0, 1, 1, out=torch.ones(3, 1, dtype=torch.int64))
    assert refusing_rule("aten::unfold_copy.out", ordinary.value) is None
    # the guard's exception is not another kernel's guard refusal
    assert refusing_rule("aten::add.out", refused.value) is None


def test_an_etops_error_stays_an_error():
    import types

    def invoke(kernel, args, kwargs):
        raise ValueError(f"{kernel.name}: etops could not make this call")

    report = conformance.run(["aten::add.out"], dtypes=["float32"], opinfo_filter={"add"}, progress=False,
                             hooks=types.SimpleNamespace(invoke=invoke))
    assert report.cases("error") and not report.cases("guarded")
    assert all(c.rule is None for c in report.cases("error"))
