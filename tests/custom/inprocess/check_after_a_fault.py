"""After a trapped fault, going on only where it is safe (docs/reliability.md): a
kernel that faulted runs its later calls guarded (its own locks cannot be seen), a
fault in the C library taints the process (every call guarded until
etops.clear_taint()) and releases the malloc lock it left held, a fault inside an
item of a threadpool region abandons the item, not the region, and the exception
says which outs may be partly written. Every case that hung or died before runs in
a fresh interpreter under a timeout, so a regression fails instead of hanging."""

from __future__ import annotations

import os
import pickle
from textwrap import dedent

import pytest
import torch
from custom_helpers import cache, run_fresh  # noqa: F401

import etops
from etops.slow_path import SLOW_PATH

#: locks a static std::mutex, then writes through a null pointer when x[0] < 0
LOCKED = r"""
#include <mutex>
static std::mutex g_lock;
Tensor& locked_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  std::lock_guard<std::mutex> hold(g_lock);
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  volatile float* null_pointer = nullptr;
  if (x.numel() > 0 && in[0] < 0) null_pointer[4] = 1.0f;
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = in[i] + 1.0f;
  return out;
}
"""

#: x[0] == -1: free() of a fake chunk whose next chunk is unmapped (glibc takes the
#: arena lock, then faults reading it); x[0] == -2: strlen() of a null pointer; x[0] ==
#: -3: _dl_find_object, whose lookup runs in the dynamic loader, answering through a
#: null pointer
IN_LIBC = r"""
#include <dlfcn.h>
#include <sys/mman.h>
#include <cstdint>
#include <cstdlib>
#include <cstring>
Tensor& in_libc_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  if (x.numel() > 0 && in[0] == -1.0f) {
    /* below the heap, so that free() passes glibc's bounds check and takes the lock */
    char* page = (char*)mmap((void*)0x200000000ull, 8192, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (page == MAP_FAILED) return out;
    munmap(page + 4096, 4096);
    uint64_t* chunk = (uint64_t*)(page + 16);
    chunk[1] = 0x2000 | 1; /* 8 KiB, previous chunk in use: its next chunk is the unmapped page */
    free((void*)(chunk + 2));
  }
  if (x.numel() > 0 && in[0] == -2.0f) o[0] = (float)strlen((const char*)(uintptr_t)16);
  if (x.numel() > 0 && in[0] == -3.0f) /* the loader writes its answer through a null pointer */
    o[0] = (float)_dl_find_object((void*)&in_libc_out, (struct dl_find_object*)(uintptr_t)16);
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = in[i] + 1.0f;
  return out;
}
"""

#: writes 1000 + i into the first half of out, then through a null pointer when x[0] < 0
HALF_WRITTEN = r"""
Tensor& half_written_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < x.numel() / 2; i++) o[i] = 1000.0f + i;
  volatile float* null_pointer = nullptr;
  if (x.numel() > 0 && in[0] < 0) null_pointer[4] = 1.0f;
  for (ssize_t i = x.numel() / 2; i < x.numel(); i++) o[i] = 7.0f;
  return out;
}
"""

_HANDLES: dict = {}


