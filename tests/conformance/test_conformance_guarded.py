"""The `guarded` status: a case etops' own pre-call guard refuses (the kernel is
known to abort on it) is a finding about the kernel, named by the guard, not an
etops error."""

from __future__ import annotations

import pytest
import torch

import etops
from etops import conformance
from etops.conformance.guarded import refusing_guard, refusing_rule


def test_unfold_copy_on_a_0d_input_is_guarded_with_its_rule():
    report = conformance.run(["aten::unfold_copy.out"], dtypes=["float32"], opinfo_filter={"unfold_copy"}, progress=False)
    guarded = report.cases("guarded")
    assert guarded and report.totals()["guarded"] == len(guarded), report.totals()
    assert report.totals()["error"] == 0
    case = guarded[0]
    assert case.rule.startswith("min_dim(low=1, name='self')")
    assert "0-dim input" in case.rule  # the rules table's finding it stands for
    assert "argument 'self'" in case.message


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
