"""Guarded calls (etops.guard.call) against kernels of our own that misbehave on
purpose: one element past their out, one before their input, a write into an
input the schema does not mark mutable; each is reported at the access, naming the
argument. A correct kernel gives the same result guarded and unguarded."""

from __future__ import annotations

import os

import pytest
import torch
from custom_helpers import SCALE_SOURCE, TWICE_SCHEMA, cache  # noqa: F401

import etops

SCHEMA = "{name}.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)"

BODIES = {
    # writes out[numel]: one float past the end of 'out'
    "past_out": "o[x.numel()] = 1.0f;",
    # reads in[-1]: one float before the start of 'x'
    "before_in": "o[0] = in[-1];",
    # writes into 'x', which the schema does not mark mutable
    "into_input": "const_cast<float*>(in)[0] = 3.0f;",
    # divides by x's first element, an int zero: SIGFPE, no memory touched
    "divide": "volatile int zero = (int)in[0]; o[0] = (float)(7 / zero);",
    # reads a tebibyte past 'x': no guard region of the call's reaches it
    "far_read": "o[0] = in[(ssize_t)1 << 38];",
}

_KERNELS: dict = {}


def _bad(name):
    if name not in _KERNELS:
        source = f"""
Tensor& {name}_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {{
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = in[i];
  {BODIES[name]}
  return out;
}}
"""
        _KERNELS[name] = etops.register_kernel(f"gtest::{name}.out", source, schema=SCHEMA.format(name=name)).kernel
    return _KERNELS[name]


def test_write_past_the_out_is_reported(cache):
    x = torch.arange(6.0)
    with pytest.raises(etops.KernelCrashed) as info:
        etops.guard.call(_bad("past_out"), x, out=torch.empty(6))
    err = info.value
    assert (err.signal, err.argument, err.access, err.where, err.offset) == ("SIGSEGV", "out", "write", "past the end", 0), str(err)
    assert "gtest::past_out.out" in str(err) and "'out'" in str(err)


def test_read_before_the_input_is_reported(cache):
    with pytest.raises(etops.KernelCrashed) as info:
        etops.guard.call(_bad("before_in"), torch.arange(6.0), out=torch.empty(6))
    err = info.value
    assert (err.argument, err.access, err.where, err.offset) == ("x", "read", "before the start", 3), str(err)  # 0: the first byte before it


def test_write_into_an_input_not_marked_mutable_is_reported(cache):
    x = torch.arange(6.0)
    with pytest.raises(etops.KernelCrashed) as info:
        etops.guard.call(_bad("into_input"), x, out=torch.empty(6))
    err = info.value
    assert (err.argument, err.access, err.where, err.offset) == ("x", "write", "inside a read-only input", 0), str(err)
    assert torch.equal(x, torch.arange(6.0))  # the caller's tensor was never touched


def test_a_correct_kernel_gives_the_same_result_guarded(cache):
    kernel = etops.register_kernel("gtest::thrice.out", SCALE_SOURCE.replace("K *", "3 *"), schema=TWICE_SCHEMA.replace("twice", "thrice")).kernel
    x = torch.randn(3, 5)
    out = torch.empty(3, 5)
    assert etops.guard.call(kernel, x, out=out) is out
    assert torch.equal(out, kernel(x, out=torch.empty(3, 5)))
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    allocated = etops.guard.call("aten::add.out", a, b, alpha=2)  # the outs sized as unguarded
    assert torch.equal(allocated, etops.registry().aten.add.out(a, b, alpha=2))
    values, indices = etops.guard.call(etops.registry().aten.topk.values, torch.randn(4, 9), 3)
    assert values.shape == indices.shape == (4, 3)


def test_the_process_survives_and_unguarded_calls_still_run(cache):
    with pytest.raises(etops.KernelCrashed):
        etops.guard.call(_bad("past_out"), torch.ones(3), out=torch.empty(3))
    a = torch.ones(2)
    assert torch.equal(etops.registry().aten.add.out(a, a), a + a)


