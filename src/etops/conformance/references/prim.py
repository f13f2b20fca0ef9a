"""References of ``executorch_prim::*``: the symbolic scalar ops of exported
programs against Python's semantics of the same operation (what exir's
registry runs for torch: floor division and a modulo taking the divisor's sign,
true division always a float, ``round`` half to even, ``int()`` truncating).
Inputs: ints (``int64``), floats (``float64``) and bools (``bool``), negative
operands and zero divisors among them. et_view and et_copy_index have schemas
given here (no package defines them for torch)."""

from __future__ import annotations

import itertools
import math
import operator
from typing import Any, Callable

import torch

from .spec import Reference, Sample, invalid

_NS = "executorch_prim::"
_INTS = (-7, -2, 0, 3, 7, 1 << 31)
_FLOATS = (-7.5, -0.5, 0.0, 2.5, 3.7, 1e15)
_BOOLS = (False, True)


def _values(dtype: torch.dtype) -> tuple:
    return {torch.int64: _INTS, torch.float64: _FLOATS, torch.bool: _BOOLS}[dtype]


def _pairs(dtype: torch.dtype, divisor: bool = False):
    """Every pair of values of the dtype, and int/float mixes for float64; a zero
    int divisor makes an invalid sample when `divisor` (a float one is valid:
    torch's IEEE semantics)."""
    values = _values(dtype)
    pairs = list(itertools.product(values, repeat=2))
    if dtype == torch.float64:
        pairs += [(a, b) for a in _INTS[:4] for b in _FLOATS[2:5]]
    for a, b in pairs:
        if divisor and b == 0 and isinstance(a, int) and isinstance(b, int):
            yield invalid("argument 'b' is zero (Python raises ZeroDivisionError)", a, b)
        else:
            yield Sample((a, b))


def _singles(dtype: torch.dtype):
    for a in _values(dtype):
        yield Sample((a,))


def _truediv(a, b):
    """Python's a / b; torch's IEEE result (inf, nan) for a zero divisor."""
    if b != 0:
        return a / b
    return math.nan if a == 0 else math.copysign(math.inf, a) * math.copysign(1.0, b)


def _floordiv(a, b):
    """Python's a // b; torch's floor_divide for a zero float divisor (inf, nan)."""
    if b != 0 or (isinstance(a, int) and isinstance(b, int)):
        return a // b
    return float(torch.floor_divide(torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)))


def _sym_ite(b, t, f):
    return t if b else f


def _ite_samples(dtype: torch.dtype):
    for cond, (t, f) in itertools.product(_BOOLS, itertools.product(_values(dtype), repeat=2)):
        yield Sample((cond, t, f))


def _int_pairs(dtype: torch.dtype):
    return _pairs(torch.int64, divisor=True)


def _et_view(self, size, out):
    return self.reshape(size)


def _view_samples(dtype: torch.dtype):
    x = torch.randn(2, 3, 4).to(dtype)
    for size in ([24], [4, 6], [2, -1], [2, 3, 4]):
        yield Sample((x, size, torch.empty([s if s != -1 else 12 for s in size], dtype=dtype)))


def _et_copy_index(copy_to, copy_from, index):
    result = copy_to.clone()
    result[index] = copy_from
    return result


def _copy_index_samples(dtype: torch.dtype):
    for index in (0, 2):
        yield Sample((torch.zeros(3, 2, 2, dtype=dtype), torch.randn(2, 2).to(dtype), index))


_NUMERIC = ("int64", "float64")
_BINARY: dict[str, Callable[..., Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "eq": operator.eq, "gt": operator.gt, "ge": operator.ge,
    "lt": operator.lt, "le": operator.le, "sym_max": max, "sym_min": min,
}
_UNARY: dict[str, Callable[..., Any]] = {"neg": operator.neg, "ceil": math.ceil, "round": round, "trunc": math.trunc, "sym_float": float, "sym_int": int}

REFERENCES = [
    *(Reference(f"{_NS}{name}.Scalar", fn, _pairs, _NUMERIC) for name, fn in _BINARY.items()),
    *(Reference(f"{_NS}{name}.Scalar", fn, _singles, _NUMERIC) for name, fn in _UNARY.items()),
    Reference(f"{_NS}truediv.Scalar", _truediv, _pairs, _NUMERIC),
    Reference(f"{_NS}floordiv.Scalar", _floordiv, lambda d: _pairs(d, divisor=True), _NUMERIC),
    Reference(f"{_NS}mod.Scalar", operator.mod, _int_pairs, ("int64",)),
    Reference(f"{_NS}floordiv.int", operator.floordiv, _int_pairs, ("int64",), schema=f"{_NS}floordiv.int(int a, int b) -> int"),
    Reference(f"{_NS}mod.int", operator.mod, _int_pairs, ("int64",), schema=f"{_NS}mod.int(int a, int b) -> int"),
    Reference(f"{_NS}sym_not.Scalar", operator.not_, _singles, ("bool",)),
    Reference(f"{_NS}sym_ite.Scalar", _sym_ite, _ite_samples, ("bool",)),
    # ExecuTorch's stacks for these two hold exactly their arguments (no result slot)
    Reference(f"{_NS}et_view.default", _et_view, _view_samples, ("float32",),
              schema=f"{_NS}et_view(Tensor self, int[] size, Tensor(a!) out) -> ()"),
    Reference(f"{_NS}et_copy_index.tensor", _et_copy_index, _copy_index_samples, ("float32",),
              schema=f"{_NS}et_copy_index.tensor(Tensor(a!) copy_to, Tensor copy_from, int index) -> ()"),
]
