"""Regression tests for kernels that corrupted memory or aborted under adversarial
calls (issue 15): refused before the kernel, naming the argument; correct calls
still run."""

import pytest
import torch

import etops


def test_div_complex_into_float_out_is_refused_naming_out():
    a = torch.ones(4, dtype=torch.complex64)
    b = torch.ones(4, dtype=torch.float32)
    out = torch.empty(4, dtype=torch.float32)
    with pytest.raises(TypeError, match="'out'"):
        etops.registry().aten.div.out(a, b, out=out)


def test_div_float_still_runs():
    a = torch.full((4,), 6.0)
    b = torch.full((4,), 2.0)
    out = torch.empty(4)
    etops.registry().aten.div.out(a, b, out=out)
    assert torch.equal(out, torch.full((4,), 3.0))


def test_embedding_float_indices_refused_naming_indices():
    weight = torch.ones(5, 3)
    indices = torch.zeros(2, dtype=torch.float32)
    out = torch.empty(2, 3)
    with pytest.raises(TypeError, match="'indices'"):
        etops.registry().aten.embedding.out(weight, indices, out=out)


def test_embedding_long_indices_still_run():
    weight = torch.arange(15.0).reshape(5, 3)
    indices = torch.tensor([1, 4])
    out = torch.empty(2, 3)
    etops.registry().aten.embedding.out(weight, indices, out=out)
    assert torch.equal(out, weight[indices])
