"""Calls without out=: the first call of an input signature goes to the slow path
(it sizes and allocates the outs); later calls of the same signature allocate their
outs in C (kernel_alloc.c) and give exactly what the slow path gives: values,
dtypes, shapes, strides, tuples, warnings and errors. Data-dependent outs, tensor-list
outs and calls whose inputs are copied keep the slow path."""

from __future__ import annotations

import warnings

import pytest
import torch

import etops
from etops import _native
from etops.errors import KernelError
from etops.kernel import torch_overload
from etops.ops import rules_for
from etops.slow_path import SlowPath, table_of


class CountingSlowPath(SlowPath):
    """SLOW_PATH's behaviour, counting the calls whose outs Python allocated."""

    def __init__(self):
        self.allocations = 0

    def allocate_and_call(self, kernel, values, extra):
        self.allocations += 1
        return super().allocate_and_call(kernel, values, extra)


def counted(name: str):
    """The registry's kernel `name` (e.g. "add.out") built again, as make_kernel
    builds it, with a CountingSlowPath: (kernel, its slow path)."""
    real = etops.registry().get_kernel(f"aten::{name}")._info
    calls = rules_for(real.name).calls(real.policy)
    slow = CountingSlowPath()
    kernel = _native.Kernel(real.name, real._plan.args, real._plan.returns, real, table_of(slow),
                            precheck=calls.has_precheck, validate=torch_overload(real.name) is not None,
                            contiguous_only=calls.contiguous_only)
    return kernel, slow


def same_tensor(got, want, strides=True):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.stride() == want.stride() or not strides
    torch.testing.assert_close(got, want, equal_nan=True)


def test_a_signature_met_before_allocates_its_outs_in_c():
    add, slow = counted("add.out")
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    results = [add(a, b) for _ in range(3)]
    assert slow.allocations == 1  # the first call only
    for got in results:
        same_tensor(got, a + b)
    assert len({id(r) for r in results}) == 3  # a fresh out every call
    results[0].resize_(10)  # an ordinary torch tensor: resizable
    i, f = torch.arange(6, dtype=torch.int32), torch.ones(6)
    for _ in range(2):
        same_tensor(add(i, f), i + f)
        same_tensor(add(i, 2), i + 2)
        same_tensor(add(i, 2.5), i + 2.5)  # the Python number's type decides the dtype
    assert slow.allocations == 4


def test_every_input_signature_has_its_own_outs():
    add, slow = counted("add.out")
    x = torch.randn(2, 3, 4, 5)
    cl = x.to(memory_format=torch.channels_last)
    cases = [(x, x), (cl, cl), (x, torch.randn(5)), (torch.ones(2, 1), torch.ones(1, 3)),
             (x.double(), x), (torch.ones(0, 3), torch.ones(3))]
    for _ in range(2):
        for a, b in cases:
            same_tensor(add(a, b), a + b)  # channels-last stays channels-last
    assert slow.allocations == len(cases)


def test_doubles_and_strings_count_by_value():
    upsample, slow = counted("upsample_nearest2d.vec_out")
    x = torch.randn(1, 1, 2, 3)
    for _ in range(2):
        for scale in (2.0, 3.0, 1.5):  # the out's shape follows the float list
            want = torch.ops.aten.upsample_nearest2d.vec(x, None, [scale, scale])
            same_tensor(upsample(x, None, [scale, scale]), want)
    assert slow.allocations == 3
    div, _ = counted("div.out_mode")
    a, b = torch.tensor([5, -7]), torch.tensor([2, 2])
    for _ in range(2):
        for mode in ("floor", "trunc", None):
            same_tensor(div(a, b, rounding_mode=mode), torch.div(a, b, rounding_mode=mode))


def test_inputs_copied_for_the_kernel_keep_the_slow_path():
    add, slow = counted("add.out")
    t = torch.randn(3, 2).t()  # a permuted dim order: the kernel gets a contiguous copy
    for _ in range(3):
        same_tensor(add(t, t), t + t)  # torch's out keeps the input's layout
    assert slow.allocations == 3


def test_tuple_returns():
    max_dim, slow = counted("max.dim_max")
    x = torch.randn(3, 5)
    for _ in range(3):
        got = max_dim(x, 1)
        assert type(got) is tuple and len(got) == 2
        same_tensor(got[0], torch.max(x, 1).values)
        same_tensor(got[1], torch.max(x, 1).indices)
    assert slow.allocations == 1
    layer_norm, slow = counted("native_layer_norm.out")
    y = torch.randn(2, 3, 4)
    for _ in range(2):
        got = layer_norm(y, [4], None, None, 1e-5)
        assert type(got) is tuple and len(got) == 3
        for g, w in zip(got, torch.ops.aten.native_layer_norm(y, [4], None, None, 1e-5)):
            same_tensor(g, w)
    assert slow.allocations == 1


def test_given_outs_of_a_partial_call_are_kept():
    max_dim, _ = counted("max.dim_max")
    x = torch.randn(3, 5)
    for _ in range(3):
        values = torch.empty(3)
        got = max_dim(x, 1, max=values)
        assert got[0] is values
        same_tensor(got[1], torch.max(x, 1).indices)


