"""Outs follow torch's out= semantics: returned as given, multi-out and tensor-list
outs, resized like torch, allocated when missing (data-dependent shapes included);
layouts of inputs and outs."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import assert_close

import etops

aten = torch.ops.aten


def _no_warnings():
    return warnings.catch_warnings(record=True)


# ---- correctly sized outs ----------------------------------------------------------


def test_correct_out_is_returned_as_is(reg):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    out = torch.empty(2, 3)
    ptr = out.data_ptr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = reg.aten.add.out(a, b, out=out)
    assert result is out
    assert out.data_ptr() == ptr
    assert_close(out, a + b)


def test_multi_out_native_layer_norm(reg):
    x, w, b = torch.randn(2, 3, 4), torch.randn(4), torch.randn(4)
    outs = (torch.empty(2, 3, 4), torch.empty(2, 3, 1), torch.empty(2, 3, 1))
    got = reg.aten.native_layer_norm.out(x, [4], w, b, 1e-5, out0=outs[0], out1=outs[1], out2=outs[2])
    want = aten.native_layer_norm.out(x, [4], w, b, 1e-5, out0=torch.empty(2, 3, 4), out1=torch.empty(2, 3, 1), out2=torch.empty(2, 3, 1))
    assert type(got) is type(want) is tuple
    assert len(got) == 3
    assert all(g is o for g, o in zip(got, outs))
    for g, e in zip(got, want):
        assert_close(g, e)


def test_multi_out_max_dim(reg):
    x = torch.randn(4, 5)
    values, indices = torch.empty(4), torch.empty(4, dtype=torch.int64)
    got = reg.aten.max.dim_max(x, 1, max=values, max_values=indices)
    want = aten.max.dim_max(x, 1, max=torch.empty(4), max_values=torch.empty(4, dtype=torch.int64))
    assert type(got) is type(want)
    assert got[0] is values and got[1] is indices
    assert_close(values, want[0])
    assert torch.equal(indices, want[1])


def test_multi_out_topk_needs_temp_memory(reg):
    x = torch.randn(100)
    values, indices = reg.aten.topk.values(x, 5)
    want = torch.topk(x, 5)
    assert_close(values, want.values)
    assert torch.equal(indices, want.indices)
    v, i = torch.empty(5), torch.empty(5, dtype=torch.int64)
    got = reg.aten.topk.values(x, 5, largest=False, values=v, indices=i)
    assert got[0] is v and got[1] is i
    assert_close(v, torch.topk(x, 5, largest=False).values)


def test_tensor_list_out_split(reg):
    x = torch.arange(10.0)
    outs = [torch.empty(3), torch.empty(7)]
    got = reg.aten.split_with_sizes_copy.out(x, [3, 7], out=outs)
    assert got is None  # as torch.ops.aten.split_with_sizes_copy.out returns
    assert aten.split_with_sizes_copy.out(x, [3, 7], out=[torch.empty(3), torch.empty(7)]) is None
    assert_close(outs[0], x[:3])
    assert_close(outs[1], x[3:])


def test_tensor_list_out_unbind(reg):
    x = torch.randn(3, 4)
    outs = [torch.empty(4) for _ in range(3)]
    assert reg.aten.unbind_copy.int_out(x, 0, out=outs) is None
    for o, e in zip(outs, x.unbind(0)):
        assert_close(o, e)
    outs = (torch.empty(3), torch.empty(3), torch.empty(3), torch.empty(3))
    reg.aten.unbind_copy.int_out(x, dim=1, out=outs)
    for o, e in zip(outs, x.unbind(1)):
        assert_close(o, e)


def test_tensor_list_out_split_copy(reg):
    x = torch.arange(10.0).reshape(5, 2)
    outs = [torch.empty(2, 2), torch.empty(2, 2), torch.empty(1, 2)]
    reg.aten.split_copy.Tensor_out(x, 2, out=outs)
    for o, e in zip(outs, x.split(2)):
        assert_close(o, e)


# ---- missing outs: allocated and returned ------------------------------------------


def test_missing_out_allocated(reg):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    got = reg.aten.add.out(a, b)
    assert isinstance(got, torch.Tensor)
    assert_close(got, a + b)
    got = reg.aten.add.out(torch.ones(2, 1), torch.ones(1, 3))  # broadcast
    assert got.shape == (2, 3)


def test_missing_out_dtype_follows_torch(reg):
    a = torch.arange(6, dtype=torch.int32)
    b = torch.ones(6, dtype=torch.float32)
    got = reg.aten.add.out(a, b)
    assert got.dtype == (a + b).dtype
    assert_close(got, a + b)
    got = reg.aten.div.out(torch.arange(6), torch.full((6,), 4))
    assert got.dtype == torch.float32
    assert_close(got, torch.arange(6) / 4)


def test_missing_multi_outs_allocated(reg):
    x = torch.randn(2, 3, 4)
    got = reg.aten.native_layer_norm.out(x, [4], None, None, 1e-5)
    assert type(got) is tuple and len(got) == 3
    for g, e in zip(got, aten.native_layer_norm(x, [4], None, None, 1e-5)):
        assert_close(g, e)
    values, indices = reg.aten.max.dim_max(x, 2)
    want = torch.max(x, 2)
    assert_close(values, want.values)
    assert torch.equal(indices, want.indices)


def test_partially_missing_multi_outs(reg):
    x = torch.randn(3, 5)
    values = torch.empty(3)
    got = reg.aten.max.dim_max(x, 1, max=values)
    assert got[0] is values
    assert_close(values, torch.max(x, 1).values)
    assert torch.equal(got[1], torch.max(x, 1).indices)


def test_missing_list_outs_allocated(reg):
    x = torch.arange(10.0)
    got = reg.aten.split_with_sizes_copy.out(x, [3, 7])
    assert isinstance(got, (list, tuple)) and len(got) == 2
    assert_close(got[0], x[:3])
    assert_close(got[1], x[3:])
    y = torch.randn(3, 4)
    got = reg.aten.unbind_copy.int_out(y, 1)
    assert len(got) == 4
    for g, e in zip(got, y.unbind(1)):
        assert_close(g, e)


# ---- wrong-sized and empty outs: resized like torch ---------------------------------


@pytest.mark.parametrize("shape", [(5,), (10,), (4, 4)], ids=["smaller", "larger", "other-rank"])
def test_wrong_sized_out_resized_with_warning(reg, shape):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    out = torch.empty(shape)
    with pytest.warns(UserWarning, match="resized"):
        got = reg.aten.add.out(a, b, out=out)
    assert got is out
    assert out.shape == (2, 3)
    assert_close(out, a + b)


def test_same_numel_wrong_shape_out_warns_like_torch(reg):
    """torch warns for any shape change of an out that has elements, even one
    ExecuTorch can do in place (same number of elements)."""
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    with pytest.warns(UserWarning, match="resized"):
        torch.add(a, b, out=torch.empty(3, 2))
    out = torch.empty(3, 2)
    with pytest.warns(UserWarning, match="resized"):
        got = reg.aten.add.out(a, b, out=out)
    assert got is out and out.shape == (2, 3)
    assert_close(out, a + b)


def test_empty_out_resized_silently(reg):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    out = torch.empty(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = reg.aten.add.out(a, b, out=out)
    assert got is out and out.shape == (2, 3)
    assert_close(out, a + b)


def test_wrong_sized_outs_of_multi_out_op(reg):
    x = torch.randn(2, 3, 4)
    outs = (torch.empty(0), torch.empty(0), torch.empty(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = reg.aten.native_layer_norm.out(x, [4], None, None, 1e-5, out0=outs[0], out1=outs[1], out2=outs[2])
    assert all(g is o for g, o in zip(got, outs))
    for g, e in zip(got, aten.native_layer_norm(x, [4], None, None, 1e-5)):
        assert_close(g, e)
    values, indices = torch.empty(7), torch.empty(1, dtype=torch.int64)
    with pytest.warns(UserWarning):
        reg.aten.max.dim_max(x, 1, max=values, max_values=indices)
    assert values.shape == indices.shape == (2, 4)
    assert_close(values, torch.max(x, 1).values)


def test_empty_list_outs_resized(reg):
    x = torch.arange(10.0)
    outs = [torch.empty(0), torch.empty(0)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg.aten.split_with_sizes_copy.out(x, [3, 7], out=outs)
    assert [o.shape for o in outs] == [(3,), (7,)]
    assert_close(outs[1], x[3:])


def test_wrong_sized_cat_out(reg):
    a, b = torch.randn(2, 3), torch.randn(2, 4)
    out = torch.empty(3)
    with pytest.warns(UserWarning):
        reg.aten.cat.out([a, b], 1, out=out)
    assert_close(out, torch.cat([a, b], 1))


def test_wrong_sized_numpy_out_is_refused(reg):
    np = pytest.importorskip("numpy")
    out = np.empty((5,), np.float32)
    with pytest.raises(ValueError, match="'out'"):
        reg.aten.add.out(torch.ones(2, 3), torch.ones(2, 3), out=out)


# ---- data-dependent output shapes ---------------------------------------------------


@pytest.mark.parametrize(
    "x",
    [
        torch.tensor([[1, 0], [0, 1]]),
        torch.tensor([0.0, 1.5, 0.0, -2.0]),
        torch.zeros(3, 2),
        torch.ones(2, 2, 2, dtype=torch.bool),
        torch.tensor(5),
    ],
    ids=["2d-int", "1d-float", "all-zero", "3d-bool", "0d"],
)
def test_nonzero(reg, x):
    want = torch.nonzero(x)
    got = reg.aten.nonzero.out(x)
    assert got.dtype == torch.int64
    assert torch.equal(got, want)
    out = torch.empty(0, dtype=torch.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert reg.aten.nonzero.out(x, out=out) is out
    assert torch.equal(out, want)
    out = torch.empty(want.shape, dtype=torch.int64)
    assert reg.aten.nonzero.out(x, out=out) is out
    assert torch.equal(out, want)


def test_nonzero_oversized_out_warns_like_torch(reg):
    x = torch.tensor([[1, 0], [0, 1]])
    with pytest.warns(UserWarning, match="resized"):
        torch.nonzero(x, out=torch.empty(10, 2, dtype=torch.int64))
    out = torch.empty(10, 2, dtype=torch.int64)
    with pytest.warns(UserWarning, match="resized"):
        reg.aten.nonzero.out(x, out=out)
    assert torch.equal(out, torch.nonzero(x))


def test_nonzero_undersized_out(reg):
    x = torch.tensor([[1, 0], [1, 1]])
    out = torch.empty(1, 2, dtype=torch.int64)
    with pytest.warns(UserWarning):
        reg.aten.nonzero.out(x, out=out)
    assert torch.equal(out, torch.nonzero(x))


@pytest.mark.parametrize("broadcast", [False, True])
def test_masked_select(reg, broadcast):
    x = torch.randn(3, 4)
    mask = (torch.randn(4) > 0) if broadcast else (x > 0)
    want = torch.masked_select(x, mask)
    assert_close(reg.aten.masked_select.out(x, mask), want)
    out = torch.empty(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert reg.aten.masked_select.out(x, mask, out=out) is out
    assert_close(out, want)
    out = torch.empty(want.shape)
    assert reg.aten.masked_select.out(x, mask, out=out) is out
    assert_close(out, want)


def test_masked_select_none_selected(reg):
    x = torch.randn(3, 4)
    got = reg.aten.masked_select.out(x, torch.zeros(3, 4, dtype=torch.bool))
    assert got.shape == (0,)


def test_masked_select_oversized_out_warns_like_torch(reg):
    x = torch.randn(3, 4)
    out = torch.empty(100)
    with pytest.warns(UserWarning, match="resized"):
        reg.aten.masked_select.out(x, x > 0, out=out)
    assert_close(out, torch.masked_select(x, x > 0))


# ---- layouts ------------------------------------------------------------------------


def test_channels_last_inputs_and_out(reg):
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    y = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    got = reg.aten.add.out(x, y)
    assert_close(got, x + y)
    assert got.is_contiguous(memory_format=torch.channels_last)
    out = torch.empty_like(x)
    assert reg.aten.mul.out(x, y, out=out) is out
    assert_close(out, x * y)
    assert_close(reg.aten.abs.out(x), x.abs())
    assert_close(reg.aten.relu.out(x), torch.relu(x))


def test_channels_last_zero_copy(reg):
    """Dense layouts cross without a copy: the kernel writes the out's own memory."""
    x = torch.randn(1, 2, 3, 3).to(memory_format=torch.channels_last)
    out = torch.empty_like(x)
    ptr = out.data_ptr()
    reg.aten.neg.out(x, out=out)
    assert out.data_ptr() == ptr and out.is_contiguous(memory_format=torch.channels_last)
    assert_close(out, -x)


