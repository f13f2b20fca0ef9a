"""Call fidelity, torch's checks first: a call torch's meta kernel refuses (dtype
castability, broadcasting, dims) raises before the ExecuTorch kernel sees it, once
per argument signature; what torch accepts still runs."""

import pytest
import torch

import etops
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
    original = SLOW_PATH.validate

    def counting(kernel, values, extra):
        calls.append(kernel._info.name)
        return original(kernel, values, extra)

    monkeypatch.setattr(SLOW_PATH, "validate", counting)
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


def test_scalar_add_and_sub_check_castability_where_torchs_meta_cannot(reg):
    """torch's meta of add/sub.Scalar_out fails on its alpha argument (a torch bug):
    the rules table checks castability itself, as torch's CPU kernel does."""
    with pytest.raises(TypeError, match="argument 'out' has dtype torch.int8"):
        reg.aten.add.Scalar_out(torch.tensor(3, dtype=torch.int8), -1.75, -1, out=torch.empty((), dtype=torch.int8))
    assert reg.aten.add.Scalar_out(torch.tensor(3.0), -1.75, -1).item() == torch.ops.aten.add.Scalar(torch.tensor(3.0), -1.75, -1).item()
    assert torch.equal(reg.aten.sub.Scalar_out(torch.ones(2, dtype=torch.int16), -2, 2), torch.full((2,), 5, dtype=torch.int16))


def test_a_meta_kernel_dividing_by_zero_is_no_check_and_executorch_answers(reg):
    """torch's meta of _adaptive_avg_pool2d divides by an output size of 0 (its CPU
    kernel accepts it): not a refusal, ExecuTorch's kernel gives its KernelError."""
    with pytest.raises(etops.KernelError, match="output_size must be positive"):
        reg.aten._adaptive_avg_pool2d.out(torch.rand(1, 1, 1), [3, 0], out=torch.empty(0))


def test_outs_allocated_for_an_expanded_input_are_dense(reg):
    expanded = torch.rand(1, dtype=torch.bfloat16).expand(3)
    out, mask = reg.aten.native_dropout.out(expanded, 1.0, False)
    assert out.is_contiguous() and torch.equal(out, expanded) and mask.all()


def test_a_kernel_that_disagrees_with_torchs_out_shape_is_a_kernel_error_not_a_resize_loop(reg):
    """arange(3.1) into an int64 out: torch's out= gives 3 elements, ExecuTorch's
    kernel wants 4 (it sizes from the float end). etops resizes the out to torch's
    shape once; the kernel's failure is then the answer (before: etops resized back
    and forth until Python's recursion limit)."""
    with pytest.raises(etops.KernelError, match="maximum capacity of 3 elements to 4 elements"):
        reg.aten.arange.out(3.1, out=torch.empty(0, dtype=torch.int64))
    got = reg.aten.arange.out(3.0, out=torch.empty(0, dtype=torch.int64))  # an empty out: resized without a warning
    assert got.tolist() == [0, 1, 2]
