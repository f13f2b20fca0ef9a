"""etops.guard.call on registered kernels: a clean call gives what the unguarded
call gives (outs copied back into the caller's), the kernel's and torch's errors
come through unchanged, and the process goes on. Kernels that fault on purpose are
in tests/custom/inprocess/check_guard.py (they need the custom-kernel toolchain)."""

import pickle

import pytest
import torch

import etops


def test_clean_call_matches_the_unguarded_one(reg):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    out = torch.empty(2, 3)
    assert etops.guard.call(reg.aten.add.out, a, b, alpha=2, out=out) is out
    assert torch.equal(out, reg.aten.add.out(a, b, alpha=2))
    assert torch.equal(etops.guard.call("aten::mul.out", a, 3), reg.aten.mul.out(a, 3))


def test_multiple_outs_and_wrongly_shaped_outs(reg):
    x = torch.randn(4, 9)
    values, indices = etops.guard.call(reg.aten.topk.values, x, 3)
    want = reg.aten.topk.values(x, 3)
    assert torch.equal(values, want[0]) and torch.equal(indices, want[1])
    small = torch.empty(1)
    z = torch.randn(3, dtype=torch.complex64)
    with pytest.warns(UserWarning):
        expected = reg.aten.view_as_real_copy.out(z, out=torch.empty(1))
    assert etops.guard.call(reg.aten.view_as_real_copy.out, z, out=small) is small
    assert torch.equal(small, expected)


def test_errors_come_through_as_unguarded(reg):
    with pytest.raises(ValueError, match="torch refuses"):
        etops.guard.call(reg.aten.add.out, torch.randn(3), torch.randn(4), out=torch.empty(4))
    u = torch.zeros(2, dtype=torch.uint16)
    with pytest.raises(etops.KernelError, match="UInt16"):
        etops.guard.call(reg.aten.add.out, u, u, out=torch.empty(2, dtype=torch.uint16))
    with pytest.raises(TypeError, match="argument 'op'"):
        etops.guard.call(42, torch.ones(2))


def test_kernel_crashed_carries_the_fault_and_pickles():
    err = etops.KernelCrashed("test::op.out", "SIGSEGV", "out", "write", "past the end", 0, "log line\n")
    assert "write past the end of argument 'out' (its first byte beyond it)" in str(err)
    again = pickle.loads(pickle.dumps(err))
    assert (again.argument, again.access, again.where, again.offset) == ("out", "write", "past the end", 0)
    assert isinstance(err, RuntimeError) and isinstance(err, etops.EtopsError)


def test_wrongly_shaped_out_is_resized_before_the_kernel(reg):
    """view_as_real_copy resized a rank-1 out to [n] (ExecuTorch cannot change an
    out's rank) and wrote 2n floats into it: past the end of a small out. etops
    resizes outs to torch's shape first, as torch's out= does."""
    z = torch.randn(3, dtype=torch.complex64)
    for out in (torch.empty(3), torch.empty(6), torch.empty(1)):
        with pytest.warns(UserWarning, match="resized"):
            assert reg.aten.view_as_real_copy.out(z, out=out) is out
        assert out.shape == (3, 2) and torch.equal(out, torch.view_as_real(z))


def test_guarded_calls_refuse_what_unguarded_calls_refuse(reg):
    """Found by the guarded fuzz campaign: outs the kernel cannot write are refused
    naming the argument before the guard process runs, as unguarded."""
    import numpy as np

    expanded = torch.empty(1).expand(3)
    for call in (reg.aten.log2.out, lambda *a, **k: etops.guard.call(reg.aten.log2.out, *a, **k)):
        with pytest.raises(ValueError, match="argument 'out' is expanded"):
            call(torch.ones(3), out=expanded)
    read_only = np.zeros((2, 4), dtype=np.float32)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="argument 'out' is read-only"):
        etops.guard.call(reg.aten.ones.out, [2, 4], out=read_only)


def test_guarded_calls_give_back_the_outs_they_allocated_for_kernels_returning_nothing(reg):
    x = torch.rand(2, 3)
    parts = etops.guard.call(reg.aten.unbind_copy.int_out, x)
    assert [p.tolist() for p in parts] == [p.tolist() for p in reg.aten.unbind_copy.int_out(x)] == [r.tolist() for r in x]


def test_a_released_buffer_is_reused_with_its_guard_regions_still_closed():
    """Mappings go back to a pool after each guarded call (child.py releases them
    once the outcome holds copies); the next buffer of that size takes one, gets
    its own values, and an access past its data still faults."""
    import ctypes
    import os
    import signal

    import torch
    from etops.guard.buffers import GuardedBuffer

    first = GuardedBuffer(100, "before")
    first.tensor_like(torch.full((25,), 7.0))
    first.make_read_only()
    first.release()
    again = GuardedBuffer(100, "after")
    assert again.map_start == first.map_start
    values = torch.arange(25, dtype=torch.float32)
    t = again.tensor_like(values)  # writable again: the first one was left read-only
    assert torch.equal(t, values) and again.data_end == again.map_end - again.reach
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGSEGV, signal.SIG_DFL)
        ctypes.memset(again.data_end, 0, 1)  # one byte past the data: the guard region after it
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSEGV


def test_a_reused_mapping_refills_its_tensor_and_opens_its_pages_only_when_closed():
    """A buffer that reuses a released mapping for a tensor of the same kind
    fills the tensor made before (no new one); a tensor a call reshaped is made
    anew; an input's read-only pages are made writable for the next buffer, an
    out's writable ones are left as they are."""
    import torch
    from etops.guard import buffers
    from etops.guard.buffers import GuardedBuffer

    while buffers._take(buffers.PAGE, buffers.pages(buffers.DEFAULT_REACH)) is not None:
        pass  # the pool's mappings of this size (earlier calls'), whatever their state
    calls = []
    original = buffers._protect
    buffers._protect = lambda *a: (calls.append(a[2]), original(*a))[1]
    try:
        first = GuardedBuffer(100, "after")
        t1 = first.tensor_like(torch.zeros(5, 5))
        first.release()  # left writable (an out)
        second = GuardedBuffer(100, "after")
        t2 = second.tensor_like(torch.ones(5, 5))
        assert t2 is t1 and torch.equal(t2, torch.ones(5, 5)) and calls == [buffers._PROT_READ_WRITE]
        second.make_read_only()
        second.release()
        t2.resize_(25)  # what a call may do to a tensor's shape (its memory stays)
        third = GuardedBuffer(100, "after")
        t3 = third.tensor_like(torch.full((5, 5), 2.0))
        assert t3 is not t2 and t3.shape == (5, 5) and torch.equal(t3, torch.full((5, 5), 2.0))
        assert calls == [buffers._PROT_READ_WRITE, buffers._PROT_READ, buffers._PROT_READ_WRITE]
        third.release()
    finally:
        buffers._protect = original
