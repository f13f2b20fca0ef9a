"""Every argument type ExecuTorch kernels take, through a real registered kernel
that takes it, compared with torch (binding rules and wrong Python types: test_argument_binding.py)."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import etops
from fresh_python import start_python

aten = torch.ops.aten


def _schema_types(reg):
    """schema type (torch's real_type spelling) -> names of callable kernels taking it."""
    found: dict[str, set[str]] = {}
    for name in reg.operator_names:
        k = reg.get_kernel(name)
        if isinstance(k, etops.UncallableKernel):
            continue
        for arg in k._schema.arguments:
            found.setdefault(str(arg.real_type), set()).add(name)
    return found


# ---- Tensor, Tensor?, Tensor[], Tensor?[] ------------------------------------------


def test_tensor(reg):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    assert_close(reg.aten.add.out(a, b, out=torch.empty(2, 3)), a + b)


def test_optional_tensor_none_and_given(reg):
    x = torch.randn(2, 3, 4)
    w, b = torch.randn(4), torch.randn(4)
    got = reg.aten.native_layer_norm.out(x, [4], None, None, 1e-5)
    want = aten.native_layer_norm(x, [4], None, None, 1e-5)
    for g, e in zip(got, want):
        assert_close(g, e)
    got = reg.aten.native_layer_norm.out(x, [4], w, b, 1e-5)
    want = aten.native_layer_norm(x, [4], w, b, 1e-5)
    for g, e in zip(got, want):
        assert_close(g, e)
    # only one of the optionals
    assert_close(reg.aten.native_layer_norm.out(x, [4], w, None, 1e-5)[0], aten.native_layer_norm(x, [4], w, None, 1e-5)[0])


def test_optional_tensor_clamp_tensor(reg):
    x = torch.randn(3, 4)
    lo = torch.full((4,), -0.5)
    assert_close(reg.aten.clamp.Tensor_out(x, lo, None), torch.clamp(x, lo, None))


def test_tensor_list(reg):
    a, b = torch.randn(2, 3), torch.randn(2, 5)
    assert_close(reg.aten.cat.out([a, b], 1), torch.cat([a, b], 1))
    assert_close(reg.aten.cat.out((a, b), dim=1, out=torch.empty(2, 8)), torch.cat([a, b], 1))
    c = torch.randn(2, 3)
    assert_close(reg.aten.stack.out([a, c]), torch.stack([a, c]))
    assert_close(reg.aten.stack.out([a, c], 1), torch.stack([a, c], 1))


def test_optional_tensor_list(reg):
    x = torch.arange(12.0).reshape(3, 4)
    idx = torch.tensor([0, 2])
    assert_close(reg.aten.index.Tensor_out(x, [None, idx]), x[:, idx])
    assert_close(reg.aten.index.Tensor_out(x, [idx]), x[idx])
    assert_close(reg.aten.index.Tensor_out(x, [idx, torch.tensor([1, 3])]), x[idx, torch.tensor([1, 3])])
    assert_close(reg.aten.index.Tensor_out(x, (None, idx), out=torch.empty(3, 2)), x[:, idx])


def test_optional_tensor_list_bool_mask(reg):
    x = torch.arange(12.0).reshape(3, 4)
    mask = torch.tensor([True, False, True])
    assert_close(reg.aten.index.Tensor_out(x, [mask], out=torch.empty(2, 4)), x[mask])


def test_optional_tensor_list_bool_mask_no_out(reg):
    """A boolean-mask index makes the out shape data-dependent, like nonzero."""
    x = torch.arange(12.0).reshape(3, 4)
    mask = torch.tensor([True, False, True])
    assert_close(reg.aten.index.Tensor_out(x, [mask]), x[mask])


def test_tensor_for_tensor_list_rejected(reg):
    """A Tensor is not a Tensor[] (torch refuses it too), even though it iterates."""
    a = torch.ones(2, 3)
    with pytest.raises(TypeError, match="'tensors'"):
        reg.aten.cat.out(a, out=torch.empty(6))
    with pytest.raises(TypeError, match="'tensors'"):
        reg.aten.stack.out(a, out=torch.empty(2, 3))


def test_tensor_list_rejects_none(reg):
    with pytest.raises(TypeError, match=r"tensors\[1\]"):
        reg.aten.cat.out([torch.ones(2), None], out=torch.empty(2))


# ---- Scalar, Scalar? ---------------------------------------------------------------


@pytest.mark.parametrize("alpha", [2, -3, 0.5])
def test_scalar_int_and_float(reg, alpha):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    assert_close(reg.aten.add.out(a, b, alpha=alpha), torch.add(a, b, alpha=alpha))


def test_scalar_int_tensors(reg):
    a, b = torch.arange(6).reshape(2, 3), torch.arange(6).reshape(2, 3)
    got = reg.aten.add.out(a, b, alpha=3)
    assert got.dtype == torch.int64
    assert torch.equal(got, torch.add(a, b, alpha=3))


def test_scalar_bool(reg):
    a, b = torch.tensor([True, False, False]), torch.tensor([False, False, True])
    assert torch.equal(reg.aten.add.out(a, b, alpha=True), torch.add(a, b, alpha=True))


def test_scalar_positional_other(reg):
    x = torch.randn(2, 3)
    assert_close(reg.aten.add.Scalar_out(x, 2.5), torch.add(x, 2.5))
    assert_close(reg.aten.add.Scalar_out(x, 2, 3), torch.add(x, 2, alpha=3))
    assert_close(reg.aten.mul.Scalar_out(x, 3), x * 3)


def test_scalar_numpy_scalars(reg):
    np = pytest.importorskip("numpy")
    x = torch.randn(4)
    assert_close(reg.aten.add.Scalar_out(x, np.float32(1.5), out=torch.empty(4)), x + 1.5)
    assert_close(reg.aten.add.Scalar_out(x, np.int64(2), out=torch.empty(4)), x + 2)


def test_scalar_numpy_scalars_no_out(reg):
    np = pytest.importorskip("numpy")
    x = torch.randn(4)
    assert_close(reg.aten.add.Scalar_out(x, np.float32(1.5)), x + 1.5)
    assert_close(reg.aten.add.Scalar_out(x, np.int64(2)), x + 2)


def test_scalar_creates_values(reg):
    assert torch.equal(reg.aten.full.out([2, 3], 7, out=torch.empty(2, 3, dtype=torch.int64)), torch.full((2, 3), 7))
    assert_close(reg.aten.arange.start_out(1.0, 2.0, 0.25, out=torch.empty(4)), torch.arange(1.0, 2.0, 0.25))
    assert torch.equal(reg.aten.arange.start_out(2, 11, 3, out=torch.empty(3, dtype=torch.int64)), torch.arange(2, 11, 3))


@pytest.mark.parametrize("lo, hi", [(None, 0.5), (-0.5, None), (-0.25, 0.25), (0, 1)])
def test_optional_scalar(reg, lo, hi):
    x = torch.randn(3, 4)
    assert_close(reg.aten.clamp.out(x, lo, hi), torch.clamp(x, lo, hi))
    assert_close(reg.aten.clamp.out(x, min=lo, max=hi), torch.clamp(x, lo, hi))


def test_optional_scalar_correction(reg):
    x = torch.randn(4, 5)
    assert_close(reg.aten.var.correction_out(x, [1], correction=0), torch.var(x, 1, correction=0))
    assert_close(reg.aten.var.correction_out(x, [1]), torch.var(x, 1))


# ---- int, int?, int[], int[]?, int[N] ----------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_int(reg, dim):
    x = torch.randn(3, 4)
    assert_close(reg.aten.cumsum.out(x, dim), torch.cumsum(x, dim))


def test_int_from_index_protocol(reg):
    np = pytest.importorskip("numpy")
    x = torch.randn(3, 4)
    assert_close(reg.aten.cumsum.out(x, np.int64(1)), torch.cumsum(x, 1))


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_optional_int(reg, dim):
    x = torch.randn(3, 4)
    assert torch.equal(reg.aten.argmax.out(x, dim), torch.argmax(x, dim))


def test_optional_int_divisor_override(reg):
    x = torch.randn(1, 2, 4, 4)
    assert_close(reg.aten.avg_pool2d.out(x, [2, 2], [2, 2], [0, 0], False, True, 3), aten.avg_pool2d(x, [2, 2], [2, 2], [0, 0], False, True, 3))
    assert_close(reg.aten.avg_pool2d.out(x, [2, 2], divisor_override=None), aten.avg_pool2d(x, [2, 2]))


def test_int_list(reg):
    x = torch.randn(2, 3, 4)
    assert_close(reg.aten.permute_copy.out(x, [2, 0, 1]), x.permute(2, 0, 1))
    assert_close(reg.aten.permute_copy.out(x, (1, 2, 0)), x.permute(1, 2, 0))
    assert_close(reg.aten.view_copy.out(x, [6, 4]), x.view(6, 4))
    assert_close(reg.aten.view_copy.out(x, [-1, 2]), x.view(-1, 2))
    assert_close(reg.aten.view_copy.out(x, torch.Size([4, 6])), x.view(4, 6))
    assert_close(reg.aten.constant_pad_nd.out(x, [1, 2], 0.5), torch.nn.functional.pad(x, [1, 2], value=0.5))


# Started at collection, in the background.
_EMPTY_LISTS = start_python(
    """
        import torch, etops
        from torch.testing import assert_close
        reg = etops.registry()
        x = torch.tensor([3.0])
        assert_close(reg.aten.view_copy.out(x, [], out=torch.empty(())), torch.tensor(3.0))
        assert_close(reg.aten.view_copy.out(x, []), torch.tensor(3.0))
        s = torch.tensor(2.0)
        assert_close(reg.aten.permute_copy.out(s, [], out=torch.empty(())), s)
        y = torch.randn(3, 4)
        assert_close(reg.aten.sum.IntList_out(y, [], out=torch.empty(())), torch.sum(y, []))
        assert_close(reg.aten.amax.out(y, [], out=torch.empty(())), torch.amax(y, []))
        for call in (lambda: reg.aten.cat.out([], 0, out=torch.empty(0)),
                     lambda: reg.aten.index.Tensor_out(y, [], out=torch.empty(3, 4))):
            try:
                call()
            except (etops.KernelError, ValueError, TypeError):
                pass
        print("EMPTY-LISTS-OK")
        """
)


def test_empty_lists_do_not_abort():
    """Empty int[] / Tensor[] / Tensor?[] arguments (a call whose only lists are
    empty). Run in a fresh interpreter: an abort there must not take the suite down."""
    proc = _EMPTY_LISTS.result()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "EMPTY-LISTS-OK" in proc.stdout


@pytest.mark.parametrize("dim", [None, [1], [0, 1]])
def test_optional_int_list(reg, dim):
    x = torch.randn(3, 4) > 0
    assert torch.equal(reg.aten.any.dims_out(x, dim), aten.any.dims(x, dim))


def test_optional_int_list_output_size(reg):
    x = torch.randn(1, 2, 3, 3)
    assert_close(
        reg.aten.upsample_bilinear2d.vec_out(x, [5, 6], False, None),
        aten.upsample_bilinear2d.vec(x, [5, 6], False, None),
    )


def test_fixed_size_int_list_from_single_int(reg):
    x = torch.randn(1, 2, 6, 6)
    assert_close(reg.aten.avg_pool2d.out(x, 2), aten.avg_pool2d(x, 2))
    assert_close(reg.aten.avg_pool2d.out(x, 3, 1, 1), aten.avg_pool2d(x, 3, 1, 1))
    assert_close(reg.aten.avg_pool2d.out(x, kernel_size=2, stride=[1, 2]), aten.avg_pool2d(x, 2, [1, 2]))


def test_optional_fixed_size_int_list_from_single_int(reg):
    x = torch.randn(3, 4)
    assert_close(reg.aten.sum.IntList_out(x, 1), torch.sum(x, 1))
    assert_close(reg.aten.sum.IntList_out(x, [0]), torch.sum(x, 0))
    assert_close(reg.aten.sum.IntList_out(x, None), torch.sum(x))
    assert_close(reg.aten.amax.out(x, 1), torch.amax(x, 1))


# ---- float, float?, float[]? , float[] ---------------------------------------------


@pytest.mark.parametrize("eps", [1e-5, 0.5, 1])
def test_float(reg, eps):
    x = torch.randn(2, 5)
    assert_close(reg.aten.native_layer_norm.out(x, [5], None, None, eps)[0], aten.native_layer_norm(x, [5], None, None, eps)[0])


def test_float_p(reg):
    x1, x2 = torch.randn(3, 4), torch.randn(5, 4)
    assert_close(reg.aten._cdist_forward.out(x1, x2, 2.0, None), aten._cdist_forward(x1, x2, 2.0, None))
    assert_close(reg.aten._cdist_forward.out(x1, x2, 1, None), aten._cdist_forward(x1, x2, 1.0, None))


@pytest.mark.parametrize("eps", [None, 1e-6, 0.25])
def test_optional_float(reg, eps):
    x = torch.rand(8)
    assert_close(reg.aten.logit.out(x, eps), torch.logit(x, eps))


@pytest.mark.parametrize("scales", [[2.0, 2.0], (1.5, 3.0), [2, 2]])
def test_optional_float_list(reg, scales):
    x = torch.randn(1, 2, 4, 4)
    want = aten.upsample_bilinear2d.vec(x, None, False, [float(s) for s in scales])
    assert_close(reg.aten.upsample_bilinear2d.vec_out(x, None, False, scales), want)
    want = aten.upsample_nearest2d.vec(x, None, [float(s) for s in scales])
    assert_close(reg.aten.upsample_nearest2d.vec_out(x, None, scales), want)


def test_float_list_non_optional_taken_by_no_kernel(reg):
    """No registered kernel takes a non-optional float[] (only float[]?)."""
    types = _schema_types(reg)
    assert "List[float]" not in types
    assert types["Optional[List[float]]"] == {"aten::upsample_bilinear2d.vec_out", "aten::upsample_nearest2d.vec_out"}


# ---- bool, bool?, bool[] -----------------------------------------------------------


@pytest.mark.parametrize("keepdim", [False, True])
def test_bool(reg, keepdim):
    x = torch.randn(3, 4)
    values, indices = reg.aten.max.dim_max(x, 1, keepdim)
    want = torch.max(x, 1, keepdim)
    assert_close(values, want.values)
    assert torch.equal(indices, want.indices)


@pytest.mark.parametrize("train", [False, None])
def test_optional_bool(reg, train):
    x = torch.randn(3, 4)
    out, mask = reg.aten.native_dropout.out(x, 0.0, train)
    want_out, want_mask = aten.native_dropout(x, 0.0, train)
    assert_close(out, want_out)
    assert torch.equal(mask, want_mask)


def test_bool_list(reg):
    grad = torch.randn(1, 2, 3, 3)
    inp = torch.randn(1, 3, 5, 5)
    weight = torch.randn(2, 3, 3, 3)
    args = ([2], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True])
    got = reg.aten.convolution_backward.out(grad, inp, weight, *args)
    want = aten.convolution_backward(grad, inp, weight, *args)
    assert len(got) == 3
    for g, e in zip(got, want):
        assert_close(g, e, rtol=1e-4, atol=1e-4)