def _kernel(name: str, source: str):
    if name not in _HANDLES:
        _HANDLES[name] = etops.register_kernel(f"afterlib::{name}.out", source, function=f"{name}_out",
                                               schema=f"{name}.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    return etops.registry().get_kernel(f"afterlib::{name}.out")


@pytest.fixture(autouse=True)
def fault_marks_cleared():
    etops.clear_taint()
    yield
    etops.clear_taint()


@pytest.fixture
def guarded_calls(monkeypatch):
    """The kernels whose calls the fault marks sent to the guard process, in order."""
    seen: list = []
    guarded = SLOW_PATH.guarded

    def record(kernel, values, is_delegate):
        seen.append(kernel._info.name)
        return guarded(kernel, values, is_delegate)

    monkeypatch.setattr(SLOW_PATH, "guarded", record)
    return seen


def _register(name: str, source: str) -> str:
    """Source lines registering kernel afterlib::`name` (as `k`) in a fresh interpreter."""
    return (f"import torch, etops\n"
            f"etops.register_kernel('afterlib::{name}.out', {source!r}, function='{name}_out', "
            f"schema='{name}.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)')\n"
            f"k = etops.registry().get_kernel('afterlib::{name}.out')\n")


def _ok(result, *expected: str) -> None:
    assert result.returncode == 0, result.stderr[-3000:]
    for line in expected:
        assert line in result.stdout.splitlines(), (line, result.stdout, result.stderr[-2000:])


# ---- the kernel's own locks -----------------------------------------------------------


def test_a_kernel_faulting_while_holding_its_mutex_costs_an_exception_never_a_hang(cache):
    """Before: the second call blocked forever on the mutex the abandoned frame held."""
    result = run_fresh(_register("locked", LOCKED) + dedent("""
        import etops.guard.server as server
        server.STALL_SECONDS = 2.0  # a blocked guard process is killed after 2 s of no CPU time
        assert k(torch.ones(4), out=torch.empty(4)).tolist() == [2.0] * 4
        try:
            k(-torch.ones(4), out=torch.empty(4))
        except etops.KernelCrashed as error:
            assert "later calls of afterlib::locked.out run guarded" in str(error)
        print("faulted", etops.kernel_faulted(k), etops.taint())
        try:
            k(torch.ones(4), out=torch.empty(4))  # guarded: the fork holds the mutex too
        except etops.GuardTimeout as error:
            print("timeout", error.stalled)
        print(etops.registry().aten.add.out(torch.ones(2), torch.ones(2), out=torch.empty(2)).tolist())
    """), cache, timeout=120)
    _ok(result, "faulted True None", "timeout True", "[2.0, 2.0]")


def test_after_any_fault_the_kernel_runs_guarded_until_cleared(cache, guarded_calls):
    k = _kernel("half_written", HALF_WRITTEN)
    with pytest.raises(etops.KernelCrashed):
        k(-torch.ones(4), out=torch.empty(4))
    assert etops.kernel_faulted(k) and etops.taint() is None  # the kernel's own code: no taint
    assert k(torch.ones(4), out=torch.empty(4)).tolist() == [1000.0, 1001.0, 7.0, 7.0]
    assert guarded_calls == ["afterlib::half_written.out"]
    add = etops.registry().aten.add.out  # other kernels stay in this process
    assert add(torch.ones(2), torch.ones(2), out=torch.empty(2)).tolist() == [2.0, 2.0]
    assert guarded_calls == ["afterlib::half_written.out"]
    etops.clear_taint()
    assert not etops.kernel_faulted(k)
    assert k(torch.ones(4), out=torch.empty(4)).tolist() == [1000.0, 1001.0, 7.0, 7.0]
    assert guarded_calls == ["afterlib::half_written.out"]
    with pytest.raises(TypeError, match="argument 'kernel'"):
        etops.kernel_faulted("afterlib::half_written.out")


# ---- faults in the C library --------------------------------------------------------


@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="ASan's allocator replaces glibc's malloc: no arena lock for a fault in free() to leave held")
def test_a_fault_inside_free_taints_the_process_and_nothing_hangs(cache):
    """Before: the exception's own message waited forever on malloc's arena lock
    (and the exception said memory_may_be_corrupt=False)."""
    result = run_fresh(_register("in_libc", IN_LIBC) + dedent("""
        try:
            k(torch.tensor([-1.0, 0.0]), out=torch.empty(2))
        except etops.KernelCrashed as error:
            print("corrupt", error.memory_may_be_corrupt, "C library" in error.why, "etops.clear_taint()" in str(error))
        taint = etops.taint()
        print("taint", taint.site, taint.op, taint.released_locks >= 1)
        blobs = [bytes(200000) for _ in range(20)]  # the allocator works: its lock was released
        print(etops.registry().aten.add.out(torch.ones(2), torch.ones(2), out=torch.empty(2)).tolist())
        print("guarded", etops.guard.guard_pid() is not None)  # the add ran in the guard process
        etops.clear_taint()
        print("cleared", etops.taint(), etops.kernel_faulted(k))
        print(etops.registry().aten.add.out(torch.ones(2), torch.ones(2), out=torch.empty(2)).tolist())
    """), cache, timeout=120)
    _ok(result, "corrupt True True True", "taint libc afterlib::in_libc.out True", "[2.0, 2.0]", "guarded True",
        "cleared None False")


def test_a_read_fault_in_the_c_library_taints_and_every_call_runs_guarded(cache, guarded_calls):
    k = _kernel("in_libc", IN_LIBC)
    with pytest.raises(etops.KernelCrashed) as caught:
        k(torch.tensor([-2.0, 0.0, 0.0]), out=torch.empty(3))  # strlen(NULL): a read
    error = caught.value
    assert error.access == "read" and error.memory_may_be_corrupt  # a read, but the site taints
    assert "libc.so.6" in error.why and "the process is tainted" in str(error)
    assert etops.taint() == etops.Taint("afterlib::in_libc.out", "libc", error.why, etops.taint().released_locks)
    add = etops.registry().aten.add.out
    assert add(torch.ones(2), torch.ones(2), out=torch.empty(2)).tolist() == [2.0, 2.0]
    assert guarded_calls == ["aten::add.out"]  # another kernel: guarded too
    restored = pickle.loads(pickle.dumps(error))
    assert (restored.why, restored.memory_may_be_corrupt) == (error.why, True)
    etops.clear_taint()
    assert etops.taint() is None
    assert add(torch.ones(2), torch.ones(2), out=torch.empty(2)).tolist() == [2.0, 2.0]
    assert guarded_calls == ["aten::add.out"]  # in-process again


def test_a_fault_in_the_dynamic_loader_taints(cache):
    k = _kernel("in_libc", IN_LIBC)
    with pytest.raises(etops.KernelCrashed) as caught:
        k(torch.tensor([-3.0, 0.0, 0.0, 0.0, 0.0]), out=torch.empty(5))
    assert "dynamic loader" in caught.value.why and caught.value.memory_may_be_corrupt
    assert etops.taint().site == "loader"


