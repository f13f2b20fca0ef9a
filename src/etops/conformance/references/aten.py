"""References of the aten kernels no OpInfo sample reaches, against ATen (the
functional or in-place overload of the same op). Inputs follow each op's
entry in etops.ops.inputs: converted from the OpInfo samples of the related
functional op (a Scalar overload takes the sample's tensor as a number; a
``.vec`` overload its size list), or generated from the schema within the
entry's ranks and value ranges, valid and invalid."""

from __future__ import annotations

import torch

from ...ops.inputs import INPUTS
from .spec import Reference, Sample, invalid

aten = torch.ops.aten


def _opinfo_samples(constraints, dtype):
    from ..opinfos import opinfos

    op = opinfos()[constraints.opinfo]
    return op.sample_inputs_func(op, "cpu", dtype, False)


def _number(value, constraints, dtype):
    """A Python number standing for `value` (a tensor's first element or a
    number), kept in the entry's range and nonzero when it must be."""
    if isinstance(value, torch.Tensor):
        value = value.flatten()[0].item() if value.numel() else 1
    if constraints.scalar_range is not None:
        low, high = constraints.scalar_range
        value = type(value)(min(max(value, low), high)) if not isinstance(value, bool) else value
    if constraints.nonzero and value == 0:
        value = type(value)(1) if not isinstance(value, bool) else True
    if dtype == torch.bool:
        return bool(value)
    if not dtype.is_floating_point and isinstance(value, float):
        return int(value)
    return value


def _scalar_other(name):
    """Samples (self, other as a number) from the OpInfo samples of `name`'s op."""
    constraints = INPUTS[name]

    def samples(dtype):
        for s in _opinfo_samples(constraints, dtype):
            if not s.args or not isinstance(s.input, torch.Tensor):
                continue
            kwargs = {k: v for k, v in s.kwargs.items() if k == "rounding_mode"}
            yield Sample((s.input, _number(s.args[0], constraints, dtype)), kwargs)
            if kwargs:  # the other rounding mode on the same input
                yield Sample((s.input, _number(s.args[0], constraints, dtype)), {"rounding_mode": "trunc"})
        for _argument, why in constraints.invalid:
            if not dtype.is_floating_point:
                yield invalid(f"argument 'other' is {why}", torch.ones(3, dtype=dtype), 0)

    return samples


def _pow_scalar_samples(dtype):
    """pow.Scalar (a number to a tensor's powers): the sample's input as the
    base, its exponent (or input) as the exponent tensor."""
    constraints = INPUTS["aten::pow.Scalar_out"]
    for s in _opinfo_samples(constraints, dtype):
        exponent = s.args[0] if s.args and isinstance(s.args[0], torch.Tensor) else s.input
        if not dtype.is_floating_point:
            exponent = exponent.abs()  # integers to negative powers are refused by torch
        yield Sample((_number(s.input, constraints, dtype), exponent))


def _linear_samples(dtype):
    for s in _opinfo_samples(INPUTS["aten::linear.out"], dtype):
        yield Sample((s.input, *s.args), dict(s.kwargs))


def _pair(value):
    return None if value is None else [value] * 2 if isinstance(value, (int, float)) else list(value)


def _upsample_samples(name: str, bilinear: bool):
    """The .vec overloads: the interpolate sample's size (or scale factors) as a list."""
    constraints = INPUTS[name]

    def samples(dtype):
        for s in _opinfo_samples(constraints, dtype):
            if s.input.dim() != 4:
                continue
            size, scales = _pair(s.kwargs.get("size", s.args[0] if s.args else None)), _pair(s.kwargs.get("scale_factor"))
            if (size is None) == (scales is None):
                continue
            scales = None if scales is None else [float(f) for f in scales]
            if bilinear:
                yield Sample((s.input, size, bool(s.kwargs.get("align_corners", False)), scales))
            else:
                yield Sample((s.input, size, scales))

    return samples


def _var_samples(dtype):
    """var.out's (dim, unbiased, keepdim) over the var OpInfo's inputs."""
    for s in _opinfo_samples(INPUTS["aten::var.out"], dtype):
        x = s.input
        for dim in ([0] if x.dim() else [None]) + ([[x.dim() - 1]] if x.dim() > 1 else []):
            for unbiased, keepdim in ((True, False), (False, True)):
                yield Sample((x, dim, unbiased, keepdim))


def _tensor(shape, dtype):
    x = torch.randn(shape) * 3
    return x > 0 if dtype == torch.bool else x.to(dtype)


_SHAPES = ((), (4,), (2, 3), (2, 3, 4))


def _copy_samples(dtype):
    for shape in _SHAPES:
        for src_shape in {shape, shape[1:], ()}:
            for src_dtype in (dtype, torch.float32 if dtype != torch.float32 else torch.int64):
                yield Sample((_tensor(shape, dtype), _tensor(src_shape, src_dtype)))
    yield invalid("argument 'src' has a shape that does not broadcast to self", _tensor((2, 3), dtype), _tensor((7,), dtype))


