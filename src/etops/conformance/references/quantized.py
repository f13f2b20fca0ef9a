"""References of ``quantized_decomposed::*``: torch's own reference operators
(``torch.ops.quantized_decomposed.*``, registered by
torch.ao.quantization.fx._decomposed and executorch's quantized library; add,
mixed_mm and mixed_linear, for which torch has only meta kernels, composed
from torch's ops as their exir patterns define them), on
inputs inside quantization ranges: scales > 0, zero points within
[quant_min, quant_max], quant_min/quant_max within the dtype's range,
quantized inputs holding values in that range, packed 2- and 4-bit weights.
The dtype of a task is the quantized dtype (int8, uint8)."""

from __future__ import annotations

import torch

from .spec import Reference, Sample, invalid, torch_op

_MODULES = ("torch.ao.quantization.fx._decomposed", "executorch.kernels.quantized",
            "executorch.exir.passes._quant_patterns_and_replacements")
_NS = "quantized_decomposed::"
_QDTYPES = ("int8", "uint8")
_SHAPES = ((), (4,), (3, 5), (2, 3, 4))


def _ref(name: str, overload: str = "default"):
    return torch_op("quantized_decomposed", name, overload, _MODULES)


def _add_reference(a, a_scale, a_zp, a_min, a_max, b, b_scale, b_zp, b_min, b_max, out_scale, out_zp, out_min, out_max):
    """quantized add as its pattern in exir defines it (torch registers only a
    meta kernel): dequantize both, add in float, quantize to the out's params."""
    deq, quant = _ref("dequantize_per_tensor"), _ref("quantize_per_tensor")
    total = deq(a, a_scale, a_zp, a_min, a_max, a.dtype) + deq(b, b_scale, b_zp, b_min, b_max, b.dtype)
    return quant(total, out_scale, out_zp, out_min, out_max, a.dtype)


def _mixed_mm_reference(input, weight, weight_scales, weight_zero_points):
    """input @ (weight scaled per row): an int8 (k, n) weight with k scales."""
    if weight_zero_points is not None:
        raise ValueError("mixed_mm: argument 'weight_zero_points' is not supported (must be None)")
    return torch.mm(input, weight.to(input.dtype) * weight_scales.to(input.dtype).unsqueeze(1))


