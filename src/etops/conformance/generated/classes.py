"""The classes generated cases are combined from, and how one class becomes values:
shape classes (shapes of the tensors a case broadcasts or shares), dtype
combinations across the promotion lattice, scalar classes (the values of an
operator's Scalar arguments) and value classes (what a tensor's elements are).

Every function here is deterministic given its ``random.Random``: a case's values
follow from its key (etops.conformance.generated.cases seeds the generator with it).

Imports torch and the standard library only.
"""

from __future__ import annotations

import math
import random

import torch

# ---- shape classes -----------------------------------------------------------------

#: element counts crossing the vector widths and tile sizes of the kernels (8, 16, 32, 64 lanes; 4x4 tiles)
LARGE_SIZES = (17, 31, 33, 63, 65, 127, 129, 257, 1031)

#: shape classes of one tensor (or of tensors sharing one shape)
SINGLE_SHAPES = ("0-d", "one", "empty", "odd", "large", "rank1", "rank2", "rank3", "rank4", "rank5", "rank6",
                 "size1-dim0", "size1-dim1", "size1-dim2", "size1-dim3")
#: shape classes of tensors that broadcast together (the first tensor against the others)
BROADCAST_SHAPES = ("one-vs-many", "many-vs-one", "0-d-vs-many", "many-vs-0-d", "column-vs-row", "high-vs-low-rank",
                    "low-vs-high-rank", "not-broadcastable")
#: shape classes of a matrix product (m, k) @ (k, n)
MATMUL_SHAPES = ("one", "empty-inner", "empty-outer", "odd", "large", "vector-row", "vector-column", "square-tile")


def _odd(rng: random.Random, low: int = 3, high: int = 9) -> int:
    return rng.choice([n for n in range(low, high + 1) if n % 2])


def single_shape(cls: str, rng: random.Random) -> tuple:
    """A shape of class `cls` (one of SINGLE_SHAPES)."""
    if cls == "0-d":
        return ()
    if cls == "one":
        return rng.choice([(1,), (1, 1)])
    if cls == "empty":
        return rng.choice([(0,), (3, 0), (0, 4)])
    if cls == "odd":
        return (_odd(rng), _odd(rng))
    if cls == "large":
        n = rng.choice(LARGE_SIZES)
        return rng.choice([(n,), (3, n)])
    if cls.startswith("rank"):
        rank = int(cls[4:])
        budget = 4 if rank >= 5 else 5
        return tuple(rng.randint(1, budget) if i else rng.randint(2, budget) for i in range(rank))
    if cls.startswith("size1-dim"):
        where = int(cls[len("size1-dim"):])
        shape = [rng.randint(2, 5) for _ in range(4)]
        shape[where] = 1
        return tuple(shape)
    raise ValueError(f"single_shape: argument 'cls' must be one of {', '.join(SINGLE_SHAPES)}, got {cls!r}")


def broadcast_shapes(cls: str, count: int, rng: random.Random) -> list:
    """Shapes of `count` tensors in class `cls` (one of BROADCAST_SHAPES, or a
    single class shared by all): the first tensor's, then the others' (equal)."""
    if cls in SINGLE_SHAPES:
        shape = single_shape(cls, rng)
        return [shape] * count
    many = (_odd(rng, 3, 7), _odd(rng, 3, 9))
    first, other = {
        "one-vs-many": ((1,), (many[1],)),
        "many-vs-one": ((many[1],), (1,)),
        "0-d-vs-many": ((), many),
        "many-vs-0-d": (many, ()),
        "column-vs-row": ((many[0], 1), (1, many[1])),
        "high-vs-low-rank": ((2, *many), (many[1],)),
        "low-vs-high-rank": ((many[1],), (2, *many)),
        "not-broadcastable": ((many[0],), (many[0] + 1,)),
    }[cls]
    return [first] + [other] * (count - 1)


