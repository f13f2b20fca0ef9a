"""Hypothesis strategies for kernel calls, built from a kernel's argument plan.

A *case* is plain picklable data (so it crosses into a worker process and prints
as a reproducer)::

    {"op": "aten::add.out", "mode": "valid" | "invalid",
     "args":   [(name, spec), ...],          # passed positionally
     "kwargs": [(name, spec), ...],          # passed by keyword
     "outs":   {out_name: out_spec},         # how each out is given
     "out_dtype": "float32",                 # outs of ops torch has no functional for
     "mutation": None | str, "target": None | argument name}

Value specs (``materialize.materialize`` builds them):

- ``("T", shape, dtype, layout, seed, values)``: a tensor; layout ``"c"``
  contiguous, ``("p", perm)`` a dense permutation, ``"cl"`` channels-last, ``"nd"``
  non-dense (every other element), ``"ex"`` expanded (stride 0), ``"np"`` a numpy
  array, ``"np_ro"`` a read-only numpy array, ``"meta"`` on the meta device,
  ``"big"`` a (0, 2**31) tensor (size beyond int32), ``"rank17"`` 17 dims;
  values ``"normal"``, ``"special"`` (nan, inf, 0 mixed in) or ``"index"`` (small
  integers, in and out of range).
- ``("L", [spec, ...])`` a list, ``("V", value)`` a plain Python value,
  ``("OBJ",)`` an ``object()``, ``("HUGE_INTS", n)`` / ``("HUGE_TENSORS", n)`` long
  lists, ``("DICT",)`` a dict.

Out specs: ``("ref",)`` an out of the shape and dtype ATen's result has (prefilled),
``("empty",)`` a 0-element out of that dtype (resized by the call), ``("omit",)``
not passed (etops allocates), and the invalid ones ``("alias", arg)``,
``("nondense",)``, ``("overlap",)``, ``("np_ro",)``, ``("meta",)``,
``("wrong_type", spec)``.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from .case_text import describe  # noqa: F401 - a case's reproducer text, strategies' API too

from ..plan import (
    F_HAS_DEFAULT,
    F_KWONLY,
    F_MUTABLE,
    F_OPTIONAL,
    F_OUT,
    K_BOOL,
    K_BOOL_LIST,
    K_ENUM,
    K_FLOAT,
    K_FLOAT_LIST,
    K_INT,
    K_INT_LIST,
    K_OPT_TENSOR_LIST,
    K_RETURN_SLOT,
    K_SCALAR,
    K_STR,
    K_TENSOR,
    K_TENSOR_LIST,
)

#: dtypes a fuzzed tensor takes, most common first (Hypothesis shrinks toward the first).
DTYPES = ["float32", "int64", "bool", "float64", "int32", "uint8", "int8", "int16", "float16", "bfloat16", "complex64"]
_COMMON = DTYPES[:5]

DIM_NAMES = {"dim", "dim0", "dim1", "dim2", "axis", "dimension"}
INDEX_TENSORS = {"index", "indices", "repeats", "weight_zero_points", "zero_points", "zero_point", "padding_idx"}
BOOL_TENSORS = {"mask", "condition"}
STR_CHOICES = {
    "approximate": ["none", "tanh"],
    "rounding_mode": ["trunc", "floor"],
}

#: Mutations an invalid case applies to one argument (or to the call).
MUTATIONS = [
    "wrong_type",
    "none_required",
    "missing",
    "extra_positional",
    "unknown_kw",
    "dup_kw",
    "rank17",
    "int32_size",
    "big_int",
    "int64_overflow",
    "negative_list",
    "wrong_len",
    "huge_list",
    "meta_device",
    "numpy",
    "nondense_input",
    "bad_str",
    "bad_enum",
    "out_nondense",
    "out_overlap",
    "out_alias",
    "out_np_ro",
    "out_meta",
    "out_wrong_type",
    "special_values",
    "index_out_of_range",
]


def plan_of(kernel):
    """The argument plan entries of a kernel object (schema arguments only)."""
    plan = kernel._info._plan
    return [e for e in plan.args if e.kind != K_RETURN_SLOT]


# ---- building blocks ------------------------------------------------------------


@st.composite
def base_shapes(draw):
    rank = draw(st.integers(0, 4) | st.just(5))
    return tuple(draw(st.lists(st.integers(1, 4) | st.just(0), min_size=rank, max_size=rank)))


@st.composite
def shapes_like(draw, base):
    how = draw(st.sampled_from(["same", "same", "broadcast", "free", "scalar"]))
    if how == "same":
        return base
    if how == "broadcast":
        cut = draw(st.integers(0, len(base)))
        tail = list(base[cut:])
        for i in range(len(tail)):
            if draw(st.booleans()):
                tail[i] = 1
        return tuple(tail)
    if how == "scalar":
        return ()
    rank = draw(st.integers(0, 4))
    return tuple(draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))


@st.composite
def layouts(draw, shape):
    choice = draw(st.sampled_from(["c", "c", "c", "c", "p", "nd", "cl", "np", "ex"]))
    if choice == "p" and len(shape) >= 2:
        perm = tuple(draw(st.permutations(list(range(len(shape))))))
        return ("p", perm)
    if choice == "cl" and len(shape) == 4:
        return "cl"
    if choice in ("nd", "ex") and len(shape) >= 1:
        return choice
    if choice == "np":
        return "np"
    return "c"


@st.composite
def tensors(draw, name, base, case_dtype, shape=None, dtype=None, values=None):
    if shape is None:
        shape = draw(shapes_like(base))
    if dtype is None:
        if name in INDEX_TENSORS:
            dtype = draw(st.sampled_from(["int64", "int64", "int32", case_dtype]))
        elif name in BOOL_TENSORS:
            dtype = draw(st.sampled_from(["bool", "bool", case_dtype]))
        else:
            dtype = draw(st.sampled_from([case_dtype, case_dtype, case_dtype] + DTYPES))
    if values is None:
        values = "index" if name in INDEX_TENSORS else draw(st.sampled_from(["normal"] * 6 + ["special"]))
    layout = draw(layouts(shape))
    seed = draw(st.integers(0, 2**16))
    return ("T", tuple(shape), dtype, layout, seed, values)


def _int_range(name, rank):
    if name in DIM_NAMES:
        return st.integers(-rank - 1, max(rank, 1))
    if name in ("quant_min", "weight_quant_min"):
        return st.sampled_from([-128, 0, -8, -2])
    if name in ("quant_max", "weight_quant_max"):
        return st.sampled_from([127, 255, 7, 1])
    if name in ("normalization", "interpolation_mode", "padding_mode", "compute_mode"):
        return st.integers(0, 3)
    return st.integers(-2, 6)


def _float_values(name):
    if name in ("eps",):
        return st.sampled_from([1e-5, 0.0, 1e-3])
    if name in ("p", "momentum"):
        return st.sampled_from([0.0, 0.5, 1.0, 2.0])
    return st.floats(-3, 3, allow_nan=False) | st.sampled_from([0.0, 1.0, 0.5])


def _scalar_values():
    return st.integers(-5, 5) | st.floats(-3, 3, allow_nan=False) | st.booleans()


@st.composite
def int_lists(draw, name, n, rank, base):
    if name in ("dims", "dim") or name == "dim_order":
        if name == "dim_order" or (name == "dims" and draw(st.booleans())):
            return ("V", list(draw(st.permutations(list(range(rank))))))
        size = n or draw(st.integers(0, min(rank, 3)))
        return ("V", draw(st.lists(st.integers(-rank - 1, max(rank, 1)), min_size=size, max_size=size)))
    if name == "normalized_shape":
        cut = draw(st.integers(0, len(base)))
        return ("V", list(base[cut:]))
    size = n if n else draw(st.integers(0, 4))
    if n and draw(st.integers(0, 9)) == 0:
        return ("V", draw(st.integers(0, 3)))  # int[N] takes one int
    lo = -1 if draw(st.integers(0, 9)) == 0 else 0
    return ("V", draw(st.lists(st.integers(lo, 4), min_size=size, max_size=size)))


@st.composite
def values_for(draw, entry, base, case_dtype, op):
    name, kind, flags, default, extra, n = entry
    rank = len(base)
    if flags & F_OPTIONAL and kind != K_TENSOR and draw(st.integers(0, 3)) == 0:
        return ("V", None)
    if kind == K_TENSOR:
        if flags & F_OPTIONAL and draw(st.integers(0, 3)) == 0:
            return ("V", None)
        return draw(tensors(name, base, case_dtype))
    if kind in (K_TENSOR_LIST, K_OPT_TENSOR_LIST):
        count = draw(st.integers(1, 3) | st.just(0))
        items = []
        for _ in range(count):
            if kind == K_OPT_TENSOR_LIST:
                choice = draw(st.sampled_from(["none", "index", "index", "mask"]))
                if choice == "none":
                    items.append(("V", None))
                elif choice == "mask":
                    items.append(draw(tensors("mask", base, "bool", dtype="bool")))
                else:
                    items.append(draw(tensors("index", base, case_dtype, dtype="int64", values="index")))
            else:
                items.append(draw(tensors(name, base, case_dtype)))
        return ("L", items)
    if kind == K_SCALAR:
        return ("V", draw(_scalar_values()))
    if kind == K_INT:
        return ("V", draw(_int_range(name, rank)))
    if kind == K_FLOAT:
        return ("V", draw(_float_values(name)))
    if kind == K_BOOL:
        return ("V", draw(st.booleans()))
    if kind == K_STR:
        return ("V", draw(st.sampled_from(STR_CHOICES.get(name, ["none"]))))
    if kind == K_INT_LIST:
        return draw(int_lists(name, n, rank, base))
    if kind == K_FLOAT_LIST:
        size = n or 2
        return ("V", draw(st.lists(st.sampled_from([0.5, 1.0, 2.0, 1.5]), min_size=size, max_size=size)))
    if kind == K_BOOL_LIST:
        size = n or 3
        return ("V", draw(st.lists(st.booleans(), min_size=size, max_size=size)))
    if kind == K_ENUM:
        keys = [k for k in extra if not isinstance(k, str)]
        if keys and isinstance(keys[0], torch.dtype):
            keys = [getattr(torch, d) for d in _COMMON + ["uint8", "int8", "float16"]]
        return ("V", draw(st.sampled_from(keys)))
    raise AssertionError(f"{op}: unknown plan kind {kind}")


# ---- whole calls ----------------------------------------------------------------


@st.composite
def valid_calls(draw, kernel):
    """Calls whose every argument has the type its schema asks for (ATen decides
    whether the values make sense)."""
    plan = plan_of(kernel)
    base = draw(base_shapes())
    case_dtype = draw(st.sampled_from(DTYPES))
    args, kwargs, outs = [], [], {}
    positional = True
    by_keyword = draw(st.integers(0, 4)) == 0
    for entry in plan:
        name, kind, flags, default = entry.name, entry.kind, entry.flags, entry.default
        if flags & F_OUT:
            outs[name] = draw(st.sampled_from([("ref",), ("ref",), ("empty",), ("omit",)]))
            continue
        if flags & F_HAS_DEFAULT and draw(st.integers(0, 2)) == 0:
            positional = False  # skipped: what follows goes by keyword
            continue
        value = draw(values_for(entry, base, case_dtype, kernel.name))
        if positional and not (flags & F_KWONLY) and not by_keyword:
            args.append((name, value))
        else:
            kwargs.append((name, value))
    return {
        "op": kernel.name,
        "mode": "valid",
        "args": args,
        "kwargs": kwargs,
        "outs": outs,
        "out_dtype": draw(st.sampled_from(["float32", "int64", "bool"])) if outs else None,
        "mutation": None,
        "target": None,
    }


def _wrong_values(kind):
    common = [("V", "x"), ("OBJ",), ("DICT",), ("V", 1j)]
    if kind == K_TENSOR:
        return common + [("V", 1.5), ("V", [1.0, 2.0]), ("V", 3)]
    if kind in (K_TENSOR_LIST, K_OPT_TENSOR_LIST):
        return common + [("V", 3), ("L", [("V", "x")]), ("L", [("OBJ",)]), ("T", (2,), "float32", "c", 0, "normal")]
    if kind == K_INT:
        return common + [("V", 1.5), ("V", True), ("V", "3"), ("V", [1])]
    if kind == K_FLOAT:
        return common + [("V", [1.0]), ("V", True)]
    if kind == K_BOOL:
        return common + [("V", 1), ("V", "True")]
    if kind == K_STR:
        return [("V", 3), ("OBJ",), ("V", b"none"), ("V", ["none"])]
    if kind == K_SCALAR:
        return common + [("V", [1]), ("T", (2,), "float32", "c", 0, "normal")]
    if kind == K_INT_LIST:
        return common + [("V", [1.5]), ("V", ["a"]), ("V", [True]), ("L", [("OBJ",)]), ("T", (2,), "int64", "c", 0, "normal")]
    if kind == K_FLOAT_LIST:
        return common + [("V", ["a"]), ("V", [1j])]
    if kind == K_BOOL_LIST:
        return common + [("V", [1, 0, 1]), ("V", 1)]
    if kind == K_ENUM:
        return common + [("V", 999), ("V", "float32")]
    return common


def _find(case, name):
    for where in ("args", "kwargs"):
        for i, (n, v) in enumerate(case[where]):
            if n == name:
                return where, i
    return None, None


def _set(case, name, value):
    where, i = _find(case, name)
    if where is None:
        case["kwargs"].append((name, value))
    else:
        case[where][i] = (name, value)


@st.composite
def invalid_calls(draw, kernel):
    """A valid call with one mutation from MUTATIONS (those the schema allows)."""
    case = draw(valid_calls(kernel))
    case["mode"] = "invalid"
    plan = plan_of(kernel)
    entries = {e.name: e for e in plan}
    tensors_args = [e.name for e in plan if e.kind == K_TENSOR and not e.flags & F_OUT]
    lists = [e.name for e in plan if e.kind == K_INT_LIST]
    fixed = [e.name for e in plan if e.kind in (K_INT_LIST, K_FLOAT_LIST, K_BOOL_LIST) and e.fixed_len]
    ints = [e.name for e in plan if e.kind in (K_INT, K_INT_LIST)]
    required = [e.name for e in plan if not e.flags & (F_OPTIONAL | F_HAS_DEFAULT | F_OUT)]
    outs = [e.name for e in plan if e.flags & F_OUT and e.kind == K_TENSOR]
    strs = [e.name for e in plan if e.kind == K_STR]
    enums = [e.name for e in plan if e.kind == K_ENUM]
    tlists = [e.name for e in plan if e.kind in (K_TENSOR_LIST, K_OPT_TENSOR_LIST) and not e.flags & F_OUT]
    non_out = [e.name for e in plan if not e.flags & F_OUT]
    applicable = {
        "wrong_type": non_out,
        "none_required": [n for n in required if entries[n][1] != K_RETURN_SLOT],
        "missing": required,
        "extra_positional": ["<call>"],
        "unknown_kw": ["<call>"],
        "dup_kw": [n for n, _ in case["args"]],
        "rank17": tensors_args,
        "int32_size": tensors_args,
        "big_int": ints,
        "int64_overflow": ints,
        "negative_list": lists,
        "wrong_len": fixed,
        "huge_list": lists + tlists,
        "meta_device": tensors_args,
        "numpy": tensors_args,
        "nondense_input": tensors_args,
        "bad_str": strs,
        "bad_enum": enums,
        "out_nondense": outs,
        "out_overlap": outs,
        "out_alias": outs if tensors_args else [],
        "out_np_ro": outs,
        "out_meta": outs,
        "out_wrong_type": outs,
        "special_values": tensors_args,
        "index_out_of_range": [n for n in tensors_args if n in INDEX_TENSORS] + [n for n in ints if n in DIM_NAMES or n == "index"],
    }
    choices = [m for m in MUTATIONS if applicable[m]]
    mutation = draw(st.sampled_from(choices))
    target = draw(st.sampled_from(applicable[mutation]))
    case["mutation"], case["target"] = mutation, target if target != "<call>" else None
    entry = entries.get(target)

    if mutation == "wrong_type":
        _set(case, target, draw(st.sampled_from(_wrong_values(entry.kind))))
    elif mutation == "none_required":
        _set(case, target, ("V", None))
    elif mutation == "missing":
        for where in ("args", "kwargs"):
            idx = [i for i, (n, _) in enumerate(case[where]) if n == target]
            if idx:
                if where == "args":  # drop it and everything after it from the positionals
                    tail = case["args"][idx[0] + 1 :]
                    case["args"] = case["args"][: idx[0]]
                    case["kwargs"] = tail + case["kwargs"]
                else:
                    del case["kwargs"][idx[0]]
    elif mutation == "extra_positional":
        n_extra = draw(st.integers(1, 3))
        kw = [(n, v) for n, v in case["kwargs"]]
        case["args"] = case["args"] + kw + [("<extra>", ("V", 1))] * (len(plan) + n_extra - len(case["args"]) - len(kw))
        case["kwargs"] = []
        case["outs"] = {k: ("omit",) for k in case["outs"]}
        case["target"] = None
    elif mutation == "unknown_kw":
        case["kwargs"].append(("bogus_argument", ("V", 1)))
        case["target"] = "bogus_argument"
    elif mutation == "dup_kw":
        value = dict(case["args"])[target]
        case["kwargs"].append((target, value))
    elif mutation in ("rank17", "int32_size", "meta_device", "numpy", "nondense_input", "special_values"):
        _, spec = case[_find(case, target)[0]][_find(case, target)[1]] if _find(case, target)[0] else (None, None)
        if spec is None or spec[0] != "T":
            spec = draw(tensors(target, (2, 3), "float32"))
        layout = {"rank17": "rank17", "int32_size": "big", "meta_device": "meta", "numpy": draw(st.sampled_from(["np", "np_ro"])), "nondense_input": draw(st.sampled_from(["nd", "ex"]))}.get(mutation, spec[3])
        values = "special" if mutation == "special_values" else spec[5]
        shape = spec[1] if layout not in ("nd", "ex") or spec[1] else (3,)
        _set(case, target, ("T", shape, spec[2], layout, spec[4], values))
    elif mutation == "big_int":
        big = draw(st.sampled_from([2**31, -(2**31) - 1, 2**40, -(2**62), 2**63 - 1]))
        _set(case, target, ("V", big if entry.kind == K_INT else [big] * (entry.fixed_len or 2)))
    elif mutation == "int64_overflow":
        big = draw(st.sampled_from([2**64, -(2**70)]))
        _set(case, target, ("V", big if entry.kind == K_INT else [1, big]))
    elif mutation == "negative_list":
        size = entry.fixed_len or draw(st.integers(1, 4))
        _set(case, target, ("V", draw(st.lists(st.integers(-5, 3), min_size=size, max_size=size))))
    elif mutation == "wrong_len":
        size = entry.fixed_len + draw(st.sampled_from([1, -1, 2]))
        item = {K_INT_LIST: 1, K_FLOAT_LIST: 1.0, K_BOOL_LIST: True}[entry.kind]
        _set(case, target, ("V", [item] * max(size, 0)))
    elif mutation == "huge_list":
        if entry.kind == K_INT_LIST:
            _set(case, target, ("HUGE_INTS", draw(st.sampled_from([1000, 100_000]))))
        else:
            _set(case, target, ("HUGE_TENSORS", draw(st.sampled_from([100, 2000]))))
    elif mutation == "bad_str":
        _set(case, target, ("V", draw(st.sampled_from(["bogus", "", "none\0x", "Tanh"]))))
    elif mutation == "bad_enum":
        bad = draw(st.sampled_from([torch.uint1, torch.float8_e4m3fn, torch.qint8, torch.channels_last, torch.sparse_coo]))
        _set(case, target, ("V", bad))
    elif mutation == "out_nondense":
        case["outs"][target] = ("nondense",)
    elif mutation == "out_overlap":
        case["outs"][target] = ("overlap",)
    elif mutation == "out_alias":
        case["outs"][target] = ("alias", draw(st.sampled_from(tensors_args)))
    elif mutation == "out_np_ro":
        case["outs"][target] = ("np_ro",)
    elif mutation == "out_meta":
        case["outs"][target] = ("meta",)
    elif mutation == "out_wrong_type":
        case["outs"][target] = ("wrong_type", draw(st.sampled_from([("V", 1.5), ("V", "x"), ("V", [1, 2]), ("OBJ",)])))
    elif mutation == "index_out_of_range":
        if entry.kind == K_TENSOR:
            where, i = _find(case, target)
            spec = case[where][i][1] if where else ("T", (2,), "int64", "c", 0, "index")
            if spec[0] != "T":
                spec = ("T", (2,), "int64", "c", 0, "index")
            _set(case, target, ("T", spec[1] or (2,), spec[2], spec[3], spec[4], draw(st.sampled_from(["oob_high", "oob_low"]))))
        else:
            _set(case, target, ("V", draw(st.sampled_from([64, -64, 2**20]))))
    return case


def calls(kernel, mode: str):
    return valid_calls(kernel) if mode == "valid" else invalid_calls(kernel)
