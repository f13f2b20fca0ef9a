"""Overruns are stopped before they corrupt (docs/reliability.md): the first call of
each argument signature runs with the tensors the kernel writes in etops' memory
between guard pages, so a kernel that writes past its out (or before it) because of
the call's sizes or dtypes raises etops.KernelCrashed naming the argument, and
neither the out nor the memory around it changes. A clean first call makes the
signature fast: later calls run on the caller's memory directly."""

from __future__ import annotations

import pytest
import torch
from custom_helpers import cache, failures  # noqa: F401

import etops

#: writes x.numel() + EXTRA floats starting AT elements from out's start
OVERRUN = r"""
Tensor& overrun_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < x.numel() + EXTRA; i++) o[AT + i] = 7.0f;
  return out;
}
"""

#: writes x.numel() doubles into out whatever out's dtype (a kernel trusting its out's dtype)
WIDE = r"""
Tensor& wide_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  double* o = static_cast<double*>(out.mutable_data_ptr());
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = 1.0;
  return out;
}
"""

#: out[0] = the address the kernel was given for out (int64), out[1] = that of x
WHERE = r"""
Tensor& where_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  int64_t* o = out.mutable_data_ptr<int64_t>();
  o[0] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(out.const_data_ptr()));
  o[1] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(x.const_data_ptr()));
  return out;
}
"""

SCHEMA = "{name}.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)"
_HANDLES: dict = {}


@pytest.fixture(autouse=True)
def fault_marks_cleared():
    """Each test's calls run in this process: a fault sends later calls of its
    kernel to the guard process until etops.clear_taint()."""
    etops.clear_taint()
    yield
    etops.clear_taint()


def _kernel(name: str, source: str, function: str):
    if name not in _HANDLES:
        _HANDLES[name] = etops.register_kernel(f"probelib::{name}.out", source, function=function,
                                               schema=SCHEMA.format(name=name))
    return etops.registry().get_kernel(f"probelib::{name}.out")


@pytest.mark.parametrize("extra, at, where", [
    (1, 0, "past the end"),          # one element: the canary bytes
    (3000, 0, "past the end"),       # pages beyond: the guard page
    (0, -1, "before the start"),     # one element before
    (0, -3000, "before the start"),  # pages before
])
def test_a_write_outside_the_out_is_stopped_and_nothing_changes(cache, failures, extra, at, where):
    source = OVERRUN.replace("EXTRA", str(extra)).replace("AT", f"({at})")
    op = _kernel(f"overrun_{extra}_{-at}", source, "overrun_out")
    buffer = torch.full((20000,), -1.0)
    out = buffer[10000:10005]  # memory on both sides that a real overrun would change
    for _ in range(2):  # the signature stays a probe: the second call is stopped too
        with pytest.raises(etops.KernelCrashed) as caught:
            op(torch.ones(5), out=out)
        error = caught.value
        assert error.argument == "out" and error.where == where and error.access == "write"
        assert not error.memory_may_be_corrupt and "stopped" in str(error)
        assert torch.equal(buffer, torch.full((20000,), -1.0)), "the out and its neighbours are unchanged"
        assert error.outs_may_be_partial == ()  # the probe's copy was written, not the caller's out
        etops.clear_taint()  # a guard page's fault sent later calls to the guard process: in-process again
    if abs(extra + at) > 1:  # the guard page, not the canary: a fault the bridge placed in the out
        assert [(f.kind, f.fault.argument, f.fault.where) for f in failures] == [("crashed", "out", where)] * 2


def test_a_kernel_writing_wider_elements_than_its_out_is_stopped(cache):
    op = _kernel("wide", WIDE, "wide_out")
    assert op(torch.ones(4), out=torch.empty(4, dtype=torch.float64)).tolist() == [1.0] * 4
    with pytest.raises(etops.KernelCrashed, match="past the end of argument 'out'"):
        op(torch.ones(4), out=torch.zeros(4, dtype=torch.float32))


def test_the_first_call_of_a_signature_is_a_probe_then_the_call_is_direct(cache):
    op = _kernel("where", WHERE, "where_out")
    x = torch.ones(3)
    out = torch.zeros(2, dtype=torch.long)
    first = op(x, out=out).tolist()
    assert first[0] != out.data_ptr(), "the probe gives the kernel etops' memory for the out"
    assert first[1] == x.data_ptr(), "inputs stay where they are"
    assert op(x, out=out).tolist() == [out.data_ptr(), x.data_ptr()], "then the signature is direct"
    assert op(torch.ones(7), out=out).tolist()[0] != out.data_ptr(), "a new signature is probed again"


def test_an_out_that_is_also_an_input_stays_aliased_in_the_probe(cache):
    reg = etops.registry()
    a = torch.arange(6.0)
    assert reg.aten.add.out(a, a, out=a).tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    b = torch.arange(4.0)
    assert reg.aten.mul.out(b, 3.0, out=b).tolist() == [0.0, 3.0, 6.0, 9.0]