def test_channels_last_kernel_key(reg):
    x = torch.randn(1, 2, 3, 3).to(memory_format=torch.channels_last)
    text = reg.aten.add.out.explain(x, x, out=torch.empty_like(x))
    assert "6;0,2,3,1" in text


def test_permuted_inputs_through_dim_order_copy(reg):
    """Any dim permutation crosses as its ExecuTorch dim order (no copy): the
    dim-order op converts it, values intact."""
    x = torch.randn(3, 4, 5).permute(2, 0, 1)
    assert not x.is_contiguous()
    out = torch.empty(5, 3, 4)
    got = reg.dim_order_ops._to_dim_order_copy.out(x, dim_order=[0, 1, 2], out=out)
    assert got is out
    assert_close(out, x)
    # a 4-d permutation into channels-last
    y = torch.randn(2, 3, 4, 5).permute(0, 3, 1, 2).contiguous().permute(0, 1, 3, 2)
    cl = torch.empty(2, 5, 4, 3).to(memory_format=torch.channels_last)
    reg.dim_order_ops._to_dim_order_copy.out(y, dim_order=[0, 2, 3, 1], out=cl)
    assert_close(cl, y)


def test_transposed_input_dim_order_is_passed(reg):
    x = torch.randn(3, 2).t()
    text = reg.aten.abs.out.explain(x, out=torch.empty(2, 3))
    assert "dim order [1, 0]" in text


