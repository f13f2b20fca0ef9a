"""References of the aten kernels no OpInfo sample reaches, one per operator with
input constraints in etops.ops (INPUTS), which says how each is judged: its dtypes
and the constraints on its inputs; the comparison kind is its entry's judging part's, and
the reference is ATen's functional counterpart of the kernel (the overload etops
sizes its outs with: ``Reference.reference`` None). This module holds only how the
samples are made, one generator per operator (``_SAMPLES``): converted from the
OpInfo samples of the related functional op (a Scalar overload takes the sample's
tensor as a number; a ``.vec`` overload its size list), or generated from the
schema within the entry's ranks and value ranges, valid and invalid (the invalid
ones worded as the entry's ``invalid`` pairs)."""

from __future__ import annotations

import functools

import torch

from ...ops import INPUTS
from .spec import Reference, Sample, invalid

aten = torch.ops.aten

#: operator -> its sample generator, (its InputConstraints, dtype) -> Samples
_SAMPLES: dict = {}


def _samples_of(*ops):
    """Registers the decorated generator as the one of the entries `ops`."""

    def register(generator):
        for op in ops:
            _SAMPLES[op] = generator
        return generator

    return register


def _why(constraints, argument: str) -> str:
    """The words of an invalid sample: the entry's ``invalid`` pair of `argument`."""
    return f"argument '{argument}' is {dict(constraints.invalid)[argument]}"


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


@_samples_of("aten::bitwise_and.Scalar_out", "aten::bitwise_or.Scalar_out", "aten::bitwise_xor.Scalar_out", "aten::fmod.Scalar_out",
             "aten::bitwise_left_shift.Tensor_Scalar_out", "aten::bitwise_right_shift.Tensor_Scalar_out", "aten::div.Scalar_mode_out")
def _scalar_other(constraints, dtype):
    """Samples (self, other as a number) from the OpInfo samples of the entry's op."""
    for s in _opinfo_samples(constraints, dtype):
        if not s.args or not isinstance(s.input, torch.Tensor):
            continue
        kwargs = {k: v for k, v in s.kwargs.items() if k == "rounding_mode"}
        yield Sample((s.input, _number(s.args[0], constraints, dtype)), kwargs)
        if kwargs:  # the other rounding mode on the same input
            yield Sample((s.input, _number(s.args[0], constraints, dtype)), {"rounding_mode": "trunc"})
    for argument, _what in constraints.invalid:
        if not dtype.is_floating_point:
            yield invalid(_why(constraints, argument), torch.ones(3, dtype=dtype), 0)


@_samples_of("aten::pow.Scalar_out")
def _pow_scalar_samples(constraints, dtype):
    """pow.Scalar (a number to a tensor's powers): the sample's input as the
    base, its exponent (or input) as the exponent tensor."""
    for s in _opinfo_samples(constraints, dtype):
        exponent = s.args[0] if s.args and isinstance(s.args[0], torch.Tensor) else s.input
        if not dtype.is_floating_point:
            exponent = exponent.abs()  # integers to negative powers are refused by torch
        yield Sample((_number(s.input, constraints, dtype), exponent))


@_samples_of("aten::linear.out")
def _linear_samples(constraints, dtype):
    for s in _opinfo_samples(constraints, dtype):
        yield Sample((s.input, *s.args), dict(s.kwargs))


def _pair(value):
    return None if value is None else [value] * 2 if isinstance(value, (int, float)) else list(value)


@_samples_of("aten::upsample_bilinear2d.vec_out")
def _bilinear_samples(constraints, dtype):
    return _upsample_samples(constraints, dtype, align_corners=True)


@_samples_of("aten::upsample_nearest2d.vec_out")
def _nearest_samples(constraints, dtype):
    return _upsample_samples(constraints, dtype, align_corners=False)


def _upsample_samples(constraints, dtype, align_corners: bool):
    """The .vec overloads: the interpolate sample's size (or scale factors) as a
    list (and align_corners where the overload takes it: bilinear)."""
    for s in _opinfo_samples(constraints, dtype):
        if s.input.dim() != 4:
            continue
        size, scales = _pair(s.kwargs.get("size", s.args[0] if s.args else None)), _pair(s.kwargs.get("scale_factor"))
        if (size is None) == (scales is None):
            continue
        scales = None if scales is None else [float(f) for f in scales]
        if align_corners:
            yield Sample((s.input, size, bool(s.kwargs.get("align_corners", False)), scales))
        else:
            yield Sample((s.input, size, scales))


