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


@pytest.mark.xfail(strict=True, raises=AttributeError, reason="slow path: torch's functional returns None for outs output_mask leaves out; _allocate(None) -> AttributeError")
def test_convolution_backward_with_output_mask_and_outs_omitted(reg):
    op = reg.aten.convolution_backward.out
    grad, x, w = torch.ones(1, 1, 2, 2), torch.ones(1, 1, 3, 3), torch.ones(1, 1, 2, 2)
    outs = op(grad, x, w, [1], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, False, True])
    assert outs[0].shape == x.shape


def test_masked_select_with_a_mask_that_does_not_broadcast_raises_value_error(reg):
    with pytest.raises(ValueError, match="mask"):
        reg.aten.masked_select.out(torch.ones(3, 4), torch.ones(3, dtype=torch.bool))


def test_zero_dim_numpy_array_is_a_tensor_for_out_inference(reg):
    got = reg.aten.bitwise_left_shift.Tensor_out(torch.tensor([1, 2, 3]), np.array(1, dtype=np.int16))
    assert torch.equal(got, torch.tensor([2, 4, 6]))


@pytest.mark.xfail(strict=True, reason="slow path: the out aliases the input; resize-and-retry after the KernelError resizes the input too, "
                   "and the retry fails on the changed input (rank 17) with both left resized")
def test_out_aliasing_the_input_is_refused_before_it_is_resized(reg):
    x = torch.zeros(0, 0, 0, dtype=torch.float64)
    idx = [torch.zeros(0, 1, dtype=torch.long), torch.zeros(1, 0, 1, 1, dtype=torch.long), torch.zeros(0, 0, 1, dtype=torch.long)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises((ValueError, etops.KernelError)):
            reg.aten.index.Tensor_out(x, idx, out=x)
    assert x.shape == (0, 0, 0)


def test_sym_size_precheck_leaves_type_errors_to_the_call_path(reg):
    """The pre-check runs before argument conversion (kernel.c): it must not trip
    over a wrong type itself (it raised AttributeError on None)."""
    with pytest.raises(TypeError, match="'self'"):
        reg.aten.sym_size.int(None, 0)
    with pytest.raises(TypeError, match="'dim'"):
        reg.aten.sym_size.int(torch.ones(2), "0")
