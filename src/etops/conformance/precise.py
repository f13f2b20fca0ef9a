"""A reference more precise than float64, and a kernel's effective precision.

ATen's float64 result cannot judge a float64 kernel: measured against itself ATen
has no error, and a float32 computation (about 10^9 ulps of float64) then reads as
"within the dtype's tolerance". For the ATen ops below a float64 case is evaluated
again in ``numpy.longdouble`` (x87 extended on x86-64 Linux: 64 significant bits,
11 more than float64), which measures both ExecuTorch's error and ATen's own to a
small fraction of a float64 ulp. longdouble because it is already here (numpy
comes with matplotlib, a dependency), vectorised (a case costs microseconds, so
every float64 case of a sweep can be measured), and covers elementwise
functions, sums, means, products and normalizations with one code path; mpmath
(also installed, with sympy) would be exact but a Python loop per element, and
``math.fsum`` / fractions cover sums only. Where longdouble is not wider than
float64 (``WIDER`` False: Windows, macOS on arm64) no op has an evaluator and
ATen's float64 result is the reference (its own error then reads 0).

``effective_ulps(actual, reference, dtype)`` is the worst error in ulps of the
dtype at the output's scale (max |reference|: an ulp of the largest element).

May import: numpy, torch.
"""

from __future__ import annotations

import math

import numpy as np
import torch

#: longdouble has more significant bits than float64 here
WIDER = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant

_LD = np.longdouble


def _ld(value):
    """A float64 tensor (or a Python number) as a longdouble array."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().resolve_conj().resolve_neg().numpy().astype(_LD)
    return np.asarray(value, dtype=_LD)


def _dims(dim, ndim: int):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(d % max(ndim, 1) for d in dims)


def _reduce(fn):
    def evaluate(x, dim=None, keepdim=False, *, dtype=None, **_):
        a = _ld(x)
        return fn(a, axis=_dims(dim, a.ndim), keepdims=keepdim)
    return evaluate


def _var(unbiased_sqrt: bool):
    def evaluate(x, dim=None, *, correction=None, keepdim=False, **_):
        a = _ld(x)
        axes = _dims(dim, a.ndim)
        n = math.prod(a.shape[d] for d in axes) if a.ndim else 1
        c = 1 if correction is None else float(correction)
        centred = a - np.mean(a, axis=axes, keepdims=True)
        var = np.sum(centred * centred, axis=axes, keepdims=keepdim) / _LD(max(n - c, 0))
        return np.sqrt(var) if unbiased_sqrt else var
    return evaluate


def _layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    a = _ld(x)
    axes = tuple(range(a.ndim - len(normalized_shape), a.ndim))
    mean = np.mean(a, axis=axes, keepdims=True)
    centred = a - mean
    rstd = 1 / np.sqrt(np.mean(centred * centred, axis=axes, keepdims=True) + _LD(eps))
    out = centred * rstd
    if weight is not None:
        out = out * _ld(weight)
    if bias is not None:
        out = out + _ld(bias)
    return out, mean, rstd


def _softmax(log: bool):
    def evaluate(x, dim, half_to_float=False):
        a = _ld(x)
        shifted = a - np.max(a, axis=dim, keepdims=True)
        total = np.sum(np.exp(shifted), axis=dim, keepdims=True)
        return shifted - np.log(total) if log else np.exp(shifted) / total
    return evaluate


def _binary(fn):
    def evaluate(a, b, *, alpha=1, **_):
        return fn(_ld(a), _ld(b) * _LD(alpha) if alpha != 1 else _ld(b))
    return evaluate


def _unary(fn):
    return lambda x, **_: fn(_ld(x))


def _addmm(bias, a, b, *, beta=1, alpha=1):
    return _LD(beta) * _ld(bias) + _LD(alpha) * np.matmul(_ld(a), _ld(b))


def _cumsum(x, dim, *, dtype=None):
    return np.cumsum(_ld(x), axis=dim)


#: ATen op (name without overload, overloads with these arguments) -> evaluator in longdouble
_EVALUATORS = {
    "aten::sum": _reduce(np.sum), "aten::mean": _reduce(np.mean),
    "aten::var": _var(False), "aten::std": _var(True),
    "aten::native_layer_norm": _layer_norm,
    "aten::_softmax": _softmax(False), "aten::_log_softmax": _softmax(True),
    "aten::cumsum": _cumsum,
    "aten::mm": lambda a, b: np.matmul(_ld(a), _ld(b)), "aten::bmm": lambda a, b: np.matmul(_ld(a), _ld(b)),
    "aten::addmm": _addmm,
    "aten::add": _binary(np.add), "aten::sub": _binary(np.subtract),
    "aten::mul": lambda a, b: np.multiply(_ld(a), _ld(b)),
    "aten::div": lambda a, b, *, rounding_mode=None: np.divide(_ld(a), _ld(b)) if rounding_mode is None else None,
    "aten::exp": _unary(np.exp), "aten::expm1": _unary(np.expm1), "aten::exp2": _unary(np.exp2),
    "aten::log": _unary(np.log), "aten::log1p": _unary(np.log1p), "aten::log2": _unary(np.log2), "aten::log10": _unary(np.log10),
    "aten::sin": _unary(np.sin), "aten::cos": _unary(np.cos), "aten::tan": _unary(np.tan),
    "aten::asin": _unary(np.arcsin), "aten::acos": _unary(np.arccos), "aten::atan": _unary(np.arctan),
    "aten::sinh": _unary(np.sinh), "aten::cosh": _unary(np.cosh), "aten::tanh": _unary(np.tanh),
    "aten::asinh": _unary(np.arcsinh), "aten::acosh": _unary(np.arccosh), "aten::atanh": _unary(np.arctanh),
    "aten::sqrt": _unary(np.sqrt), "aten::rsqrt": _unary(lambda a: 1 / np.sqrt(a)),
    "aten::reciprocal": _unary(lambda a: 1 / a), "aten::sigmoid": _unary(lambda a: 1 / (1 + np.exp(-a))),
    "aten::atan2": lambda a, b: np.arctan2(_ld(a), _ld(b)), "aten::hypot": lambda a, b: np.hypot(_ld(a), _ld(b)),
}


#: the overloads whose arguments the evaluators take (any other overload has none)
_OVERLOADS = {
    "aten::sum": {"default", "dim_IntList"}, "aten::mean": {"default", "dim"},
    "aten::var": {"correction"}, "aten::std": {"correction"},
    "aten::add": {"Tensor", "Scalar"}, "aten::sub": {"Tensor", "Scalar"}, "aten::mul": {"Tensor", "Scalar"},
    "aten::div": {"Tensor", "Scalar", "Tensor_mode", "Scalar_mode"},
}


def op_name(func) -> str:
    """``aten::sum`` for ``torch.ops.aten.sum.dim_IntList`` (its overload packet's name)."""
    schema = getattr(func, "_schema", None)
    return schema.name if schema is not None else ""


def has_evaluator(func) -> bool:
    """An evaluator takes this overload's arguments (longdouble wider than float64 here)."""
    name = op_name(func)
    if not WIDER or name not in _EVALUATORS:
        return False
    return func._schema.overload_name in _OVERLOADS.get(name, {"", "default"})


def _all_double(values) -> bool:
    """Every floating tensor among `values` is float64 (no other precision mixed in)."""
    for v in values:
        if isinstance(v, (list, tuple)):
            if not _all_double(v):
                return False
        elif isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()) and v.dtype != torch.float64:
            return False
    return True