def matmul_sizes(cls: str, rng: random.Random) -> tuple:
    """(m, k, n) of a matrix product in class `cls` (one of MATMUL_SHAPES)."""
    if cls == "one":
        return 1, 1, 1
    if cls == "empty-inner":
        return _odd(rng), 0, _odd(rng)
    if cls == "empty-outer":
        return 0, _odd(rng), _odd(rng)
    if cls == "odd":
        return _odd(rng), _odd(rng), _odd(rng)
    if cls == "large":
        return rng.choice(LARGE_SIZES[:6]), rng.choice(LARGE_SIZES[:6]), rng.choice(LARGE_SIZES[:5])
    if cls == "vector-row":
        return 1, _odd(rng), _odd(rng)
    if cls == "vector-column":
        return _odd(rng), _odd(rng), 1
    if cls == "square-tile":
        n = rng.choice((4, 8, 16))
        return n, n, n
    raise ValueError(f"matmul_sizes: argument 'cls' must be one of {', '.join(MATMUL_SHAPES)}, got {cls!r}")


# ---- dtypes ------------------------------------------------------------------------

#: the promotion lattice's CPU dtypes ExecuTorch kernels take
LATTICE = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
#: mixed pairs across the lattice (first tensor, the others): each crossing of kinds and widths
MIXED = (("int16", "float32"), ("uint8", "int8"), ("bool", "int32"), ("float16", "bfloat16"), ("int64", "float16"),
         ("float32", "float64"), ("int32", "int64"), ("bool", "float32"), ("bfloat16", "float32"), ("int8", "float64"))


def combo_name(dtypes: tuple) -> str:
    return "+".join(dtypes)


def dtype_combos(tensors: int, only=None) -> tuple:
    """The dtype levels of an operator with `tensors` tensors that mix: every
    lattice dtype alone, then the mixed pairs (two or more tensors); `only`: dtype
    names the levels keep to (None: the lattice)."""
    keep = LATTICE if only is None else tuple(d for d in LATTICE if d in only)
    alone = tuple(combo_name((d,)) for d in keep)
    return alone + (tuple(combo_name(p) for p in MIXED if set(p) <= set(keep)) if tensors > 1 else ())


def combo_dtypes(level: str) -> tuple:
    """The torch dtypes of a dtype level: the first tensor's, then the others'."""
    return tuple(getattr(torch, name) for name in level.split("+"))


# ---- scalars -----------------------------------------------------------------------

#: the values of a Scalar argument (alpha, beta, a Scalar other): "default" leaves it out
SCALAR_CLASSES = ("default", "0", "1", "-1", "2.5", "int", "bool")


def scalar_value(cls: str):
    """The Python number of scalar class `cls` (None for "default")."""
    return {"default": None, "0": 0, "1": 1, "-1": -1, "2.5": 2.5, "int": 3, "bool": True}[cls]


# ---- values ------------------------------------------------------------------------

#: what a tensor's elements are
VALUE_CLASSES = ("random", "small_int", "halves", "signed_zero", "subnormal", "huge", "nonfinite", "int_extremes",
                 "overflow", "large_magnitude")
_FLOATING_ONLY = {"halves", "signed_zero", "subnormal", "huge", "nonfinite", "large_magnitude"}
_INTEGRAL_ONLY = {"int_extremes"}


def applies(cls: str, dtype: torch.dtype) -> bool:
    """Whether value class `cls` means anything at `dtype` (subnormals of an integer
    tensor do not; accumulator overflow of float32 or float64 needs sizes no case
    has, nor of bool)."""
    if dtype == torch.bool:
        return cls in ("random", "small_int")
    if cls in _FLOATING_ONLY:
        return dtype.is_floating_point
    if cls in _INTEGRAL_ONLY:
        return not dtype.is_floating_point
    if cls == "overflow":
        return not dtype.is_floating_point or dtype in (torch.float16, torch.bfloat16)
    return True


def _fill(shape, dtype, pick) -> torch.Tensor:
    n = math.prod(shape)
    return torch.tensor([pick() for _ in range(n)], dtype=torch.float64).to(dtype).reshape(shape)


