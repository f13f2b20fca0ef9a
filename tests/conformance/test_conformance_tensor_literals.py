"""A reproducer rebuilds every tensor of its case exactly: values, dtype, shape
(empty ones too: a list literal alone loses their shape) and layout."""

from __future__ import annotations

import pytest
import torch

from etops.conformance.reproducer import tensor_literal


def _rebuilt(t: torch.Tensor) -> torch.Tensor:
    return eval(tensor_literal(t), {"torch": torch, "nan": float("nan"), "inf": float("inf")})


@pytest.mark.parametrize("t", [
    torch.empty(0, 4, dtype=torch.bfloat16),
    torch.empty(3, 0, 2, dtype=torch.int64),
    torch.empty(0, dtype=torch.float32),
    torch.tensor(7, dtype=torch.int16),
    torch.tensor([[1.5, -0.0], [float("nan"), float("-inf")]], dtype=torch.float16),
    torch.arange(24, dtype=torch.float32).reshape(2, 3, 4).transpose(1, 2),
    torch.arange(16, dtype=torch.float64).reshape(1, 4, 2, 2).contiguous(memory_format=torch.channels_last),
], ids=["empty-0x4", "empty-3x0x2", "empty-1d", "0-d", "specials", "transposed", "channels-last"])
def test_a_tensor_literal_rebuilds_shape_dtype_values_and_strides(t):
    back = _rebuilt(t)
    assert back.shape == t.shape and back.dtype == t.dtype and back.stride() == t.stride()
    torch.testing.assert_close(back, t, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(torch.signbit(back.float()), torch.signbit(t.float()))