def _mixed_linear_reference(input, weight, weight_scales, weight_zero_points, dtype=None):
    """input @ dequantized(weight).T: an int8 (n, k) weight, scales (n,) or
    (n, groups), each group of k / groups columns sharing a scale."""
    if weight_zero_points is not None:
        raise ValueError("mixed_linear: argument 'weight_zero_points' is not supported (must be None)")
    scales = weight_scales if weight_scales.dim() == 2 else weight_scales.unsqueeze(1)
    scales = scales.repeat_interleave(weight.shape[1] // scales.shape[1], dim=1)
    result = input @ (weight.to(input.dtype) * scales.to(input.dtype)).t()
    return result if dtype is None else result.to(dtype)


def _range(dtype):
    info = torch.iinfo(dtype)
    return info.min, info.max


def _quantized(shape, dtype, qmin=None, qmax=None):
    lo, hi = _range(dtype)
    lo, hi = lo if qmin is None else qmin, hi if qmax is None else qmax
    return torch.randint(lo, hi + 1, shape, dtype=torch.int64).to(dtype)


def _params(dtype):
    """(scale, zero_point, quant_min, quant_max) choices: the full range with a
    zero point at its low end and in its middle, and a narrowed range."""
    lo, hi = _range(dtype)
    return ((0.05, lo, lo, hi), (0.5, (lo + hi) // 2, lo, hi), (0.02, (lo + hi) // 2, lo + 1, hi - 1))


def _quantize_per_tensor(dtype, tensors=False):
    for shape in _SHAPES:
        for scale, zp, qmin, qmax in _params(dtype):
            x = torch.randn(shape) * 3
            if tensors:
                yield Sample((x, torch.tensor([scale], dtype=torch.float64), torch.tensor([zp]), qmin, qmax, dtype))
            else:
                yield Sample((x, scale, zp, qmin, qmax, dtype))
    lo, hi = _range(dtype)
    scale, zp = (torch.tensor([0.1], dtype=torch.float64), torch.tensor([0])) if tensors else (0.1, 0)
    yield invalid("argument 'quant_min' is below the dtype's range", torch.randn(4), scale, zp, lo - 100, hi, dtype)
    yield invalid("argument 'dtype' is not a quantized dtype", torch.randn(4), scale, zp, lo, hi, torch.float32)


def _dequantize_per_tensor(dtype, tensors=False):
    for shape in _SHAPES:
        for scale, zp, qmin, qmax in _params(dtype):
            q = _quantized(shape, dtype, qmin, qmax)
            if tensors:
                yield Sample((q, torch.tensor([scale], dtype=torch.float64), torch.tensor([zp]), qmin, qmax, dtype))
            else:
                yield Sample((q, scale, zp, qmin, qmax, dtype))
    lo, hi = _range(dtype)
    q = _quantized((4,), dtype)
    other = torch.uint8 if dtype == torch.int8 else torch.int8
    if not tensors:
        yield invalid("argument 'dtype' differs from the input's dtype", q, 0.1, 0, lo, hi, other)


def _per_channel(dtype, quantize: bool):
    for shape, axis in (((3, 4), 0), ((3, 4), 1), ((2, 3, 4), 1), ((2, 3, 4), 2)):
        n = shape[axis]
        lo, hi = _range(dtype)
        scales = torch.rand(n, dtype=torch.float64) * 0.5 + 0.01
        zps = torch.randint(lo, hi + 1, (n,), dtype=torch.int64)
        x = torch.randn(shape) * 3 if quantize else _quantized(shape, dtype)
        yield Sample((x, scales, zps, axis, lo, hi, dtype))
        if not quantize:
            yield Sample((x, scales, None, axis, lo, hi, dtype))


def _per_token(dtype, quantize: bool):
    lo, hi = _range(dtype)
    for shape in ((4, 8), (2, 3, 8), (1, 5, 16)):
        rows = shape[:-1] + (1,)
        scales = torch.rand(rows, dtype=torch.float64) * 0.1 + 0.01  # the kernel's contract: double scales
        zps = torch.randint(lo, hi + 1, rows, dtype=torch.int64)
        if quantize:
            yield Sample((torch.randn(shape) * 3, scales, zps, lo, hi, dtype))
        else:
            yield Sample((_quantized(shape, dtype), scales, zps, lo, hi, dtype, torch.float32))


def _choose_qparams(dtype):
    lo, hi = _range(dtype)
    for shape in ((4,), (3, 5), (2, 3, 4)):
        yield Sample((torch.randn(shape) * 3, lo, hi, 1e-5, dtype))
        yield Sample((torch.rand(shape) + 0.5, lo, hi, 1e-5, dtype))  # all positive: zero point at the low end
    yield invalid("argument 'quant_min' is above 'quant_max'", torch.randn(4), hi, lo, 1e-5, dtype)


def _choose_per_token(dtype):
    for shape in ((4, 8), (2, 3, 8)):
        yield Sample((torch.randn(shape) * 3, dtype))


def _add(dtype):
    lo, hi = _range(dtype)
    for shape in ((4,), (3, 5), (2, 3, 4)):
        a, b = _quantized(shape, dtype), _quantized(shape, dtype)
        za, zb, zo = lo + 10, (lo + hi) // 2, (lo + hi) // 2
        yield Sample((a, 0.1, za, lo, hi, b, 0.05, zb, lo, hi, 0.2, zo, lo, hi))
    a = _quantized((4,), dtype)
    yield invalid("argument 'b' has another shape than 'a'", a, 0.1, 0, lo, hi, _quantized((3,), dtype), 0.1, 0, lo, hi, 0.1, 0, lo, hi)


def _mixed(dtype, linear: bool):
    for m, k, n in ((2, 8, 3), (5, 16, 4)):
        x = torch.randn(m, k)
        if linear:
            w = _quantized((n, k), torch.int8)
            for scales in (torch.rand(n) * 0.1 + 0.01, torch.rand(n, 2) * 0.1 + 0.01):
                yield Sample((x, w, scales, None))
        else:
            w = _quantized((k, n), torch.int8)
            yield Sample((x, w, torch.rand(k) * 0.1 + 0.01, None))


_BITS = {"byte": (8, -128, 127), "4bit": (4, -8, 7), "2bit": (2, -2, 1)}


def _embedding(bits: str, dtype_out: bool):
    nbits, qmin, qmax = _BITS[bits]
    per_byte = 8 // nbits

    def samples(dtype):
        for rows, dim, groups in ((10, 8, 1), (6, 16, 2)):
            if nbits == 8:
                weight = _quantized((rows, dim), torch.int8)
            else:
                weight = torch.randint(0, 256, (rows, dim // per_byte), dtype=torch.int64).to(torch.uint8)
            scales = torch.rand(rows, groups) * 0.1 + 0.01 if groups > 1 else torch.rand(rows) * 0.1 + 0.01
            for zps in (None, torch.randint(qmin, qmax + 1, scales.shape, dtype=torch.int64).to(torch.float32)):
                indices = torch.randint(0, rows, (5,))
                kwargs = {"dtype": torch.float32} if dtype_out else {}
                yield Sample((weight, scales, zps, qmin, qmax, indices), kwargs)
    return samples


def _quant_refs():
    refs = [
        Reference(f"{_NS}quantize_per_tensor.out", _ref("quantize_per_tensor"), _quantize_per_tensor, _QDTYPES),
        Reference(f"{_NS}quantize_per_tensor.Tensor_out", _ref("quantize_per_tensor", "tensor"),
                  lambda d: _quantize_per_tensor(d, tensors=True), _QDTYPES),
        Reference(f"{_NS}dequantize_per_tensor.out", _ref("dequantize_per_tensor"), _dequantize_per_tensor, _QDTYPES),
        Reference(f"{_NS}dequantize_per_tensor.Tensor_out", _ref("dequantize_per_tensor", "tensor"),
                  lambda d: _dequantize_per_tensor(d, tensors=True), _QDTYPES),
        Reference(f"{_NS}quantize_per_channel.out", _ref("quantize_per_channel"), lambda d: _per_channel(d, True), _QDTYPES),
        Reference(f"{_NS}dequantize_per_channel.out", _ref("dequantize_per_channel"), lambda d: _per_channel(d, False), _QDTYPES),
        Reference(f"{_NS}quantize_per_token.out", _ref("quantize_per_token"), lambda d: _per_token(d, True), _QDTYPES),
        Reference(f"{_NS}dequantize_per_token.out", _ref("dequantize_per_token"), lambda d: _per_token(d, False), _QDTYPES),
        Reference(f"{_NS}choose_qparams.Tensor_out", _ref("choose_qparams", "tensor"), _choose_qparams, _QDTYPES),
        Reference(f"{_NS}choose_qparams_per_token_asymmetric.out", _ref("choose_qparams_per_token_asymmetric"), _choose_per_token, ("int8",)),
        Reference(f"{_NS}add.out", _add_reference, _add, ("uint8",), outs_from_reference=True),
        Reference(f"{_NS}mixed_mm.out", _mixed_mm_reference, lambda d: _mixed(d, False), ("float32",), outs_from_reference=True),
        Reference(f"{_NS}mixed_linear.out", _mixed_linear_reference, lambda d: _mixed(d, True), ("float32",), outs_from_reference=True),
    ]
    for bits in _BITS:
        refs.append(Reference(f"{_NS}embedding_{bits}.out", _ref(f"embedding_{bits}"), _embedding(bits, False), ("float32",)))
        refs.append(Reference(f"{_NS}embedding_{bits}.dtype_out", _ref(f"embedding_{bits}", "dtype"), _embedding(bits, True), ("float32",)))
    return refs


REFERENCES = _quant_refs()
