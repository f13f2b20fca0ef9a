"""Call fidelity, torch's checks first: a call torch's meta kernel refuses (dtype
castability, broadcasting, dims) raises before the ExecuTorch kernel sees it, once
per argument signature; what torch accepts still runs."""

import pytest
import torch
from torch.testing import assert_close

from etops.slow_path import SLOW_PATH


def test_complex_result_into_a_float_out_is_refused(reg):
    """ExecuTorch's div returned success and wrote complex values past the end of
    the float out (heap corruption); torch refuses the cast."""
    a, b = torch.randn(2, 3, dtype=torch.complex64), torch.randn(2, 3)
    out = torch.full((2, 3), 7.0)
    with pytest.raises(TypeError, match=r"argument 'out' cannot hold the result .*(ComplexFloat|complex64).* can't be cast"):
        reg.aten.mul.out(a, b, out=out)
    assert torch.equal(out, torch.full((2, 3), 7.0))


def test_int_out_for_a_float_result_is_refused(reg):
    out = torch.zeros(3, dtype=torch.int64)
    with pytest.raises(TypeError, match="argument 'out' cannot hold the result"):
        reg.aten.add.out(torch.randn(3), torch.randn(3), out=out)


def test_shapes_that_do_not_broadcast_are_refused(reg):
    with pytest.raises(ValueError, match="aten::add.out: torch refuses argument 'other'"):
        reg.aten.add.out(torch.randn(3), torch.randn(4), out=torch.empty(4))


def test_what_torch_accepts_runs(reg):
    a, b = torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float64)
    out = torch.empty(2, 3, dtype=torch.float64)
    assert_close(reg.aten.add.out(a, b, out=out), a + b)


def test_checked_once_per_signature(reg, monkeypatch):
    calls = []
    original = type(SLOW_PATH).validate

    def counting(self, kernel, values, extra):
        calls.append(kernel._info.name)
        return original(self, kernel, values, extra)

    monkeypatch.setattr(type(SLOW_PATH), "validate", counting)
    op = reg.aten.sub.out
    x = torch.randn(5, 7)
    for _ in range(5):
        op(x, x, out=torch.empty(5, 7))
    op(x, x, alpha=2, out=torch.empty(5, 7))  # an int value is part of the signature
    y = torch.randn(6, 7)
    op(y, y, out=torch.empty(6, 7))  # new sizes, new signature
    assert calls.count("aten::sub.out") <= 3
    assert calls.count("aten::sub.out") >= 1


def test_refused_signature_is_not_remembered(reg):
    a, b = torch.randn(2, dtype=torch.complex64), torch.randn(2)
    for _ in range(2):
        with pytest.raises(TypeError, match="argument 'out'"):
            reg.aten.mul.out(a, b, out=torch.empty(2))


def test_refusal_names_the_argument_torch_names(reg):
    """torch's meta kernel says which argument is wrong: so does the error."""
    with pytest.raises(ValueError, match=r"aten::embedding.out: torch refuses argument 'weight' .*must be 2-D"):
        reg.aten.embedding.out(torch.tensor(1.0), torch.tensor(0), out=torch.empty(0))


def test_shapes_torch_refuses_for_cat_never_reach_the_kernel(reg):
    """ExecuTorch's cat reported these as a KernelError after checking them itself;
    torch's check comes first now, as a ValueError."""
    with pytest.raises(ValueError, match=r"aten::cat.out: torch refuses these arguments .*Sizes of tensors must match"):
        reg.aten.cat.out([torch.ones(2, 3), torch.ones(4, 5)], 1, out=torch.empty(2, 8))


def test_a_broadcast_refusal_by_position_names_that_tensor_input(reg):
    """torch's broadcasting names the input by its index among the tensors given
    ("Mismatching argument at index 1"): etops names the argument."""
    with pytest.raises(ValueError, match=r"torch refuses argument 'min' .*index 1"):
        reg.aten.clamp.Tensor_out(torch.rand(0, 3, 0, 4, dtype=torch.float64), min=torch.ones(2, 3, dtype=torch.int16))
    with pytest.raises(ValueError, match=r"torch refuses argument 'self' .*index 1"):
        reg.aten.where.self_out(torch.ones(2, 3, dtype=torch.bool), torch.rand(4), torch.rand(2, 3))
