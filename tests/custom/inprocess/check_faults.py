"""Synchronous faults in a kernel become exceptions (docs/reliability.md): a kernel
that divides by zero in integers or dereferences a null pointer raises
etops.KernelCrashed naming the kernel, the signal and the address, in every path
that runs a kernel (direct, slow path, guarded, torch.ops, a Python kernel calling
it, an edge program run by etops.edge.run), and the next call works. A write fault
says memory may be corrupt and warns once per process. A fault on another thread
still ends the process, naming the kernel."""

from __future__ import annotations

import warnings

import pytest
import torch
from custom_helpers import assert_a_thread_ends_the_process, cache, failures, registry_snapshot, run_fresh  # noqa: F401

import etops

#: out = x / d in int64, truncating: d == 0 traps (SIGFPE), as INT64_MIN / -1 does
DIVIDES = r"""
Tensor& divides_out(KernelRuntimeContext& ctx, const Tensor& x, const Tensor& d, Tensor& out) {
  ET_KERNEL_CHECK(ctx, x.scalar_type() == ScalarType::Long && d.scalar_type() == ScalarType::Long &&
                  out.scalar_type() == ScalarType::Long && x.numel() == d.numel() && out.numel() == x.numel(),
                  InvalidArgument, out);
  const int64_t* a = x.const_data_ptr<int64_t>();
  const int64_t* b = d.const_data_ptr<int64_t>();
  int64_t* o = out.mutable_data_ptr<int64_t>();
  for (ssize_t i = 0; i < x.numel(); i++) {
    volatile int64_t q = a[i] / b[i];  // volatile: the division happens, trap and all
    o[i] = q;
  }
  return out;
}
"""

#: out = x + 1; x[0] == -1 reads through a null pointer, x[0] == -2 writes through one
NULL_DEREF = r"""
Tensor& null_deref_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  ET_KERNEL_CHECK(ctx, x.scalar_type() == ScalarType::Float && out.numel() == x.numel(), InvalidArgument, out);
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  volatile float* null_pointer = nullptr;
  if (x.numel() > 0 && in[0] == -1.0f) o[0] = null_pointer[4];
  if (x.numel() > 0 && in[0] == -2.0f) null_pointer[4] = 1.0f;
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = in[i] + 1.0f;
  return out;
}
"""

#: reads through a null pointer on a thread of its own (as a threadpool worker would)
ON_A_THREAD = r"""
#include <thread>
Tensor& fault_thread_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  std::thread worker([] { volatile float* p = nullptr; p[0] = 1.0f; });
  worker.join();
  return out;
}
"""

_MEMO: dict = {}


@pytest.fixture(autouse=True)
def fault_marks_cleared():
    """Each test starts with no kernel marked and the process untainted: a fault
    sends later calls of its kernel to the guard process (test_after_a_fault.py)."""
    etops.clear_taint()
    yield
    etops.clear_taint()


@pytest.fixture
def divides(cache):
    if "divides" not in _MEMO:
        _MEMO["divides"] = etops.custom_op("faultlib::divides(Tensor x, Tensor d) -> Tensor", DIVIDES,
                                           function="divides_out")
    return etops.registry().get_kernel("faultlib::divides.out")


@pytest.fixture
def null_deref(cache):
    if "null_deref" not in _MEMO:
        _MEMO["null_deref"] = etops.custom_op("faultlib::null_deref(Tensor x) -> Tensor", NULL_DEREF,
                                              function="null_deref_out")
    return etops.registry().get_kernel("faultlib::null_deref.out")


def _long(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long)


def test_an_integer_division_by_zero_raises_and_the_next_call_works(divides, failures):
    before = registry_snapshot()
    for _ in range(3):
        with pytest.raises(etops.KernelCrashed) as caught:
            divides(_long(7, 8), _long(1, 0), out=torch.empty(2, dtype=torch.long))
        failure = failures[-1]  # the bridge's, by kind: the fault's fields by name
        assert (failure.kind, failure.name, failure.kernel) == ("crashed", "Crashed", "faultlib::divides.out")
        assert failure.fault.signal == 8 and failure.fault.argument is None
        error = caught.value
        assert isinstance(error, etops.KernelError)
        assert error.op == "faultlib::divides.out" and error.signal == "SIGFPE"
        assert "integer division" in error.reason and error.address is not None
        assert not error.memory_may_be_corrupt
        assert "faultlib::divides.out crashed with SIGFPE" in str(error)
        assert etops.kernel_faulted(divides) and etops.taint() is None  # the kernel's code: no taint
        assert divides(_long(7, 8), _long(1, 2), out=torch.empty(2, dtype=torch.long)).tolist() == [7, 4]  # guarded
        assert etops.registry().aten.add.out(torch.ones(2), torch.ones(2), out=torch.empty(2)).tolist() == [2.0, 2.0]
        etops.clear_taint()  # in-process again: the next round faults in this process
    assert registry_snapshot() == before


def test_the_most_negative_int64_divided_by_minus_one_raises(divides):
    with pytest.raises(etops.KernelCrashed, match="SIGFPE"):
        divides(_long(-2**63), _long(-1), out=torch.empty(1, dtype=torch.long))
    assert divides(_long(-2**63), _long(1), out=torch.empty(1, dtype=torch.long)).tolist() == [-2**63]