def test_transposed_input_is_copied_as_a_program_would_give_it(reg):
    """A program never hands a kernel a transposed tensor: by default etops passes a
    contiguous copy; etops.layout("preserve") passes it as it is, and the portable
    add (all tensors contiguous or all channels-last) refuses it, as ExecuTorch would."""
    x = torch.randn(3, 2).t()
    assert_close(reg.aten.add.out(x, x, out=torch.empty(2, 3)), x + x)
    with etops.layout("preserve"), pytest.raises(etops.KernelError, match="add.out"):
        reg.aten.add.out(x, x, out=torch.empty(2, 3))


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(1, 3).expand(4, 3),
        lambda: torch.randn(4, 6)[:, ::2],
        lambda: torch.randn(6, 4)[::2],
        lambda: torch.randn(4, 1, 3).expand(4, 5, 3),
        lambda: torch.tensor(2.0).expand(3, 3),
    ],
    ids=["expanded", "stepped-cols", "stepped-rows", "expanded-middle", "scalar-expanded"],
)
def test_non_dense_inputs_copied(reg, make):
    x = make()
    y = make()
    keep = x.clone()
    assert_close(reg.aten.add.out(x, y), x + y)
    assert_close(reg.aten.add.out(x, y, out=torch.empty(x.shape)), x + y)
    assert_close(reg.aten.cat.out([x, y], 0), torch.cat([x, y], 0))
    assert torch.equal(x, keep)


