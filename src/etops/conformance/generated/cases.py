"""Generated cases of one kernel: its arguments derived from its schema and its
entry of the constraint table (etops.ops.generation), the factors combined pairwise
(shape class x dtype combination x scalar class x value class, within a budget),
each row a case whose key names its classes and whose values follow from the key
alone; ATen's meta kernel of the functional overload says whether it is valid (an
invalid case is one the kernel must refuse).

``plan(kernel)`` is the kernel's factors and rows (or why it has none);
``case_of(key)`` rebuilds one case from its key, in any process.

May import: torch, the standard library, the core (etops.registry, etops.errors,
etops.ops.generation), etops.conformance.values and this package's classes and
pairwise modules.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import zlib

import torch

from ...errors import NoGeneratedCases
from ...ops.generation import Generation, generation_of
from . import classes as c
from .pairwise import coverage, covering_rows

#: rows per kernel, at most (the emphasis rows included)
DEFAULT_BUDGET = 160
#: the seed of every plan (a case's values come from its key, which names it)
SEED = 0

_FACTORS = ("shape", "dtype", "scalar", "value")


@dataclasses.dataclass(frozen=True)
class Argument:
    """How a case fills one argument: `role` "tensor", "tensors" (a list),
    "scalar", "dim", "dims", "value" (`value` as it is), "size" (the first tensor's
    shape), "permutation" (of the first tensor's dims), "flag" (False or True),
    "dtype" (None or the first tensor's dtype: always the latter for values that
    overflow, so that the accumulator is the narrow type), "choice" (one of
    `value`), "omit" (left to its default)."""

    name: str
    role: str
    kwarg_only: bool
    value: object = None


@dataclasses.dataclass(frozen=True)
class Case:
    """One generated case: its key, the ATen overload it is judged against, the
    arguments (by the kernel's schema) and whether ATen's meta kernel accepts them
    (`why`: what it said when it does not)."""

    key: str
    func: object
    args: tuple
    kwargs: dict
    valid: bool
    why: str = ""


@dataclasses.dataclass
class Plan:
    """A kernel's generated cases before their values: the factors' levels, the
    rows (one level per factor) and the pairs they cover."""

    kernel: str
    func: object
    arguments: tuple
    family: str
    wrapped_dims: bool
    factors: dict
    rows: list
    covered: int
    required: int

    def keys(self) -> list:
        return [case_key(self.kernel, row) for row in self.rows]

    def rows_of(self, dtype: str) -> list:
        """The rows whose first tensor is of dtype `dtype` (a task's)."""
        return [row for row in self.rows if row[1].split("+", 1)[0] == dtype]

    def dtypes(self) -> list:
        """The dtypes of the first tensor among the rows (one task each), in lattice order."""
        found = {row[1].split("+", 1)[0] for row in self.rows}
        return [d for d in c.LATTICE if d in found]


def case_key(kernel: str, row: tuple) -> str:
    """The key of a case: the kernel, its classes and the seed (``aten::add.out|one-vs-many|float32|2.5|small_int|0``)."""
    return "|".join((kernel, *row, str(SEED)))


def _functional(kernel: str):
    import etops

    info = etops.registry().get_kernel(kernel)._info
    return info, info.functional_overload()


def _arguments(info, gen: Generation) -> tuple:
    fixed, choices = dict(gen.fixed), dict(gen.choices)
    out = []
    for a in info._schema.arguments:
        if a.is_out:
            continue
        kind, text, real = a.type.kind(), str(a.type), str(getattr(a, "real_type", a.type))
        optional = kind == "OptionalType"
        if a.name in fixed:
            role, value = "value", fixed[a.name]
        elif a.name in choices:
            role, value = "choice", tuple(choices[a.name])
        elif real == "Optional[ScalarType]" and a.name == "dtype":
            role, value = "dtype", None
        elif text == "Tensor":
            role, value = "tensor", None
        elif text == "List[Tensor]":
            role, value = "tensors", None
        elif text in ("number", "Optional[number]") or text.startswith("Scalar"):
            role, value = "scalar", None
        elif a.name == "dim" and text in ("int", "Optional[int]"):
            role, value = "dim", None
        elif a.name == "dim" and "List[int]" in text:
            role, value = "dims", None
        elif text == "bool":
            role, value = ("flag", None) if not a.has_default_value() or a.name in ("keepdim", "unbiased", "descending", "upper") \
                else ("omit", None)
        elif a.has_default_value() or optional:
            role, value = "omit", None
        elif text == "List[int]" and a.name in ("size", "shape"):
            role, value = "size", None
        elif text == "List[int]" and a.name in ("dims", "perm"):
            role, value = "permutation", None
        elif text == "int":
            role, value = "value", 1
        elif text == "float":
            role, value = "value", 0.5
        else:
            raise NoGeneratedCases(f"{info.name}: no generated value for argument '{a.name}' ({text})")
        out.append(Argument(a.name, role, a.kwarg_only, value))
    return tuple(out)


def _family(func, arguments, gen: Generation) -> str:
    tensors = sum(a.role == "tensor" for a in arguments)
    if gen.family != "auto":
        return gen.family
    if tensors > 1 and torch.Tag.pointwise in getattr(func, "tags", ()):
        return "broadcast"
    return "shared"


@functools.lru_cache(maxsize=512)
def plan(kernel: str, budget: int = DEFAULT_BUDGET) -> Plan:
    """The generated cases of `kernel` before their values (NoGeneratedCases naming
    why when it has none: not an aten kernel, no functional overload, an argument
    no class describes, an entry's ``skip``)."""
    if not isinstance(kernel, str) or not kernel.startswith("aten::"):
        raise NoGeneratedCases(f"{kernel}: generated cases are made for aten kernels only")
    gen = generation_of(kernel)
    if gen.skip:
        raise NoGeneratedCases(f"{kernel}: {gen.skip}")
    info, func = _functional(kernel)
    if func is None:
        raise NoGeneratedCases(f"{kernel}: torch has no functional overload to judge it against")
    arguments = _arguments(info, gen)
    tensors = sum(a.role in ("tensor", "tensors") for a in arguments)
    if not tensors:
        raise NoGeneratedCases(f"{kernel}: no tensor argument")
    family = _family(func, arguments, gen)
    shapes = {"broadcast": c.SINGLE_SHAPES + c.BROADCAST_SHAPES, "matmul": c.MATMUL_SHAPES}.get(family, c.SINGLE_SHAPES)
    factors = {
        "shape": shapes,
        "dtype": c.dtype_combos(2 if family == "broadcast" else 1, gen.dtypes),
        "scalar": c.SCALAR_CLASSES if any(a.role == "scalar" for a in arguments) else ("none",),
        "value": c.VALUE_CLASSES,
    }
    levels = [factors[f] for f in _FACTORS]
    emphasis = [(shape, d, factors["scalar"][0], v) for v in gen.emphasis for d in factors["dtype"] for shape in _EMPHASIS_SHAPES[family]
                if "+" not in d and _allowed({1: d, 3: v})]
    rows = covering_rows(levels, _allowed, budget, zlib.crc32(kernel.encode()) ^ SEED, first=emphasis)
    covered, required = coverage(levels, _allowed, rows)
    return Plan(kernel, func, arguments, family, gen.wrapped_dims, factors, rows, covered, required)


#: the shape classes of an entry's emphasis rows, by family: several elements along every dim
_EMPHASIS_SHAPES = {"matmul": ("odd", "large"), "broadcast": ("odd", "large"), "reduction": ("large", "odd", "rank3"),
                    "shared": ("large", "odd", "rank3")}


def _allowed(partial: dict) -> bool:
    """Whether a (partial) row's classes go together: a value class applies to the
    first tensor's dtype (subnormals of an integer tensor do not exist)."""
    if 1 in partial and 3 in partial:
        return _applies(partial[1], partial[3])
    return True


@functools.lru_cache(maxsize=None)
def _applies(dtypes: str, value: str) -> bool:
    return c.applies(value, c.combo_dtypes(dtypes)[0])


def case_of(key: str) -> Case:
    """The case of `key` (case_key's form), rebuilt from the key alone."""
    parts = key.split("|")
    if len(parts) != 6:
        raise ValueError(f"case_of: argument 'key' must be 'kernel|shape|dtype|scalar|value|seed', got {key!r}")
    kernel, shape, dtypes, scalar, value, _seed = parts
    p = plan(kernel)
    rng = random.Random(zlib.crc32(key.encode()))
    args, kwargs = _values(p, shape, c.combo_dtypes(dtypes), scalar, value, rng)
    valid, why = _meta_accepts(p.func, args, kwargs)
    return Case(key, p.func, tuple(args), kwargs, valid, why)


def _tensor_shapes(p: Plan, shape: str, count: int, rng: random.Random) -> list:
    if p.family == "matmul":
        m, k, n = c.matmul_sizes(shape, rng)
        batch = (rng.randint(1, 3),) if p.kernel.startswith("aten::bmm") else ()
        pair = [(*batch, m, k), (*batch, k, n)]
        return ([(m, n)] + pair if count == 3 else pair + [(m, n)] * (count - 2))[:count]
    if p.family == "broadcast":
        return c.broadcast_shapes(shape, count, rng)
    return [c.single_shape(shape, rng)] * count


def _values(p: Plan, shape: str, dtypes: tuple, scalar: str, value: str, rng: random.Random):
    count = sum(a.role == "tensor" for a in p.arguments)
    shapes = _tensor_shapes(p, shape, max(count, 1), rng)
    tensors = []
    for i in range(count):
        dtype = dtypes[min(i, len(dtypes) - 1)]
        tensors.append(c.make_values(value, shapes[i], dtype, rng))
    main_shape = shapes[0]
    rank = len(main_shape)
    args, kwargs = [], {}
    taken = iter(tensors)
    for a in p.arguments:
        v: object
        if a.role == "omit":
            continue
        if a.role == "tensor":
            v = next(taken)
        elif a.role == "tensors":
            v = [c.make_values(value, main_shape, dtypes[0], rng) for _ in range(2)]
        elif a.role == "scalar":
            v = c.scalar_value(scalar)
            if v is None:
                continue
        elif a.role == "dim":
            v = rng.randint(0 if p.wrapped_dims else -max(rank, 1), max(rank, 1) - 1)
        elif a.role == "dims":
            v = [rng.randint(0 if p.wrapped_dims else -max(rank, 1), max(rank, 1) - 1)] if rng.random() < 0.75 else None
        elif a.role == "flag":
            v = rng.random() < 0.5
        elif a.role == "size":
            v = list(main_shape)
        elif a.role == "permutation":
            v = list(reversed(range(rank)))
        elif a.role == "dtype":
            v = dtypes[0] if value == "overflow" or rng.random() < 0.5 else None
        elif a.role == "choice":
            v = rng.choice(a.value)
        else:
            v = a.value
        if a.kwarg_only:
            kwargs[a.name] = v
        else:
            args.append(v)
    return args, kwargs


def _meta_accepts(func, args, kwargs) -> tuple:
    """(whether ATen's meta kernel accepts the call, what it said when not); a
    kernel with no meta implementation counts as accepting (ATen's CPU kernel
    judges then)."""
    from ..values import on_meta

    try:
        func(*on_meta(list(args)), **{k: on_meta(v) for k, v in kwargs.items()})
    except NotImplementedError:
        return True, ""
    except Exception as exc:  # noqa: BLE001 - ATen refuses: an invalid case
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return False, f"ATen refuses it: {first[:200]}"
    return True, ""


def coverage_of(kernel: str, budget: int = DEFAULT_BUDGET) -> dict:
    """The pairwise coverage `kernel`'s generated cases achieve: rows, pairs
    covered and required, and the levels of each factor."""
    p = plan(kernel, budget)
    return {"kernel": kernel, "cases": len(p.rows), "pairs_covered": p.covered, "pairs_required": p.required,
            "fraction": p.covered / p.required if p.required else 1.0, "family": p.family,
            "levels": {f: len(v) for f, v in p.factors.items()}}


def coverage_summary(kernels, budget: int = DEFAULT_BUDGET) -> dict:
    """The pairwise coverage of the generated cases of `kernels` together: kernels
    with cases and without (each with why), cases, pairs covered and required, and
    the kernel covering the smallest share of its pairs."""
    rows, without = [], {}
    for kernel in kernels:
        try:
            rows.append(coverage_of(kernel, budget))
        except NoGeneratedCases as exc:
            without[kernel] = str(exc)
    covered, required = sum(r["pairs_covered"] for r in rows), sum(r["pairs_required"] for r in rows)
    lowest = min(rows, key=lambda r: r["fraction"], default=None)
    return {"kernels": len(rows), "cases": sum(r["cases"] for r in rows), "pairs_covered": covered, "pairs_required": required,
            "fraction": covered / required if required else 1.0,
            "lowest": None if lowest is None else {"kernel": lowest["kernel"], "fraction": lowest["fraction"]},
            "without": without}


def coverage_line(summary: dict) -> str:
    """coverage_summary in one line of words."""
    low = summary["lowest"]
    lowest = f"; lowest {low['kernel']} {100 * low['fraction']:.0f}%" if low else ""
    return (f"generated cases: {summary['cases']} over {summary['kernels']} kernels, pairwise coverage "
            f"{100 * summary['fraction']:.0f}% ({summary['pairs_covered']} of {summary['pairs_required']} pairs of shape class, "
            f"dtype, scalar class and value class{lowest}); {len(summary['without'])} kernels without")


__all__ = ["DEFAULT_BUDGET", "coverage_line", "coverage_summary", "SEED", "Argument", "Case", "NoGeneratedCases", "Plan", "case_key", "case_of", "coverage_of", "plan"]
