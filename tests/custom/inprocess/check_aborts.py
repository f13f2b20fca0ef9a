"""ExecuTorch aborts become exceptions (docs/reliability.md): a kernel under
development that trips its own ET_CHECK raises etops.KernelAborted naming the
kernel and carrying its message, in every path that runs a kernel (direct, slow
path, guarded, an override of a built-in, a Python kernel calling it, an edge
program run by etops.edge.run); the registry is as before and the next call works.
An abort on another thread, and a kernel's plain abort(), still end the process,
naming the kernel."""

from __future__ import annotations

import signal

import pytest
import torch
from custom_helpers import (a_thread_ending_run, assert_a_thread_ends_the_process, cache, failures,  # noqa: F401
                            registry_snapshot, run_fresh)

import etops

#: x -> out = x + 1, unless x[0] is negative: then the kernel's own ET_CHECK_MSG fails
PLANTED = r"""
Tensor& planted_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  ET_KERNEL_CHECK(ctx, x.scalar_type() == ScalarType::Float && out.numel() == x.numel(), InvalidArgument, out);
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  if (x.numel() > 0) {
    ET_CHECK_MSG(in[0] >= 0.0f, "planted: x[0] is %f", static_cast<double>(in[0]));
  }
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = in[i] + 1.0f;
  return out;
}
"""

#: aten::add.out replaced by a kernel whose check fails on any alpha but 1
PLANTED_ADD = r"""
Tensor& planted_add(KernelRuntimeContext& ctx, const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out) {
  double a_ = alpha.isFloatingPoint() ? alpha.to<double>() : static_cast<double>(alpha.to<int64_t>());
  ET_CHECK_MSG(a_ == 1.0, "planted: alpha must be 1");
  const float* a = self.const_data_ptr<float>();
  const float* b = other.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < out.numel(); i++) o[i] = a[i] + b[i];
  return out;
}
"""

#: a C++ exception of the kernel's own (not an abort)
THROWS = r"""
#include <stdexcept>
Tensor& throws_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  throw std::runtime_error("planted exception");
}
"""

#: the check fails on a thread the kernel starts (as a threadpool worker's would)
ON_A_THREAD = r"""
#include <thread>
Tensor& on_thread_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  std::thread worker([] { ET_CHECK_MSG(false, "planted on a worker thread"); });
  worker.join();
  return out;
}
"""

SCHEMA = "planted.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)"

_MEMO: dict = {}


@pytest.fixture
def planted(cache):
    if "planted" not in _MEMO:
        _MEMO["planted"] = etops.custom_op("abortlib::planted(Tensor x) -> Tensor", PLANTED, function="planted_out")
    return etops.registry().get_kernel("abortlib::planted.out")


def _assert_planted(error: BaseException, op: str = "abortlib::planted.out") -> None:
    assert isinstance(error, etops.KernelAborted) and isinstance(error, etops.KernelError)
    assert error.op == op
    assert "planted" in str(error) and op in str(error)
    assert error.site, "the file:line of the check"


def test_direct_call_raises_and_the_next_call_works(planted, failures):
    before = registry_snapshot()
    for _ in range(3):
        with pytest.raises(etops.KernelAborted) as caught:
            planted(torch.tensor([-1.0, 2.0]), out=torch.empty(2))
        _assert_planted(caught.value)
        assert "x[0] is -1" in str(caught.value)
        # the bridge's failure, by kind: the check's message and site, the kernel
        failure = failures[-1]
        assert (failure.kind, failure.code, failure.name, failure.kernel) == ("aborted", 0x1000, "Aborted", "abortlib::planted.out")
        assert "x[0] is -1" in failure.message and failure.line > 0 and failure.fault is None
        assert caught.value.site == f"{failure.file}:{failure.line}"
        assert planted(torch.tensor([1.0, 2.0]), out=torch.empty(2)).tolist() == [2.0, 3.0]
        assert etops.registry().aten.add.out(torch.ones(2), torch.ones(2), out=torch.empty(2)).tolist() == [2.0, 2.0]
    assert registry_snapshot() == before


def test_slow_path_call_raises(planted):
    with pytest.raises(etops.KernelAborted) as caught:
        planted(torch.tensor([-3.0]))  # no out=: etops sizes and allocates it
    _assert_planted(caught.value)
    assert planted(torch.tensor([3.0])).tolist() == [4.0]


def test_guarded_call_reports_the_abort_not_a_death(planted):
    from etops.guard import call

    with pytest.raises(etops.KernelAborted) as caught:
        call(planted, torch.tensor([-1.0]), out=torch.empty(1))
    _assert_planted(caught.value)
    assert call(planted, torch.tensor([1.0]), out=torch.empty(1)).tolist() == [2.0]


def test_torch_op_of_the_custom_op_raises(planted):
    with pytest.raises(etops.KernelAborted):
        torch.ops.abortlib.planted(torch.tensor([-1.0]))