def test_bool_list_wrong_length(reg):
    grad, inp, weight = torch.randn(1, 2, 3, 3), torch.randn(1, 3, 5, 5), torch.randn(2, 3, 3, 3)
    outs = dict(out0=torch.empty(1, 3, 5, 5), out1=torch.empty(2, 3, 3, 3), out2=torch.empty(2))
    with pytest.raises((TypeError, ValueError), match="'output_mask"):
        reg.aten.convolution_backward.out(grad, inp, weight, [2], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True], **outs)
    with pytest.raises(TypeError, match="'output_mask"):
        reg.aten.convolution_backward.out(grad, inp, weight, [2], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [1, 1, 1], **outs)


# ---- str, str? ---------------------------------------------------------------------


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_str(reg, approximate):
    x = torch.randn(3, 4)
    assert_close(reg.aten.gelu.out(x, approximate=approximate), torch.nn.functional.gelu(x, approximate=approximate))


def test_str_default(reg):
    x = torch.randn(3, 4)
    assert_close(reg.aten.gelu.out(x), torch.nn.functional.gelu(x))


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_optional_str(reg, mode):
    a, b = torch.randn(3, 4) * 10, torch.randn(3, 4)
    assert_close(reg.aten.div.out_mode(a, b, rounding_mode=mode), torch.div(a, b, rounding_mode=mode))
    assert_close(reg.aten.div.Scalar_mode_out(a, 3, rounding_mode=mode), torch.div(a, 3, rounding_mode=mode))