@pytest.mark.parametrize("make", [lambda: torch.zeros(2, 6)[:, ::2], lambda: torch.zeros(4, 3)[::2]], ids=["stepped", "stepped-rows"])
def test_stepped_out_is_written_through_a_contiguous_copy(reg, make):
    out = make()
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    assert reg.aten.add.out(a, b, out=out) is out
    assert torch.equal(out, a + b)


def test_expanded_out_refused(reg):
    with pytest.raises(ValueError, match="'out' is expanded"):
        reg.aten.add.out(torch.ones(2, 3), torch.ones(2, 3), out=torch.empty(1, 3).expand(2, 3))


def test_stepped_multi_out_written_back(reg):
    x = torch.randn(2, 3)
    max_values = torch.zeros(4, dtype=torch.int64)[::2]
    values, indices = reg.aten.max.dim_max(x, 1, max=torch.empty(2), max_values=max_values)
    assert indices is max_values
    assert torch.equal(values, x.max(1).values) and torch.equal(max_values, x.max(1).indices)


def test_stepped_list_out_written_back(reg):
    x = torch.arange(10.0)
    second = torch.zeros(14)[::2]
    reg.aten.split_with_sizes_copy.out(x, [3, 7], out=[torch.empty(3), second])
    assert torch.equal(second, x[3:])


def test_expanded_list_out_refused(reg):
    x = torch.arange(10.0)
    with pytest.raises(ValueError, match=r"out\[1\]"):
        reg.aten.split_with_sizes_copy.out(x, [3, 7], out=[torch.empty(3), torch.empty(1).expand(7)])


def test_zero_size_tensors(reg):
    a = torch.empty(0, 3)
    assert reg.aten.add.out(a, a).shape == (0, 3)
    assert reg.aten.cat.out([a, torch.ones(2, 3)], 0).shape == (2, 3)