def test_edge_run_raises(planted):
    from executorch.exir import to_edge

    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.ops.abortlib.planted(x * 2)

    edge = to_edge(torch.export.export(Model(), (torch.ones(3),)))
    assert etops.edge.run(edge, torch.ones(3)).tolist() == [3.0] * 3
    with pytest.raises(etops.KernelAborted) as caught:
        etops.edge.run(edge, -torch.ones(3))
    _assert_planted(caught.value)
    assert etops.edge.run(edge, torch.ones(3)).tolist() == [3.0] * 3


def test_override_of_a_builtin_raises_and_restores(cache):
    add = etops.registry().aten.add.out
    a, b = torch.ones(3), torch.full((3,), 2.0)
    with etops.override("aten::add.out", PLANTED_ADD, function="planted_add", schema=str(add._schema)):
        assert add(a, b, out=torch.empty(3)).tolist() == [3.0] * 3
        with pytest.raises(etops.KernelAborted) as caught:
            add(a, b, alpha=2, out=torch.empty(3))
        _assert_planted(caught.value, "aten::add.out")
    assert add(a, b, alpha=2, out=torch.empty(3)).tolist() == [5.0] * 3


def test_a_python_kernel_calling_an_aborting_kernel(planted):
    """The abort unwinds to the inner call; the Python kernel's exception fails the
    outer call, whose state (name, log) the inner call left as it found it."""

    def outer(x, out):
        return planted(x, out=out)

    h = etops.register_python_kernel("abortlib::outer.out", outer, schema="outer.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    try:
        kernel = etops.registry().get_kernel("abortlib::outer.out")
        assert kernel(torch.tensor([1.0]), out=torch.empty(1)).tolist() == [2.0]
        with pytest.raises(etops.KernelError) as caught:
            kernel(torch.tensor([-1.0]), out=torch.empty(1))
        assert "planted" in str(caught.value)
        assert kernel(torch.tensor([1.0]), out=torch.empty(1)).tolist() == [2.0]
    finally:
        h.deregister()


def test_a_cxx_exception_of_the_kernel_is_a_kernel_error(cache, failures):
    h = etops.register_kernel("abortlib::throws.out", THROWS, function="throws_out",
                              schema="throws.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    try:
        with pytest.raises(etops.KernelError) as caught:
            etops.registry().get_kernel("abortlib::throws.out")(torch.ones(1), out=torch.empty(1))
        assert not isinstance(caught.value, etops.KernelAborted)
        assert "planted exception" in str(caught.value)
        assert [(f.kind, f.name) for f in failures] == [("exception", "CxxException")]
    finally:
        h.deregister()


def test_an_abort_on_another_thread_ends_the_process_naming_the_kernel(cache):
    assert_a_thread_ends_the_process(cache, "abortlib::on_thread.out", ON_A_THREAD, "on_thread_out",
                                     ("planted on a worker thread",), dies_of_a_fault=True)

#: plain abort(), not ExecuTorch's: on the calling thread when x[0] < 0, else on a
#: thread the kernel starts when x[0] > 1
PLAIN_ABORT = r"""
#include <cstdlib>
#include <thread>
Tensor& plain_abort_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  const float* in = x.const_data_ptr<float>();
  if (in[0] < 0.0f) std::abort();
  if (in[0] > 1.0f) std::thread([] { std::abort(); }).join();
  return out;
}
"""


@pytest.mark.parametrize("x0, thread", [(-1.0, "calling"), (2.0, "another")])
def test_a_kernel_calling_abort_names_itself_before_the_process_ends(cache, x0, thread):
    """abort() is no ExecuTorch abort (nothing unwinds it): the process still ends
    with SIGABRT, and stderr names the kernel that was running, once."""
    result = run_fresh(f"""
        import torch, etops
        etops.register_kernel("abortlib::plain_abort.out", {PLAIN_ABORT!r}, function="plain_abort_out",
                              schema="plain_abort.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
        kernel = etops.registry().get_kernel("abortlib::plain_abort.out")
        kernel(torch.ones(1), out=torch.empty(1))
        kernel(torch.tensor([{x0}]), out=torch.empty(1))
        print("survived")
    """, cache, timeout=120, dies_of_a_fault=True)
    assert result.returncode == -signal.SIGABRT and "survived" not in result.stdout, result.stderr[-2000:]
    notices = [line for line in result.stderr.splitlines() if line.startswith("etops:")]
    assert len(notices) == 1 and "abortlib::plain_abort.out" in notices[0] and "SIGABRT" in notices[0], notices


def test_an_executorch_abort_on_another_thread_prints_one_notice(cache):
    """etops' own notice of an ExecuTorch abort it cannot unwind is the only one: the
    SIGABRT that follows adds none. (The interpreter of the test before: one death
    asked two things.)"""
    result = a_thread_ending_run(cache, "abortlib::on_thread.out", ON_A_THREAD, "on_thread_out", dies_of_a_fault=True)
    assert result.returncode == -signal.SIGABRT, result.stderr[-2000:]
    notices = [line for line in result.stderr.splitlines() if line.startswith("etops:")]
    assert len(notices) == 1 and "planted on a worker thread" in notices[0], notices
