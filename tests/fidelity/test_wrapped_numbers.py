"""Call fidelity, Python numbers for Tensor parameters: etops wraps them as torch
does (a 0-dim tensor of torch's wrapped-number dtype: bool, int64, float64,
complex128), so values and dtypes are those of torch.ops.aten.<op>.out on the same
arguments; where torch refuses a number, so does etops, naming the argument."""

import pytest
import torch
from torch.testing import assert_close

import etops

TENSORS = {
    "float32": torch.linspace(-3, 3, 6).reshape(2, 3),
    "float16": torch.linspace(-3, 3, 6).reshape(2, 3).half(),
    "int32": torch.arange(-3, 3, dtype=torch.int32).reshape(2, 3),
    "uint8": torch.arange(6, dtype=torch.uint8).reshape(2, 3),
    "bool": torch.tensor([[True, False, True], [False, True, False]]),
}
NUMBERS = [3, -2, 2.5, True]
OPS = ["add.out", "sub.out", "mul.out", "div.out"]


def _torch(name, *args, **kwargs):
    """torch.ops.aten's result, the out sized by torch's functional."""
    base, overload = name.split(".")
    functional = getattr(torch.ops.aten, base).Tensor
    out = torch.empty(0, dtype=functional(*args, **kwargs).dtype)
    return getattr(getattr(torch.ops.aten, base), overload)(*args, **kwargs, out=out)


def _cases():
    for op in OPS:
        for dtype in TENSORS:
            for number in NUMBERS:
                yield op, dtype, number


@pytest.mark.parametrize("op, dtype, number", list(_cases()))
def test_number_as_other_matches_torch(reg, op, dtype, number):
    t = TENSORS[dtype]
    try:
        expected = _torch(op, t, number)
    except RuntimeError:  # torch refuses (sub of bools): so must etops
        with pytest.raises((TypeError, ValueError)):
            reg.get_kernel(f"aten::{op}")(t, number)
        return
    got = reg.get_kernel(f"aten::{op}")(t, number)
    assert got.dtype == expected.dtype
    assert_close(got, expected, equal_nan=True)


@pytest.mark.parametrize("number", [3, 2.5, True])
def test_number_as_self_matches_torch(reg, number):
    t = TENSORS["int32"]
    assert_close(reg.aten.mul.out(number, t), _torch("mul.out", number, t))


def test_given_out_keeps_torch_dtype_rules(reg):
    """int32 * 3 stays int32 in torch (a wrapped int does not promote the tensor),
    and int32 * 2.5 is float32 (the default dtype), not float64."""
    t = TENSORS["int32"]
    out = torch.empty(2, 3, dtype=torch.int32)
    assert reg.aten.mul.out(t, 3, out=out) is out
    assert torch.equal(out, t * 3)
    assert reg.aten.mul.out(t, 2.5).dtype == torch.float32
    with pytest.raises(TypeError, match="argument 'out' cannot hold the result"):
        reg.aten.mul.out(t, 2.5, out=torch.empty(2, 3, dtype=torch.int32))


def test_int_then_float_number_are_sized_apart(reg):
    """2 and 2.0 are equal in Python: the out-size cache must not mix them."""
    t = TENSORS["int32"]
    assert reg.aten.mul.out(t, 2).dtype == torch.int32
    assert reg.aten.mul.out(t, 2.0).dtype == torch.float32
    assert reg.aten.mul.out(t, True).dtype == torch.int32


def test_complex_number_reaches_the_kernel_as_complex128(reg):
    """torch accepts float32 + 1j (a complex64 result); ExecuTorch's add wants one
    dtype throughout for complex, so its KernelError is the answer, not a refusal
    to convert the number."""
    expected = _torch("add.out", TENSORS["float32"], 1j)
    assert expected.dtype == torch.complex64
    with pytest.raises(etops.KernelError, match="aten::add.out"):
        reg.aten.add.out(TENSORS["float32"], 1j)


def test_number_where_torch_wants_a_tensor_is_refused(reg):
    """torch.ops.aten.pow.Tensor_Tensor_out refuses a number for 'exponent'."""
    with pytest.raises(RuntimeError):
        torch.ops.aten.pow.Tensor_Tensor_out(TENSORS["float32"], 2, out=torch.empty(2, 3))
    with pytest.raises(TypeError, match="argument 'exponent'"):
        reg.aten.pow.Tensor_Tensor_out(TENSORS["float32"], 2, out=torch.empty(2, 3))
    with pytest.raises(TypeError, match="argument 'exponent'"):
        reg.aten.pow.Tensor_Tensor_out(TENSORS["float32"], 2)


def test_number_for_an_out_is_refused(reg):
    with pytest.raises(TypeError, match="argument 'out'"):
        reg.aten.mul.out(TENSORS["float32"], 2, out=3)


def test_int_beyond_int64_is_refused(reg):
    with pytest.raises(OverflowError, match="argument 'other'"):
        reg.aten.add.out(TENSORS["float32"], 2**70)


def test_repeated_calls_with_numbers(reg):
    """The number's 0-dim tensor lives in the call's scratch: many calls, no leak of
    one call's value into the next."""
    t = TENSORS["float32"]
    out = torch.empty(2, 3)
    for k in range(50):
        reg.aten.add.out(t, float(k), out=out)
        assert torch.equal(out, t + k)


@pytest.mark.parametrize("op, args, argument", [
    ("mul.Scalar_out", (torch.ones(2, dtype=torch.complex64), 1j), "other"),
    ("full_like.out", (torch.ones(2, dtype=torch.complex64), 1 + 2j), "fill_value"),
])
def test_complex_scalar_is_refused_naming_the_argument(reg, op, args, argument):
    """ExecuTorch's Scalar holds bool, int and float only: a complex Scalar cannot
    reach the kernel, and the TypeError names the parameter."""
    base, overload = op.split(".")
    with pytest.raises(TypeError, match=f"argument '{argument}': ExecuTorch Scalars cannot be complex"):
        getattr(getattr(reg.aten, base), overload)(*args)


def test_outs_of_kernels_whose_functional_torch_sizes_are_allocated(reg):
    """_to_copy.out, full_like.out and _to_dim_order_copy.out take their dtype and
    layout from the out: called without one, etops sizes it by the functional."""
    x = torch.randn(2, 3)
    assert torch.equal(reg.aten._to_copy.out(x), x)
    assert torch.equal(reg.aten.full_like.out(x, 2.0), torch.full((2, 3), 2.0))
    y = torch.randn(1, 2, 3, 4)
    got = reg.dim_order_ops._to_dim_order_copy.out(y, dim_order=[0, 2, 3, 1])
    assert torch.equal(got, y) and got.is_contiguous(memory_format=torch.channels_last)