def _fill_samples(dtype):
    for shape in _SHAPES:
        for value_dtype in (dtype, torch.float64, torch.int64):
            yield Sample((_tensor(shape, dtype), _tensor((), value_dtype)))
    yield invalid("argument 'value' has more than 0 dims", _tensor((2, 3), dtype), _tensor((2,), dtype))


def _index_put_samples(dtype):
    for shape in ((5,), (4, 3), (2, 3, 4)):
        x = _tensor(shape, dtype)
        idx = torch.tensor([0, shape[0] - 1, 1])
        values = _tensor((3, *shape[1:]), dtype)
        yield Sample((x, [idx], values, False))
        dup = torch.tensor([1, 1, 0])
        yield Sample((x, [dup], values, True))  # accumulate over repeated indices
        yield Sample((x, [x.select(-1, 0) > 0 if x.dim() > 1 else x > 0], _tensor((), dtype), False))  # a bool mask


def _dropout_samples(dtype):
    for shape in ((8,), (4, 5), (2, 3, 4)):
        for p, train in ((0.0, True), (0.5, True), (0.5, False), (1.0, True), (0.3, None)):
            yield Sample((_tensor(shape, dtype), p, train))


def _numel_samples(dtype):
    for shape in ((), (0,), (4,), (2, 3), (2, 0, 3), (1, 2, 3, 4)):
        yield Sample((_tensor(shape, dtype),))


def _size_samples(dtype):
    for shape in ((4,), (2, 3), (2, 0, 3), (1, 2, 3, 4)):
        for dim in range(len(shape)):
            yield Sample((_tensor(shape, dtype), dim))
        yield invalid("argument 'dim' is out of range", _tensor(shape, dtype), len(shape))


def _batch_norm_samples(dtype):
    for shape in ((3, 4), (2, 4, 5), (2, 4, 3, 3)):
        c = shape[1]
        mean, var = _tensor((c,), dtype), torch.rand(c, dtype=dtype) + 0.1  # variances > 0
        for weight, bias in ((_tensor((c,), dtype), _tensor((c,), dtype)), (None, None)):
            yield Sample((_tensor(shape, dtype), weight, bias, mean, var, 0.1, 1e-5))


def _conv_backward_samples(dtype):
    """1-D and 2-D convolutions (strides, padding, groups); grad_output shaped
    as the forward convolution's result."""
    configs = (((2, 4, 8), (6, 4, 3), [1], [0], 1), ((2, 4, 9), (6, 2, 3), [2], [1], 2),
               ((1, 2, 5, 5), (3, 2, 3, 3), [1, 1], [1, 1], 1), ((2, 4, 6, 6), (4, 2, 2, 2), [2, 2], [0, 0], 2))
    for in_shape, w_shape, stride, padding, groups in configs:
        x, w = _tensor(in_shape, dtype), _tensor(w_shape, dtype)
        dilation = [1] * len(stride)
        y = aten.convolution.default(x, w, None, stride, padding, dilation, False, [0] * len(stride), groups)
        yield Sample((_tensor(tuple(y.shape), dtype), x, w, [w_shape[0]], stride, padding, dilation, False, [0] * len(stride), groups,
                      [True, True, True]))


def _ref(name, fn, samples, **extra):
    return Reference(name, fn, samples, INPUTS[name].dtypes, **extra)


REFERENCES = [
    *(_ref(f"aten::{op}.Scalar_out", getattr(aten, op).Scalar, _scalar_other(f"aten::{op}.Scalar_out"))
      for op in ("bitwise_and", "bitwise_or", "bitwise_xor", "fmod")),
    *(_ref(f"aten::{op}.Tensor_Scalar_out", getattr(aten, op).Tensor_Scalar, _scalar_other(f"aten::{op}.Tensor_Scalar_out"))
      for op in ("bitwise_left_shift", "bitwise_right_shift")),
    _ref("aten::div.Scalar_mode_out", aten.div.Scalar_mode, _scalar_other("aten::div.Scalar_mode_out")),
    _ref("aten::pow.Scalar_out", aten.pow.Scalar, _pow_scalar_samples),
    _ref("aten::linear.out", aten.linear.default, _linear_samples),
    _ref("aten::upsample_bilinear2d.vec_out", aten.upsample_bilinear2d.vec, _upsample_samples("aten::upsample_bilinear2d.vec_out", True)),
    _ref("aten::upsample_nearest2d.vec_out", aten.upsample_nearest2d.vec, _upsample_samples("aten::upsample_nearest2d.vec_out", False)),
    _ref("aten::var.out", aten.var.dim, _var_samples),
    _ref("aten::copy.out", aten.copy.default, _copy_samples),
    _ref("aten::fill.Tensor_out", aten.fill.Tensor, _fill_samples),
    _ref("aten::index_put_", aten.index_put_.default, _index_put_samples),
    _ref("aten::native_dropout.out", aten.native_dropout.default, _dropout_samples),
    _ref("aten::sym_numel", aten.sym_numel.default, _numel_samples),
    _ref("aten::sym_size.int", aten.sym_size.int, _size_samples),
    _ref("aten::_native_batch_norm_legit_no_training.out", aten._native_batch_norm_legit_no_training.default, _batch_norm_samples),
    _ref("aten::convolution_backward.out", aten.convolution_backward.default, _conv_backward_samples),
]