def reference(func, args, kwargs) -> list | None:
    """The results of `func` (an ATen op) on float64 inputs evaluated in
    longdouble, one array per result; None when the op has no evaluator, an input
    is not float64 (or complex), or the evaluator declines."""
    if not has_evaluator(func) or not _all_double(list(args) + list(kwargs.values())):
        return None
    kwargs = {k: v for k, v in kwargs.items() if k not in ("out", "dtype") and not isinstance(v, torch.dtype)}
    try:
        with np.errstate(all="ignore"):
            result = _EVALUATORS[op_name(func)](*args, **kwargs)
    except (TypeError, ValueError, IndexError, np.exceptions.AxisError if hasattr(np, "exceptions") else ValueError):
        return None
    if result is None:
        return None
    return [np.asarray(r, dtype=_LD) for r in (result if isinstance(result, tuple) else (result,))]


def _as_ld(value):
    if isinstance(value, np.ndarray):
        return value.astype(_LD)
    return _ld(value.to(torch.float64)) if value.is_floating_point() else None


def effective_ulps(actual, ref, dtype: torch.dtype) -> float | None:
    """Worst |actual - ref| in ulps of `dtype` at the output's scale (eps(dtype) x
    max finite |ref|, and at least the spacing of `dtype`'s subnormals: a scale of
    denormals, the numerics axis' ``tiny``); inf where one is non-finite and the
    other differs, or where the reference is all zeros and the result is not; None
    when there is nothing to measure (no elements, not floating, other shapes)."""
    a, r = _as_ld(actual) if isinstance(actual, torch.Tensor) else None, _as_ld(ref)
    if a is None or r is None or a.shape != r.shape or a.size == 0:
        return None
    finite = np.isfinite(a) & np.isfinite(r)
    same = (a == r) | (np.isnan(a) & np.isnan(r))
    if bool(np.any(~finite & ~same)):
        return math.inf
    with np.errstate(invalid="ignore"):  # inf - inf where not finite: left out by the where
        err = np.abs(np.where(finite, a - r, 0))
    worst = float(np.max(err))
    scale = float(np.max(np.abs(np.where(np.isfinite(r), r, 0))))
    if worst == 0:
        return 0.0
    if scale == 0:
        return math.inf
    info = torch.finfo(dtype)
    return worst / max(info.eps * scale, info.eps * info.tiny)
