"""A kernel that runs out of its thread's stack is blamed on the stack, from the
addresses (docs/reliability.md): a fault at the end of the faulting thread's stack
is a stack overflow (KernelCrashed.where "stack overflow", no argument; the Fault's
stack_overflow), not a write past the nearest tensor argument. On the calling thread
(the main thread or a Python thread, each with etops' alternate signal stack) it is
trapped and the next call works; in a guarded call the guard process's report says
it too; on a thread the kernel starts it ends the process with a notice saying so."""

from __future__ import annotations

import signal
import threading

import pytest
import torch
from custom_helpers import cache, failures, run_fresh  # noqa: F401

import etops

#: x[0] < 0: recurses without end (each frame 256 bytes the compiler cannot drop)
RECURSES = r"""
static int deeper(volatile char* above, int depth) {
  volatile char frame[256];
  frame[0] = static_cast<char>(depth);
  frame[255] = above[0];
  return deeper(frame, depth + 1) + frame[1];
}
Tensor& recurses_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  ET_KERNEL_CHECK(ctx, x.scalar_type() == ScalarType::Float && out.numel() == x.numel(), InvalidArgument, out);
  char top = 0;
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  if (x.numel() > 0 && in[0] < 0.0f) o[0] = static_cast<float>(deeper(&top, 0));
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = in[i] + 1.0f;
  return out;
}
"""

#: recurses without end on a thread of its own that has an alternate signal stack
#: (so a handler can run there and print a notice)
RECURSES_ON_A_THREAD = r"""
#include <csignal>
#include <thread>
static int deeper(volatile char* above, int depth) {
  volatile char frame[256];
  frame[0] = static_cast<char>(depth);
  frame[255] = above[0];
  return deeper(frame, depth + 1) + frame[1];
}
Tensor& thread_recurses_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  std::thread worker([] {
    static char altstack[1 << 16];
    stack_t alt{};
    alt.ss_sp = altstack;
    alt.ss_size = sizeof altstack;
    sigaltstack(&alt, nullptr);
    char top = 0;
    deeper(&top, 0);
  });
  worker.join();
  return out;
}
"""

#: writes through a null pointer: a fault nowhere near a stack
NULL_WRITE = r"""
Tensor& null_write_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  volatile float* null_pointer = nullptr;
  null_pointer[4] = 1.0f;
  return out;
}
"""

_MEMO: dict = {}


@pytest.fixture
def recurses(cache):
    if "recurses" not in _MEMO:
        _MEMO["recurses"] = etops.register_kernel(
            "stacklib::recurses.out", RECURSES, function="recurses_out",
            schema="recurses.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    return etops.registry().get_kernel("stacklib::recurses.out")


def _assert_a_stack_overflow(kernel, failures) -> None:
    """A warm signature's call recursing without end raises a KernelCrashed blamed
    on the stack, and the next call works (guarded: the kernel faulted)."""
    etops.clear_taint()  # in process again, whatever an earlier test left marked
    out = torch.empty(4)
    for _ in range(2):  # the second call runs on the caller's memory, unprobed
        assert kernel(torch.ones(4), out=out).tolist() == [2.0] * 4
    with pytest.raises(etops.KernelCrashed) as caught:
        kernel(-torch.ones(4), out=out)
    error = caught.value
    assert (error.signal, error.where, error.argument, error.offset) == ("SIGSEGV", "stack overflow", None, None)
    assert error.memory_may_be_corrupt is False  # the write hit the guard below the stack: nothing outside written
    assert failures[-1].fault.stack_overflow is True and failures[-1].fault.argument is None
    assert "stack overflow" in str(error) and "of argument '" not in str(error)  # no argument blamed
    assert kernel(torch.ones(4), out=out).tolist() == [2.0] * 4


def test_a_stack_overflow_on_the_calling_thread_is_trapped_and_blamed_on_the_stack(recurses, failures):
    _assert_a_stack_overflow(recurses, failures)


def test_a_stack_overflow_on_a_python_thread_is_blamed_on_the_stack(recurses, failures):
    """A Python thread's stack is a mapping among the heap's: its end lay some
    megabytes from the tensors, and the fault was called a write past the end of
    one of them."""
    errors: list = []

    def run() -> None:
        try:
            _assert_a_stack_overflow(recurses, failures)
        except BaseException as error:  # noqa: BLE001 - re-raised on the test's thread
            errors.append(error)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if errors:
        raise errors[0]


def test_a_null_write_is_no_stack_overflow(cache, failures):
    etops.register_kernel("stacklib::null_write.out", NULL_WRITE, function="null_write_out",
                          schema="null_write.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    kernel = etops.registry().get_kernel("stacklib::null_write.out")
    with pytest.raises(etops.KernelCrashed) as caught:
        kernel(torch.ones(1), out=torch.empty(1))
    assert caught.value.where is None and failures[-1].fault.stack_overflow is False


def test_a_stack_overflow_on_a_thread_the_kernel_starts_ends_the_process_saying_so(cache):
    result = run_fresh(f"""
        import torch, etops
        etops.register_kernel("stacklib::thread_recurses.out", {RECURSES_ON_A_THREAD!r},
                              function="thread_recurses_out",
                              schema="thread_recurses.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
        etops.registry().get_kernel("stacklib::thread_recurses.out")(torch.ones(1), out=torch.empty(1))
        print("survived")
    """, cache, timeout=120, dies_of_a_fault=True)
    assert result.returncode == -signal.SIGSEGV and "survived" not in result.stdout, result.stderr[-2000:]
    notice = [line for line in result.stderr.splitlines() if line.startswith("etops: SIGSEGV")]
    assert len(notice) == 1, result.stderr[-2000:]
    assert "a stack overflow" in notice[0] and "stacklib::thread_recurses.out" in notice[0]


def test_a_stack_overflow_in_a_guarded_call_is_blamed_on_the_stack(recurses):
    """The guard process's reporter records the stack pointer too: its stack's end
    was placed relative to the tensors ('x' a terabyte past the end)."""
    from etops.guard import call

    with pytest.raises(etops.KernelCrashed) as caught:
        call(recurses, -torch.ones(4), out=torch.empty(4))
    error = caught.value
    assert (error.signal, error.where, error.argument) == ("SIGSEGV", "stack overflow", None), str(error)
    assert call(recurses, torch.ones(4), out=torch.empty(4)).tolist() == [2.0] * 4