def test_one_guard_process_serves_calls_until_a_crash(cache):
    op = etops.registry().aten.add.out
    a = torch.randn(2, 3)
    etops.guard.call(op, a, a, out=torch.empty(2, 3))
    pid = etops.guard.guard_pid()
    assert pid is not None
    for k in range(3):
        assert torch.equal(etops.guard.call(op, a, a, alpha=k), a + k * a)
    assert etops.guard.guard_pid() == pid  # no fork per call
    with pytest.raises(etops.KernelCrashed):
        etops.guard.call(_bad("past_out"), torch.ones(3), out=torch.empty(3))
    assert etops.guard.guard_pid() is None  # the crash ended it
    assert torch.equal(etops.guard.call(op, a, a), a + a)
    assert etops.guard.guard_pid() not in (None, pid)


def test_a_kernel_registered_after_the_fork_is_served(cache):
    op = etops.registry().aten.mul.out
    x = torch.randn(4)
    etops.guard.call(op, x, x)
    before = etops.guard.guard_pid()
    kernel = etops.register_kernel("gtest::fourfold.out", SCALE_SOURCE.replace("K *", "4 *"),
                                   schema=TWICE_SCHEMA.replace("twice", "fourfold")).kernel
    assert torch.equal(etops.guard.call(kernel, x, out=torch.empty(4)), 4 * x)
    assert etops.guard.guard_pid() != before  # the registry changed: forked anew
    assert torch.equal(etops.guard.call(op, x, x), x * x)


def test_a_forked_child_gets_a_guard_process_of_its_own(cache):
    import os

    op = etops.registry().aten.add.out
    x = torch.randn(3)
    etops.guard.call(op, x, x)
    parent_guard = etops.guard.guard_pid()
    pid = os.fork()
    if pid == 0:
        ok = etops.guard.guard_pid() is None and torch.equal(etops.guard.call(op, x, x), x + x)
        ok = ok and etops.guard.guard_pid() not in (None, parent_guard)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert etops.guard.guard_pid() == parent_guard
    assert torch.equal(etops.guard.call(op, x, x), x + x)


def test_a_kernel_writing_past_its_out_fails_its_opinfo_check_guarded(cache):
    """etops.testing with guard=True: a kernel of one's own standing in for add that
    writes one float past its out on broadcast inputs fails its check as a crash
    naming the argument and the inputs (unguarded it corrupts the heap)."""
    from etops import testing

    source = """
Tensor& badadd_out(KernelRuntimeContext& ctx, const Tensor& self, const Tensor& other, Tensor& out) {
  float* o = out.mutable_data_ptr<float>();
  if (self.numel() == out.numel() && other.numel() == out.numel()) {
    for (ssize_t i = 0; i < out.numel(); i++) o[i] = self.const_data_ptr<float>()[i] + other.const_data_ptr<float>()[i];
  } else {
    for (ssize_t i = 0; i <= out.numel(); i++) o[i] = 0.0f;  // broadcast: one float past the end
  }
  return out;
}
"""
    etops.register_kernel("gtest::badadd.out", source, schema="badadd.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)")
    case = testing.opinfo_cases("gtest::badadd.out", op="add", aten="aten::add.Tensor", dtypes=["float32"], guard=True)[0]
    with pytest.raises(AssertionError) as info:
        case.check()
    text = str(info.value)
    assert " crash" in text and "write past the end of argument 'out'" in text and "inputs: Tensor[" in text, text


DIM_ORDER_OF = r"""
Tensor& dim_order_of_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  int64_t* o = out.mutable_data_ptr<int64_t>();
  for (ssize_t i = 0; i < x.dim(); i++) o[i] = x.dim_order()[i];
  return out;
}
"""


def _channels_last(t):
    return t.contiguous(memory_format=torch.channels_last)