def test_the_site_is_the_library_holding_the_program_counter():
    """Decided from the address alone (dladdr): the C library, the loader, libstdc++'s
    operator new and delete (not the rest of libstdc++), and nothing else."""
    import ctypes

    def address(library: str | None, symbol: str) -> int:
        return ctypes.cast(getattr(ctypes.CDLL(library), symbol), ctypes.c_void_p).value

    site = etops._native.fault_site
    assert site(address("libc.so.6", "strlen") + 1) == "libc"
    assert site(address("libc.so.6", "free")) == "libc"
    loader = next(line.split()[-1] for line in open("/proc/self/maps") if "/ld-linux" in line)  # the mapped ld.so
    assert site(address(loader, "__tls_get_addr") + 1) == "loader"  # its own (ASan interposes the global one)
    assert site(address("libstdc++.so.6", "_Znwm") + 1) == "allocator"  # operator new(size_t)
    assert site(address("libstdc++.so.6", "_ZdlPv")) == "allocator"  # operator delete(void*)
    assert site(address("libstdc++.so.6", "_ZNSt6thread6detachEv")) == ""  # std::thread::detach
    assert site(id(site)) == "" and site(0) == ""


# ---- the threadpool ---------------------------------------------------------------------


def test_a_fault_on_the_threadpool_leaves_later_parallel_calls_working(cache):
    """floor_divide.out of INT64_MIN by -1 on 40,000 elements runs on ExecuTorch's
    threadpool. Before: the process died (a worker's fault) or the next 40,000-element
    call hung (the caller's fault left the pool's lock held)."""
    result = run_fresh("""
        import torch, etops
        reg = etops.registry()
        floor_divide, n = reg.aten.floor_divide.out, 40000
        x, three = torch.arange(n), torch.full((n,), 3, dtype=torch.long)
        out = torch.empty(n, dtype=torch.long)
        for round in range(3):
            try:
                floor_divide(torch.full((n,), -2**63), torch.full((n,), -1), out=out)
            except etops.KernelCrashed as error:
                print("crashed", error.signal, error.outs_may_be_partial)
            small = floor_divide(torch.tensor([7]), torch.tensor([2]), out=torch.empty(1, dtype=torch.long))
            assert small.tolist() == [3]
            for _ in range(2):  # guarded: the kernel faulted
                assert torch.equal(floor_divide(x, three, out=out), x // 3)
            etops.clear_taint()
            for _ in range(3):  # in this process, on the pool, which stayed whole
                assert torch.equal(floor_divide(x, three, out=out), x // 3)
                assert torch.equal(reg.aten.add.out(x, x, out=torch.empty(n, dtype=torch.long)), 2 * x)
            print("round", round)
    """, cache, timeout=300)
    _ok(result, "crashed SIGFPE ('out',)", "round 0", "round 1", "round 2")


# ---- the outs ---------------------------------------------------------------------------


def test_a_fault_on_a_warm_signature_says_the_out_may_be_partly_written(cache):
    k = _kernel("half_written", HALF_WRITTEN)
    out = torch.zeros(8)
    for _ in range(3):  # the signature probed clean, then steady: the kernel writes the caller's out
        k(torch.ones(8), out=out)
    out.zero_()
    with pytest.raises(etops.KernelCrashed) as caught:
        k(-torch.ones(8), out=out)
    assert caught.value.outs_may_be_partial == ("out",)
    assert "out argument 'out' may be partly written" in str(caught.value)
    assert out.tolist() == [1000.0, 1001.0, 1002.0, 1003.0, 0.0, 0.0, 0.0, 0.0]


def test_a_fault_on_a_first_call_leaves_the_out_as_it_was(cache):
    k = _kernel("half_written", HALF_WRITTEN)
    out = torch.zeros(6)  # a new signature: the call is a probe, on etops' copy of the out
    with pytest.raises(etops.KernelCrashed) as caught:
        k(-torch.ones(6), out=out)
    assert caught.value.outs_may_be_partial == ()
    assert "partly written" not in str(caught.value)
    assert out.tolist() == [0.0] * 6


def test_a_delegate_of_a_tainted_process_is_refused_saying_why(cache):
    """The guard process cannot run a delegate: in a tainted process its call is
    refused with the taint's reason, and runs again once cleared."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    model = torch.nn.Linear(4, 2).eval()
    edge = to_edge_transform_and_lower(torch.export.export(model, (torch.ones(1, 4),)),
                                       partitioner=[XnnpackPartitioner()])
    run = etops.delegate.load(etops.delegate.lowered_modules(edge)[0])
    expected = run(torch.ones(1, 4))
    with pytest.raises(etops.KernelCrashed):
        _kernel("in_libc", IN_LIBC)(torch.tensor([-2.0, 0.0, 0.0, 0.0]), out=torch.empty(4))
    with pytest.raises(etops.TaintedError, match="the process is tainted since afterlib::in_libc.out faulted"):
        run(torch.ones(1, 4))
    etops.clear_taint()
    assert torch.equal(run(torch.ones(1, 4)), expected)