def make_values(cls: str, shape: tuple, dtype: torch.dtype, rng: random.Random) -> torch.Tensor:
    """A contiguous tensor of `shape` and `dtype` whose elements are of value class
    `cls` (a class that does not apply at `dtype` gives "random" values)."""
    if not applies(cls, dtype):
        cls = "random"
    if dtype == torch.bool:
        n = math.prod(shape)
        return torch.tensor([rng.random() < 0.5 for _ in range(n)], dtype=torch.bool).reshape(shape)
    floating = dtype.is_floating_point
    info = torch.finfo(dtype) if floating else torch.finfo(torch.float32)
    # integer bounds of the integer classes (a floating tensor takes any small integer)
    low, high = (-(2 ** 62), 2 ** 62) if floating else (int(torch.iinfo(dtype).min), int(torch.iinfo(dtype).max))
    if cls == "random":
        if floating:
            return _fill(shape, dtype, lambda: rng.uniform(-10, 10))
        return _fill_int(shape, dtype, lambda: rng.randint(max(low, -50), min(high, 50)))
    if cls == "small_int":
        return _fill_int(shape, dtype, lambda: rng.randint(max(low, -4), min(high, 8 if low == 0 else 4)))
    if cls == "halves":
        return _fill(shape, dtype, lambda: rng.randint(-8, 8) / 2)
    if cls == "signed_zero":
        return _fill(shape, dtype, lambda: rng.choice((0.0, -0.0, 0.0, -0.0, 1.0, -1.0)))
    if cls == "subnormal":
        tiny = info.tiny
        return _fill(shape, dtype, lambda: rng.choice((-1, 1)) * tiny * rng.choice((0.5, 0.25, 0.125, 2 ** -6, 1.0)))
    if cls == "huge":  # all positive, all negative, or either (0)
        sign = rng.choice((1, -1, 0))
        return _fill(shape, dtype, lambda: (sign or rng.choice((-1, 1))) * info.max * rng.uniform(0.125, 0.5))
    if cls == "nonfinite":
        return _fill(shape, dtype, lambda: rng.choice((math.nan, math.inf, -math.inf, rng.uniform(-4, 4))))
    if cls == "large_magnitude":  # exp() of these overflows (or underflows) every floating dtype: 90 up to max / 2
        sign = rng.choice((1, -1, 0))  # all positive, all negative, or either (0)
        top = math.log(info.max / 2)
        return _fill(shape, dtype, lambda: (sign or rng.choice((-1, 1))) * math.exp(rng.uniform(math.log(90), top)))
    if cls == "int_extremes":
        return _fill_int(shape, dtype, lambda: rng.choice((low, low + 1, high, high - 1, 0, -1 if low else 1)))
    if cls == "overflow":  # every element near half the largest: a sum of three overflows
        if floating:
            return _fill(shape, dtype, lambda: info.max * rng.uniform(0.3, 0.5))
        return _fill_int(shape, dtype, lambda: rng.randint(high // 2, high))
    raise ValueError(f"make_values: argument 'cls' must be one of {', '.join(VALUE_CLASSES)}, got {cls!r}")


def _fill_int(shape, dtype, pick) -> torch.Tensor:
    n = math.prod(shape)
    values = [pick() for _ in range(n)]
    if dtype.is_floating_point:
        return torch.tensor(values, dtype=torch.float64).to(dtype).reshape(shape)
    return torch.tensor(values, dtype=torch.int64).to(dtype).reshape(shape)


__all__ = ["BROADCAST_SHAPES", "LARGE_SIZES", "LATTICE", "MATMUL_SHAPES", "MIXED", "SCALAR_CLASSES", "SINGLE_SHAPES",
           "VALUE_CLASSES", "applies", "broadcast_shapes", "combo_dtypes", "combo_name", "dtype_combos", "make_values",
           "matmul_sizes", "scalar_value", "single_shape"]
