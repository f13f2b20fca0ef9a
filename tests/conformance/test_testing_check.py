"""etops.testing's check(): fails on crash, abort and mismatch naming the inputs,
runs guarded with guard=True, and says when the kernel refused every case."""

from __future__ import annotations

import types

import pytest

import etops
from etops import testing
from etops.conformance.runner import CaseResult, TaskResult


def _case(hooks=None, guard=False):
    return testing.opinfo_cases("aten::add.out", "add", dtypes=["float32"], hooks=hooks, guard=guard)[0]


def _crashing(samples):
    """Hooks whose call faults, as a guarded call of a kernel writing past its out
    reports it, on the given samples (every sample: None)."""
    seen = []

    def invoke(kernel, args, kwargs):
        seen.append(1)
        if samples is None or len(seen) in samples:
            raise etops.KernelCrashed(kernel.name, "SIGSEGV", "out", "write", "past the end", 0)
        return kernel(*args, **kwargs)

    return types.SimpleNamespace(invoke=invoke)


def test_a_crash_fails_the_check_naming_its_inputs():
    with pytest.raises(AssertionError) as info:
        _case(_crashing({2, 5})).check()
    text = str(info.value)
    assert "2 crash of" in text and "write past the end of argument 'out'" in text
    assert "inputs: Tensor[" in text


def test_a_kernel_crashing_on_every_case_fails_rather_than_skips():
    with pytest.raises(AssertionError, match="crash"):
        _case(_crashing(None)).check()


@pytest.mark.parametrize("status", ["abort", "crash", "mismatch", "error"])
def test_each_failing_status_fails(status):
    result = TaskResult("add", "float32")
    for s in ("pass", status):
        case = CaseResult("aten::add.out", "aten::add.Tensor", "add", "float32", 0, 0, s, message=f"{s} here", inputs="Tensor[3]:float32")
        result.record(case, keep=s != "pass")
    with pytest.raises(AssertionError, match=rf"1 {status} of 2 cases[\s\S]*{status} here[\s\S]*inputs: Tensor\[3\]:float32"):
        testing.assert_result("x", result)


def _refusing():
    def invoke(kernel, args, kwargs):
        raise etops.KernelError(kernel.name, 0x12, "InvalidArgument", "dtype not handled")

    return types.SimpleNamespace(invoke=invoke)


def test_a_kernel_refusing_every_case_is_reported_unsupported(monkeypatch):
    with pytest.raises(pytest.skip.Exception, match=r"^aten::add.out-add-float32: unsupported: the kernel refused every case \(\d+ unsupported\).*dtype not handled"):
        _case(_refusing()).check()
    monkeypatch.delenv("PYTEST_CURRENT_TEST")  # as a script calls it
    with pytest.raises(testing.Unsupported, match="unsupported: the kernel refused every case"):
        _case(_refusing()).check()


def test_guard_true_makes_every_call_guarded(monkeypatch):
    import etops.guard.hooks as guard_hooks

    calls = []
    real = guard_hooks.call

    def counting(kernel, *args, **kwargs):
        calls.append(kernel.name)
        return real(kernel, *args, **kwargs)

    monkeypatch.setattr(guard_hooks, "call", counting)
    result = _case(guard=True).check()
    passed = result.tallies[("aten::add.out", "float32")].counts["pass"]
    assert passed > 0 and len(calls) == passed
    calls.clear()
    assert _case().check(guard=True) and calls  # the option of check() itself
    calls.clear()
    _case().check()
    assert not calls