def _transposed(t):
    return t.transpose(2, 3).contiguous().transpose(2, 3)


@pytest.mark.parametrize("mode, lay, dim_order", [
    ("programs", _channels_last, [0, 2, 3, 1]),  # zero-copy, as a program passes it
    ("programs", _transposed, [0, 1, 2, 3]),     # copied contiguous, as a program would have it
    ("preserve", _channels_last, [0, 2, 3, 1]),
    ("preserve", _transposed, [0, 1, 3, 2]),     # passed as it is
])
def test_a_guarded_call_gives_the_kernel_the_layout_an_unguarded_call_gives(cache, mode, lay, dim_order):
    """The guard process's copies keep the dim order the call path would pass (its
    guarded memory holds the tensor's elements in their own order)."""
    if "dim_order_of" not in _KERNELS:
        _KERNELS["dim_order_of"] = etops.register_kernel("gtest::dim_order_of.out", DIM_ORDER_OF,
                                                         schema=SCHEMA.format(name="dim_order_of")).kernel
    kernel = _KERNELS["dim_order_of"]
    x = lay(torch.rand(2, 3, 4, 5))
    with etops.layout(mode):
        direct = kernel(x, out=torch.zeros(4, dtype=torch.long))
        guarded = etops.guard.call(kernel, x, out=torch.zeros(4, dtype=torch.long))
    assert direct.tolist() == dim_order, direct
    assert guarded.tolist() == dim_order, guarded


def _in_a_task_process(work):
    """work() in a forked process that entered etops.guard.here (etops dev's task
    processes): its value, or BackgroundFailed naming how the process ended."""
    from etops.dev.background import Background
    from etops.guard import here

    def entered():
        here.enter()
        return work()

    return Background(entered).result()


def test_a_process_running_guarded_calls_itself_survives_the_faults_the_guard_names(cache):
    """A fault the guard process would name at once (past an out, before an input,
    into a read-only input), or that touches no memory (SIGFPE), is trapped in a
    process running its guarded calls itself: the call raises the KernelCrashed the
    guard process gives, and the same process makes its next calls, with no guard
    process. Before, each such case ended the task process and cost a fork or two."""
    names = ("past_out", "before_in", "into_input", "divide")
    kernels = {name: _bad(name) for name in names}
    x = torch.arange(6.0)
    expected = {}
    for name in names:
        with pytest.raises(etops.KernelCrashed) as info:
            etops.guard.call(kernels[name], torch.zeros(6) if name == "divide" else x, out=torch.empty(6))
        expected[name] = str(info.value)
    assert "SIGFPE" in expected["divide"]

    def work():
        seen = {}
        for name in names + names:  # each twice: the process goes on after each
            try:
                etops.guard.call(kernels[name], torch.zeros(6) if name == "divide" else x, out=torch.empty(6))
                seen[name] = "no fault"
            except etops.KernelCrashed as exc:
                seen[name] = str(exc)
        clean = torch.equal(etops.guard.call(etops.registry().aten.add.out, x, x), x + x)
        return seen, clean, etops.guard.guard_pid(), os.getpid()

    seen, clean, guard_pid, pid = _in_a_task_process(work)
    assert seen == expected
    assert clean and guard_pid is None and pid != os.getpid()


def test_a_fault_no_guard_region_explains_still_ends_the_task_process(cache):
    """A fault far from every argument (a wild pointer, which may have written
    elsewhere first) is never trapped there: the process ends, and whoever forked
    it runs the call again through the guard process, which places it."""
    from etops.errors import BackgroundFailed

    far = _bad("far_read")
    x = torch.arange(6.0)
    with pytest.raises(etops.KernelCrashed, match="SIGSEGV"):
        etops.guard.call(far, x, out=torch.empty(6))
    with pytest.raises(BackgroundFailed, match="SIGSEGV"):
        _in_a_task_process(lambda: etops.guard.call(far, x, out=torch.empty(6)))