@_samples_of("aten::var.out")
def _var_samples(constraints, dtype):
    """var.out's (dim, unbiased, keepdim) over the var OpInfo's inputs."""
    for s in _opinfo_samples(constraints, dtype):
        x = s.input
        for dim in ([0] if x.dim() else [None]) + ([[x.dim() - 1]] if x.dim() > 1 else []):
            for unbiased, keepdim in ((True, False), (False, True)):
                yield Sample((x, dim, unbiased, keepdim))


def _tensor(shape, dtype):
    x = torch.randn(shape) * 3
    return x > 0 if dtype == torch.bool else x.to(dtype)


_SHAPES = ((), (4,), (2, 3), (2, 3, 4))


@_samples_of("aten::copy.out")
def _copy_samples(constraints, dtype):
    for shape in _SHAPES:
        for src_shape in {shape, shape[1:], ()}:
            for src_dtype in (dtype, torch.float32 if dtype != torch.float32 else torch.int64):
                yield Sample((_tensor(shape, dtype), _tensor(src_shape, src_dtype)))
    yield invalid(_why(constraints, "src"), _tensor((2, 3), dtype), _tensor((7,), dtype))


@_samples_of("aten::fill.Tensor_out")
def _fill_samples(constraints, dtype):
    for shape in _SHAPES:
        for value_dtype in (dtype, torch.float64, torch.int64):
            yield Sample((_tensor(shape, dtype), _tensor((), value_dtype)))
    yield invalid(_why(constraints, "value"), _tensor((2, 3), dtype), _tensor((2,), dtype))


@_samples_of("aten::index_put_")
def _index_put_samples(constraints, dtype):
    for shape in ((5,), (4, 3), (2, 3, 4)):
        x = _tensor(shape, dtype)
        idx = torch.tensor([0, shape[0] - 1, 1])
        values = _tensor((3, *shape[1:]), dtype)
        yield Sample((x, [idx], values, False))
        dup = torch.tensor([1, 1, 0])
        yield Sample((x, [dup], values, True))  # accumulate over repeated indices
        yield Sample((x, [x.select(-1, 0) > 0 if x.dim() > 1 else x > 0], _tensor((), dtype), False))  # a bool mask


@_samples_of("aten::native_dropout.out")
def _dropout_samples(constraints, dtype):
    for shape in ((8,), (4, 5), (2, 3, 4)):
        for p, train in ((0.0, True), (0.5, True), (0.5, False), (1.0, True), (0.3, None)):
            yield Sample((_tensor(shape, dtype), p, train))


@_samples_of("aten::sym_numel")
def _numel_samples(constraints, dtype):
    for shape in ((), (0,), (4,), (2, 3), (2, 0, 3), (1, 2, 3, 4)):
        yield Sample((_tensor(shape, dtype),))


@_samples_of("aten::sym_size.int")
def _size_samples(constraints, dtype):
    for shape in ((4,), (2, 3), (2, 0, 3), (1, 2, 3, 4)):
        for dim in range(len(shape)):
            yield Sample((_tensor(shape, dtype), dim))
        yield invalid(_why(constraints, "dim"), _tensor(shape, dtype), len(shape))


@_samples_of("aten::_native_batch_norm_legit_no_training.out")
def _batch_norm_samples(constraints, dtype):
    for shape in ((3, 4), (2, 4, 5), (2, 4, 3, 3)):
        c = shape[1]
        mean, var = _tensor((c,), dtype), torch.rand(c, dtype=dtype) + 0.1  # variances > 0
        for weight, bias in ((_tensor((c,), dtype), _tensor((c,), dtype)), (None, None)):
            yield Sample((_tensor(shape, dtype), weight, bias, mean, var, 0.1, 1e-5))


@_samples_of("aten::convolution_backward.out")
def _conv_backward_samples(constraints, dtype):
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


def _references() -> list:
    """One Reference per operator of INPUTS, its reference ATen's functional counterpart."""
    differ = sorted(set(INPUTS) ^ set(_SAMPLES))
    if differ:
        raise ValueError(f"the operators of etops.ops' input constraints and the sample generators of {__name__} differ: {', '.join(differ)}")
    return [Reference(name, None, functools.partial(_SAMPLES[name], constraints), constraints.dtypes)
            for name, constraints in INPUTS.items() if constraints is not None]


REFERENCES = _references()