# ---- ScalarType, ScalarType?, MemoryFormat?, Layout, Device ------------------------


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8])
def test_scalar_type(reg, dtype):
    import torch.ao.quantization.fx._decomposed  # noqa: F401 - defines quantized_decomposed for torch

    x = torch.randn(3, 4)
    info = torch.iinfo(dtype)
    got = reg.quantized_decomposed.quantize_per_tensor.out(x, 0.05, 3, info.min, info.max, dtype)
    want = torch.ops.quantized_decomposed.quantize_per_tensor(x, 0.05, 3, info.min, info.max, dtype)
    assert got.dtype == dtype
    assert torch.equal(got, want)
    back = reg.quantized_decomposed.dequantize_per_tensor.out(got, 0.05, 3, info.min, info.max, dtype)
    assert_close(back, torch.ops.quantized_decomposed.dequantize_per_tensor(want, 0.05, 3, info.min, info.max, dtype))


@pytest.mark.parametrize("dtype", [None, torch.float64, torch.int64])
def test_optional_scalar_type(reg, dtype):
    x = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    got = reg.aten.sum.IntList_out(x, [1], dtype=dtype)
    want = torch.sum(x, 1, dtype=dtype)
    assert got.dtype == want.dtype
    assert_close(got, want)
    y = torch.randn(5)
    got = reg.aten.cumsum.out(y, 0, dtype=dtype)
    want = torch.cumsum(y, 0, dtype=dtype)
    assert got.dtype == want.dtype
    assert_close(got, want)


