"""Regression tests of what the fuzzer found in etops' own call path (outside the
fuzzer's files). A finding still open is xfail(strict=True): it fails today, and
turns into an unexpected pass - a failure - the day it is fixed, so the mark comes
off with the fix; the others are plain regression tests. Minimal reproducers, shrunk by Hypothesis."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import etops


@pytest.fixture(scope="module")
def reg():
    return etops.registry()


def test_convolution_backward_with_output_mask_and_outs_omitted(reg):
    """torch's functional returns None for an out output_mask leaves out: the slow
    path allocated it from None (AttributeError). Now the kernel gets a placeholder
    it does not write and the caller gets None, as from torch."""
    op = reg.aten.convolution_backward.out
    grad, x, w = torch.randn(1, 1, 2, 2), torch.randn(1, 1, 3, 3), torch.randn(1, 1, 2, 2)
    args = (grad, x, w, [1], [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    for mask in ([True, False, True], [False, True, False]):
        got, want = op(*args, mask), torch.ops.aten.convolution_backward(*args, mask)
        assert len(got) == 3
        for g, e in zip(got, want):
            if e is None:
                assert g is None
            else:
                torch.testing.assert_close(g, e)
    # an out given for a masked-out gradient is left alone
    given = torch.full((2,), 7.0)
    got = op(*args, [True, False, True], out1=given)
    assert got[1] is given and torch.equal(given, torch.full((2,), 7.0))
    torch.testing.assert_close(got[0], torch.ops.aten.convolution_backward(*args, [True, False, True])[0])


def test_masked_select_with_a_mask_that_does_not_broadcast_raises_value_error(reg):
    with pytest.raises(ValueError, match="mask"):
        reg.aten.masked_select.out(torch.ones(3, 4), torch.ones(3, dtype=torch.bool))


def test_zero_dim_numpy_array_is_a_tensor_for_out_inference(reg):
    got = reg.aten.bitwise_left_shift.Tensor_out(torch.tensor([1, 2, 3]), np.array(1, dtype=np.int16))
    assert torch.equal(got, torch.tensor([2, 4, 6]))


def test_out_aliasing_the_input_is_refused_before_it_is_resized(reg):
    """The resize-and-retry after a KernelError resized an out that is the input,
    and retried on the changed input (ending at rank 17 with both resized)."""
    x = torch.zeros(0, 0, 0, dtype=torch.float64)
    idx = [torch.zeros(0, 1, dtype=torch.long), torch.zeros(1, 0, 1, 1, dtype=torch.long), torch.zeros(0, 0, 1, dtype=torch.long)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="'out' shares memory with argument 'self'"):
            reg.aten.index.Tensor_out(x, idx, out=x)
    assert x.shape == (0, 0, 0)


@pytest.mark.parametrize("view", [False, True], ids=["same_tensor", "view_of_it"])
def test_out_aliasing_the_input_is_not_resized_into_a_wrong_result(reg, view):
    """With data: the retry computed on the input the resize had changed (a wrong
    result). torch refuses this call too (the out is a view of the input)."""
    x = torch.arange(6.0).reshape(2, 3)
    out = x.view(6) if view else x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="'out' shares memory with argument 'self'"):
            reg.aten.index.Tensor_out(x, [torch.tensor([1, 0, 1])], out=out)
        with pytest.raises(RuntimeError, match="single memory location"):
            torch.ops.aten.index.Tensor_out(x, [torch.tensor([1, 0, 1])], out=out)
    assert x.shape == (2, 3) and torch.equal(x, torch.arange(6.0).reshape(2, 3))


def test_out_aliasing_a_tensor_list_input_is_refused(reg):
    idx = torch.tensor([1, 0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"'out' shares memory with argument 'indices\[0\]'"):
            reg.aten.index.Tensor_out(torch.arange(6).reshape(2, 3), [idx], out=idx)
    assert torch.equal(idx, torch.tensor([1, 0, 1]))


def test_out_sharing_storage_but_not_memory_with_the_input_is_still_resized(reg):
    """Only an overlap is refused: an out elsewhere in the input's storage is resized
    as any out."""
    buf = torch.zeros(20)
    buf[:6] = torch.arange(6.0)
    x, out = buf[:6].view(2, 3), buf[10:10]
    got = reg.aten.index.Tensor_out(x, [torch.tensor([1, 0, 1])], out=out)
    assert got is out and torch.equal(out, torch.arange(6.0).reshape(2, 3)[[1, 0, 1]])
    assert torch.equal(x, torch.arange(6.0).reshape(2, 3))


def test_out_resized_beyond_executorch_ranks_is_refused_untouched(reg):
    """The retry after resizing refused an out of 1000 dims (bias_sizes of 1000
    ones), the out already resized."""
    op = reg.aten.convolution_backward.out
    out0, out2 = torch.empty(0), torch.empty(0)
    args = (torch.zeros(0, 4, 0, 0, 1, dtype=torch.bfloat16), torch.zeros((), dtype=torch.int16), torch.zeros(1, dtype=torch.uint8),
            [1] * 1000, [3], [1, 4], [3], False, [3], 6, [False, False, True])
    with pytest.raises(ValueError, match="'out2' would be resized to 1000 dims"):
        op(*args, out0=out0, out2=out2)
    assert out0.shape == (0,) and out2.shape == (0,)


def test_numpy_out_of_a_data_dependent_op_is_refused_naming_it(reg):
    """masked_select.out with a numpy out (here the mask itself): the slow path
    called .numel() on it (AttributeError)."""
    mask = np.ones((1, 3, 3), dtype=np.complex64)
    with pytest.raises(ValueError, match="'out'"):
        reg.aten.masked_select.out(torch.tensor(1), mask, out=mask)
    assert mask.shape == (1, 3, 3)


def test_sym_size_precheck_leaves_type_errors_to_the_call_path(reg):
    """The pre-check runs before argument conversion (kernel_call.c): it must not trip
    over a wrong type itself (it raised AttributeError on None)."""
    with pytest.raises(TypeError, match="'self'"):
        reg.aten.sym_size.int(None, 0)
    with pytest.raises(TypeError, match="'dim'"):
        reg.aten.sym_size.int(torch.ones(2), "0")