def test_data_dependent_outs_keep_the_slow_path():
    nonzero, slow = counted("nonzero.out")
    for n in (1, 4, 0, 4, 2):
        x = torch.zeros(3, 4)
        x.view(-1)[:n] = 1
        same_tensor(nonzero(x), torch.nonzero(x), strides=False)  # shrunk from an upper bound
    assert slow.allocations == 5
    masked_select, slow = counted("masked_select.out")
    x = torch.randn(6)
    for mask in (x > 0, x > 10, x > 0, x < 10):
        same_tensor(masked_select(x, mask), torch.masked_select(x, mask), strides=False)
    assert slow.allocations == 4


def test_a_kernel_failing_on_allocated_outs_raises_as_the_slow_path_does():
    index_select, slow = counted("index_select.out")
    fresh, _ = counted("index_select.out")
    x = torch.ones(3)
    with pytest.raises(KernelError) as first:
        fresh(x, 0, torch.tensor([7]))  # the slow path's call
    same_tensor(index_select(x, 0, torch.tensor([1])), x[[1]])
    with pytest.raises(KernelError) as again:
        index_select(x, 0, torch.tensor([7]))  # the same signature: outs allocated in C
    assert str(again.value) == str(first.value)
    same_tensor(index_select(x, 0, torch.tensor([2])), x[[2]])
    assert slow.allocations == 1  # the failed call raised from C, the kernel ran once


def test_torch_refusals_are_raised_every_time():
    add, _ = counted("add.out")
    messages = []
    for _ in range(2):
        with pytest.raises(Exception) as refused:
            add(torch.ones(2, 3), torch.ones(4))
        messages.append((type(refused.value), str(refused.value)))
    assert messages[0] == messages[1] and "other" in messages[0][1]


def test_outs_the_kernel_sizes_otherwise_warn_nothing():
    # ExecuTorch sizes save_mean/save_invstd [0] where torch's meta says [C]: the
    # kernel refuses them STATIC, shrinks them, and the call keeps the slow path
    bn, _ = counted("_native_batch_norm_legit_no_training.out")
    x, w, b, rm, rv = torch.randn(2, 3, 4), torch.ones(3), torch.zeros(3), torch.zeros(3), torch.ones(3)
    want = torch.ops.aten._native_batch_norm_legit_no_training(x, w, b, rm, rv, 0.1, 1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            got = bn(x, w, b, rm, rv, 0.1, 1e-5)
            torch.testing.assert_close(got[0], want[0])
            assert [g.shape for g in got[1:]] == [torch.Size([0])] * 2


def test_a_repeated_call_without_out_matches_the_call_memo():
    """A call without out= of a signature met before matches the kernel's call memo
    (kernel_memo.c) as an out= call does, its outs allocated in C: fresh tensors each
    time, with the new inputs' values, as torch's functional call gives them."""
    add, slow = counted("add.out")
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    results = []
    for i in range(6):
        a.fill_(float(i))  # new values, same signature
        got = add(a, b)
        same_tensor(got, a + b)
        results.append(got)
    assert add._memo_hits() >= 3  # the first calls allocate in Python, then in C, then the memo
    assert slow.allocations == 1
    assert len({id(r) for r in results}) == 6 and len({r.data_ptr() for r in results}) == 6
    last = results[-1]
    assert last._version == 0 and not last.requires_grad and type(last) is torch.Tensor
    last.resize_(100)  # an ordinary torch tensor: its storage grows
    last.fill_(1.0)
    assert float(last.sum()) == 100.0


def test_calls_without_out_that_differ_from_the_memo_miss_it():
    add, _ = counted("add.out")
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    others = [(torch.randn(3, 2), torch.randn(3, 2)), (a.double(), b), (a, torch.randn(3)), (torch.randn(1, 9), torch.randn(1, 9)),
              (torch.randn(9, 1).t(), torch.randn(9, 1).t()), (a, 2.5), (torch.tensor(1.5), torch.tensor(2.0))]
    c = torch.empty(2, 3)
    for x, y in others:
        for _ in range(3):
            same_tensor(add(a, b), a + b)  # the memo holds (a, b)'s
        hits = add._memo_hits()
        same_tensor(add(x, y), x + y)  # its own signature: a miss
        assert add(a, b, out=c) is c and torch.equal(c, a + b)  # an out= call: not the allocating memo
        assert add._memo_hits() == hits, (x, y)


def test_the_allocating_memo_keeps_what_torch_decides_per_call():
    add, _ = counted("add.out")
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    for _ in range(4):
        add(a, b)
    hits = add._memo_hits()
    assert hits >= 1
    g = torch.randn(2, 3, requires_grad=True)  # a functional call: no refusal, a result without grad
    got = add(g, b)
    assert not got.requires_grad and torch.equal(got, (g + b).detach())
    with torch.inference_mode():
        assert add(a, b).is_inference() == torch.add(a, b).is_inference()
    with pytest.raises(Exception, match="alpha"):
        add(a, b, alpha=True)  # a refusal of torch's, as without the memo
    assert add._memo_hits() > hits


def test_tuple_returns_match_the_memo():
    max_dim, slow = counted("max.dim_max")
    x = torch.randn(3, 5)
    for i in range(5):
        x.add_(1.0)
        got = max_dim(x, 1)
        same_tensor(got[0], torch.max(x, 1).values)
        same_tensor(got[1], torch.max(x, 1).indices)
    assert max_dim._memo_hits() >= 2 and slow.allocations == 1