def test_a_null_read_raises_naming_the_read_and_warns_of_nothing(null_deref):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a read corrupts nothing: no warning
        with pytest.raises(etops.KernelCrashed) as caught:
            null_deref(torch.tensor([-1.0, 2.0]), out=torch.empty(2))
    error = caught.value
    assert error.signal == "SIGSEGV" and error.access == "read" and not error.memory_may_be_corrupt
    assert error.address == 16 and "null pointer" in str(error)
    assert null_deref(torch.tensor([1.0, 2.0]), out=torch.empty(2)).tolist() == [2.0, 3.0]


def test_a_null_write_says_memory_may_be_corrupt_and_warns_once(null_deref):
    import etops.crash_site as crash_site

    crash_site._warned = False  # this test process may have warned before
    with pytest.warns(etops.MemoryMayBeCorruptWarning, match="guard"):
        with pytest.raises(etops.KernelCrashed) as caught:
            null_deref(torch.tensor([-2.0]), out=torch.empty(1))
    assert caught.value.access == "write" and caught.value.memory_may_be_corrupt
    assert "memory may already be corrupt" in str(caught.value) and "etops.guard.call" in str(caught.value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        with pytest.raises(etops.KernelCrashed):
            null_deref(torch.tensor([-2.0]), out=torch.empty(1))
    assert null_deref(torch.tensor([2.0]), out=torch.empty(1)).tolist() == [3.0]


def test_slow_path_call_raises(divides):
    with pytest.raises(etops.KernelCrashed):
        divides(_long(1), _long(0))  # no out=: etops sizes and allocates it
    assert divides(_long(9), _long(3)).tolist() == [3]


def test_guarded_calls_raise(divides, null_deref):
    from etops.guard import call

    with pytest.raises(etops.KernelCrashed, match="SIGFPE"):
        call(divides, _long(1), _long(0), out=torch.empty(1, dtype=torch.long))
    with pytest.raises(etops.KernelCrashed, match="SIGSEGV"):
        call(null_deref, torch.tensor([-1.0]), out=torch.empty(1))
    assert call(divides, _long(9), _long(3), out=torch.empty(1, dtype=torch.long)).tolist() == [3]


def test_torch_op_of_the_custom_op_raises(divides):
    with pytest.raises(etops.KernelCrashed):
        torch.ops.faultlib.divides(_long(1), _long(0))
    assert torch.ops.faultlib.divides(_long(8), _long(2)).tolist() == [4]


def test_edge_run_raises(null_deref):
    from executorch.exir import to_edge

    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.ops.faultlib.null_deref(x - 2)

    edge = to_edge(torch.export.export(Model(), (torch.ones(3),)))
    assert etops.edge.run(edge, torch.full((3,), 3.0)).tolist() == [2.0] * 3
    with pytest.raises(etops.KernelCrashed) as caught:
        etops.edge.run(edge, torch.ones(3))  # x - 2 == -1: the null read
    assert caught.value.op == "faultlib::null_deref.out"
    assert etops.edge.run(edge, torch.full((3,), 3.0)).tolist() == [2.0] * 3


def test_a_python_kernel_calling_a_faulting_kernel(divides):
    """The fault is trapped in the inner call; the Python kernel's exception fails
    the outer call, and the trap of the outer call is back in place after."""

    def outer(x, d, out):
        return divides(x, d, out=out)

    h = etops.register_python_kernel("faultlib::outer.out", outer,
                                     schema="outer.out(Tensor x, Tensor d, *, Tensor(a!) out) -> Tensor(a!)")
    try:
        kernel = etops.registry().get_kernel("faultlib::outer.out")
        with pytest.raises(etops.KernelError) as caught:
            kernel(_long(1), _long(0), out=torch.empty(1, dtype=torch.long))
        assert "SIGFPE" in str(caught.value)
        assert kernel(_long(6), _long(3), out=torch.empty(1, dtype=torch.long)).tolist() == [2]
        with pytest.raises(etops.KernelCrashed):  # the thread's trap works as before
            divides(_long(1), _long(0), out=torch.empty(1, dtype=torch.long))
    finally:
        h.deregister()


def test_a_fault_on_another_thread_ends_the_process_naming_the_kernel(cache):
    assert_a_thread_ends_the_process(cache, "faultlib::fault_thread.out", ON_A_THREAD, "fault_thread_out",
                                     ("SIGSEGV", "cannot go on"), dies_of_a_fault=True)


def test_faults_outside_kernels_keep_their_handlers(cache):
    """A fault outside any kernel call goes to the handler installed before etops'
    (here Python's faulthandler, which prints the Python traceback), and ends the
    process as it would without etops."""
    result = run_fresh("""
        import faulthandler, ctypes
        faulthandler.enable()
        import torch, etops
        etops.registry().aten.add.out(torch.ones(1), torch.ones(1), out=torch.empty(1))
        ctypes.string_at(0)
        print("survived")
    """, cache, dies_of_a_fault=True)
    assert result.returncode != 0 and "survived" not in result.stdout
    assert "Fatal Python error: Segmentation fault" in result.stderr, result.stderr[-2000:]