def test_scalar_type_not_in_executorch(reg):
    with pytest.raises(ValueError, match="'dtype'"):
        reg.aten.sum.IntList_out(torch.ones(3), [0], dtype=torch.uint2, out=torch.empty(()))


@pytest.mark.parametrize("fmt", [None, torch.contiguous_format])
def test_optional_memory_format(reg, fmt):
    x = torch.randn(2, 3)
    assert_close(reg.aten.clone.out(x, memory_format=fmt), x)
    assert_close(reg.aten.clone.out(x, memory_format=fmt, out=torch.empty(2, 3)), x)
    got = reg.aten._to_copy.out(x, memory_format=fmt, out=torch.empty(2, 3, dtype=torch.float64))
    assert_close(got, x.double())
    assert_close(reg.aten.full_like.out(x, 2.0, memory_format=fmt, out=torch.empty(2, 3)), torch.full_like(x, 2.0))


def test_memory_format_preserve_reaches_kernel(reg):
    """ExecuTorch's portable clone/_to_copy accept only contiguous (or None): the
    value crosses (it is the kernel that refuses, with its own message)."""
    x = torch.randn(2, 3)
    with pytest.raises(etops.KernelError, match="clone") as info:
        reg.aten.clone.out(x, memory_format=torch.preserve_format, out=torch.empty(2, 3))
    assert info.value.error_name == "InvalidArgument"


def test_memory_format_executorch_lacks(reg):
    x = torch.randn(1, 2, 3, 3)
    with pytest.raises(ValueError, match="'memory_format'"):
        reg.aten.clone.out(x, memory_format=torch.channels_last, out=torch.empty_like(x))


def test_layout_and_device_taken_by_no_kernel(reg):
    """No registered kernel takes a Layout or a Device: say so instead of skipping."""
    types = _schema_types(reg)
    for t in ("Layout", "Device"):
        assert not any(t in k for k in types), sorted(k for k in types if t in k)
    for t in ("ScalarType", "MemoryFormat"):
        assert any(t in k for k in types)

