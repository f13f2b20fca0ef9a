"""The adversarial classes: deterministic mutations of one call a kernel
accepts, each a class of input that has killed kernels, generated for every
argument of every kernel it applies to.

``class_cases(kernel, base)`` turns a valid case (``strategies``' data) into the
list of class cases; each has ``mode`` ``"invalid"``, ``mutation`` the class and
``target`` the argument (None for a whole-call class). The classes:

- ``int_extreme``: INT64_MIN, INT64_MAX, -1 and 0 into one int, Scalar or int-list
  argument;
- ``int_tensor_extremes``: one tensor argument in an integer dtype holding its
  dtype's minimum, maximum, -1 and 0;
- ``int_div_trap``: every tensor argument in int64 (then int32), the first integer
  argument (tensor or Scalar) at its dtype's minimum and every other one -1, so that
  INT_MIN / -1 happens (floor_divide, remainder, div with each rounding mode, fmod,
  executorch_prim's int ops), once for each choice of a string argument;
- ``zero_size``: one tensor argument with one dim (each in turn, spatial ones
  included) of size 0; then that dim at 0 in every tensor of the first one's shape;
- ``out_wrong_dtype``: one out in another dtype than ATen's result (a wider float,
  another kind); the other outs right;
- ``out_too_small``: one out smaller than ATen's result (one element of the same
  rank, or the last dim halved);
- ``out_partial_overlap``: one out sharing memory with one input, one element in;
- ``outs_overlap``: a second out sharing memory with the first, one element in;
- ``size_overflow``: int lists whose product overflows int64 (sizes, repeats,
  output sizes), and index-like tensors (repeats, indices) holding 2**40.

The out specs they add (``worker`` builds them with ``make_out``):
``("dtype", name)``, ``("small", "one" | "half")``, ``("shifted", input)`` and
``("shifted_out", out)``. ``snippet`` prints the call about to be made as a
Python reproducer.

Part of etops.fuzz: imports the core only (and torch).
"""

from __future__ import annotations

import math

import torch

from ..plan import (
    F_HAS_DEFAULT,
    F_OPTIONAL,
    F_OUT,
    K_BOOL,
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

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: the values int_extreme puts into an int or Scalar argument
INT_EXTREMES = (INT64_MIN, INT64_MAX, -1, 0)

CLASSES = ("int_extreme", "int_tensor_extremes", "int_div_trap", "zero_size", "out_wrong_dtype", "out_too_small",
           "out_partial_overlap", "outs_overlap", "size_overflow")
#: classes whose call may be valid: a result ATen accepts is compared with ATen's
VALUE_CLASSES = ("int_extreme", "int_tensor_extremes", "int_div_trap", "zero_size", "size_overflow")
#: classes whose reference runs ATen on the meta device (shapes and dtypes only)
META_CLASSES = ("int_extreme", "int_tensor_extremes", "int_div_trap")
#: classes whose out shares memory with an input or another out
OVERLAP_CLASSES = ("out_partial_overlap", "outs_overlap")
#: the out specs the classes add (make_out builds them)
OUT_SPECS = ("dtype", "small", "shifted", "shifted_out")
#: the string arguments a trap is repeated for, with their choices
STR_CHOICES = {"rounding_mode": [None, "trunc", "floor"]}
#: tensors whose values size the result (or index it): size_overflow fills them with 2**40
SIZING_TENSORS = {"repeats", "index", "indices", "sizes", "size", "lengths", "offsets"}
_INT_DTYPES = {"int64", "int32", "int16", "int8", "uint8"}


def _plan(kernel):
    return [e for e in kernel._info._plan.args if e.kind != K_RETURN_SLOT]


def _derived(base: dict, mutation: str, target, **changes) -> dict:
    case = {**base, "mode": "invalid", "mutation": mutation, "target": target,
            "args": list(base["args"]), "kwargs": list(base["kwargs"]), "outs": dict(base["outs"])}
    case.update(changes)
    return case


def _with(case: dict, name: str, value) -> dict:
    """`case` with argument `name` set to `value` (appended by keyword when absent)."""
    for where in ("args", "kwargs"):
        for i, (n, _v) in enumerate(case[where]):
            if n == name:
                case[where][i] = (name, value)
                return case
    case["kwargs"].append((name, value))
    return case


def _given(base: dict) -> dict:
    return dict(base["args"] + base["kwargs"])


def _retyped(spec, dtype: str, values: str | None = None):
    """A tensor spec in `dtype` (contiguous layouts kept), with `values` if given."""
    return ("T", spec[1], dtype, spec[3], spec[4], values or spec[5])


def _tensor_specs(plan, given):
    """(name, spec) of every tensor argument the base case passes (a list's first tensor)."""
    out = []
    for e in plan:
        if e.flags & F_OUT:
            continue
        spec = given.get(e.name)
        if spec is None:
            continue
        if e.kind == K_TENSOR and spec[0] == "T":
            out.append((e.name, spec))
        elif e.kind in (K_TENSOR_LIST, K_OPT_TENSOR_LIST) and spec[0] == "L":
            out.extend((f"{e.name}[{i}]", s) for i, s in enumerate(spec[1]) if s[0] == "T")
    return out


def _set_tensor(case: dict, label: str, spec) -> dict:
    """`case` with the tensor `label` (``name`` or ``name[i]`` of a list) set to `spec`."""
    if "[" not in label:
        return _with(case, label, spec)
    name, index = label[:-1].split("[")
    current = _given(case)[name]
    items = list(current[1])
    items[int(index)] = spec
    return _with(case, name, ("L", items, *current[2:]))


def _int_traps(kernel, base, plan, given, tensors):
    """INT_MIN / -1 in every integer dtype the kernel may divide in, for each string choice."""
    cases = []
    strs = [e.name for e in plan if e.kind == K_STR and e.name in STR_CHOICES]
    choices = [(None, None)] + [(name, c) for name in strs for c in STR_CHOICES[name]]
    scalars = [e.name for e in plan if e.kind in (K_SCALAR, K_INT) and not e.flags & F_OUT]
    order = [e.name for e in plan if not e.flags & F_OUT]
    for dtype, low in (("int64", INT64_MIN), ("int32", -(2**31))):
        for str_name, choice in choices:
            case = _derived(base, "int_div_trap", None, out_dtype=dtype)
            first = True
            for name in order:
                if name in scalars or any(label.split("[")[0] == name for label, _ in tensors):
                    for label, spec in [(lab, s) for lab, s in tensors if lab.split("[")[0] == name] or [(name, None)]:
                        if spec is not None:
                            _set_tensor(case, label, _retyped(spec, dtype, "int_min" if first else "minus_one"))
                        else:
                            _with(case, name, ("V", low if first else -1))
                        first = False
            if first:
                return []  # nothing integer to divide
            if str_name is not None:
                _with(case, str_name, ("V", choice))
            case["outs"] = {k: ("ref",) if v[0] != "omit" else v for k, v in case["outs"].items()}
            cases.append(case)
    return cases


def class_cases(kernel, base: dict) -> list:
    """Every class case of `kernel` derived from `base` (a valid case the kernel
    accepts, ideally): pure data, deterministic."""
    plan = _plan(kernel)
    given = _given(base)
    tensors = _tensor_specs(plan, given)
    cases = []
    for e in plan:
        if e.flags & F_OUT:
            continue
        if e.kind in (K_INT, K_SCALAR):
            cases += [_with(_derived(base, "int_extreme", e.name), e.name, ("V", v)) for v in INT_EXTREMES]
        elif e.kind == K_INT_LIST:
            current = given.get(e.name, ("V", None))
            length = e.fixed_len or (max(len(current[1]), 1) if current[0] == "V" and isinstance(current[1], list) else 2)
            cases += [_with(_derived(base, "int_extreme", e.name), e.name, ("V", [v] * length)) for v in INT_EXTREMES]
            big = max(length, 2) if not e.fixed_len else e.fixed_len
            for values in ([2**32] * big, [INT64_MAX] + [2] * (big - 1)):
                cases.append(_with(_derived(base, "size_overflow", e.name), e.name, ("V", values)))
    for label, spec in tensors:
        dtype = spec[2] if spec[2] in _INT_DTYPES else "int64"
        cases.append(_set_tensor(_derived(base, "int_tensor_extremes", label), label, _retyped(spec, dtype, "extremes")))
        if label.split("[")[0] in SIZING_TENSORS:
            cases.append(_set_tensor(_derived(base, "size_overflow", label), label, _retyped(spec, "int64", "huge")))
        for d in range(len(spec[1])):
            if spec[1][d] != 0:
                shape = tuple(0 if i == d else s for i, s in enumerate(spec[1]))
                cases.append(_set_tensor(_derived(base, "zero_size", f"{label}:dim{d}"), label,
                                         ("T", shape, spec[2], spec[3], spec[4], spec[5])))
    first_shape = tensors[0][1][1] if tensors else ()
    same = [(label, spec) for label, spec in tensors if spec[1] == first_shape]
    if len(same) > 1:  # the same dim at 0 in every tensor of the first one's shape (they still broadcast)
        for d in range(len(first_shape)):
            if first_shape[d] != 0:
                case = _derived(base, "zero_size", f"*:dim{d}")
                for label, spec in same:
                    shape = tuple(0 if i == d else s for i, s in enumerate(spec[1]))
                    _set_tensor(case, label, ("T", shape, spec[2], spec[3], spec[4], spec[5]))
                cases.append(case)
    cases += _int_traps(kernel, base, plan, given, tensors)
    outs = [e.name for e in plan if e.flags & F_OUT and e.kind == K_TENSOR]
    for name in outs:
        right = {k: ("ref",) for k in outs}
        for dtype in ("float64", "int64", "float32"):
            cases.append(_derived(base, "out_wrong_dtype", name, outs={**right, name: ("dtype", dtype)}))
        for how in ("one", "half"):
            cases.append(_derived(base, "out_too_small", name, outs={**right, name: ("small", how)}))
        for label, _spec in tensors:
            if "[" not in label:
                cases.append(_derived(base, "out_partial_overlap", name, outs={**right, name: ("shifted", label)}))
    for first, second in zip(outs, outs[1:]):
        right = {k: ("ref",) for k in outs}
        cases.append(_derived(base, "outs_overlap", second, outs={**right, second: ("shifted_out", first)}))
    for case in cases:
        case.pop("guard", None)
    return cases


# ---- a canonical seed ------------------------------------------------------------------

#: int-list arguments of spatial kernels and their canonical value per spatial dim
_SPATIAL_LISTS = {"kernel_size": 2, "stride": 1, "padding": 0, "dilation": 1, "output_size": 3, "output_padding": 0}


def _spatial_dims(kernel, plan) -> int:
    for e in plan:
        if e.kind == K_INT_LIST and e.name in _SPATIAL_LISTS and e.fixed_len:
            return e.fixed_len
    for n in (1, 2, 3):
        if f"{n}d" in kernel._info.op:
            return n
    if any(e.name in ("kernel_size", "dilation", "output_padding") for e in plan):
        return 2
    return 0


def canonical_case(kernel, dtype: str = "float32") -> dict:
    """A call of `kernel` built from its argument names the way a model makes it
    (an NCHW-like input of 2 channels with a 5-wide spatial dim per kernel_size,
    stride ... entry, a conv weight, per-channel weight, bias and running stats,
    dims 0, sizes 1, Scalars 1, outs of ATen's result; data tensors in `dtype`): the
    seed its classes start from when no random call gets through (conv, pooling,
    upsampling, norms)."""
    plan = _plan(kernel)
    n = _spatial_dims(kernel, plan)
    main_shape = (1, 2) + (5,) * n if n else (2, 3)
    kwargs, outs = [], {}
    has_output_size = any(e.name == "output_size" for e in plan)
    for e in plan:
        name = e.name
        value: tuple
        if e.flags & F_OUT:
            outs[name] = ("ref",)
            continue
        if e.kind == K_TENSOR:
            if name == "weight" and n:
                value = ("T", (2, 2) + (2,) * n, "float32", "c", 1, "normal")
            elif name in ("weight", "bias", "running_mean", "running_var", "scale", "scales", "zero_point", "zero_points"):
                dtype = "int64" if "zero" in name else "float32"
                value = ("T", (main_shape[1],) if n else (main_shape[-1],), dtype, "c", 2, "normal" if dtype == "float32" else "index")
                if name == "running_var" or "scale" in name:
                    value = ("T", value[1], "float32", "c", 2, "positive")
            elif name in ("index", "indices"):
                value = ("T", (2,), "int64", "c", 3, "index")
            elif name in ("mask", "condition"):
                value = ("T", main_shape, "bool", "c", 4, "normal")
            else:
                value = ("T", main_shape, dtype, "c", 5, "normal")
        elif e.kind in (K_TENSOR_LIST, K_OPT_TENSOR_LIST):
            value = ("L", [("T", main_shape, dtype, "c", 6, "normal")] * 2) if e.kind == K_TENSOR_LIST else \
                ("L", [("T", (2,), "int64", "c", 3, "index")])
        elif e.flags & F_HAS_DEFAULT:
            continue
        elif e.kind == K_INT_LIST:
            if name in _SPATIAL_LISTS:
                value = ("V", [_SPATIAL_LISTS[name]] * max(n, 1))
            elif name in ("size", "sizes", "shape"):
                value = ("V", list(main_shape))
            elif name in ("dim", "dims"):
                value = ("V", [0])
            else:
                value = ("V", [1] * (e.fixed_len or 1))
        elif e.kind == K_FLOAT_LIST:
            value = ("V", None if has_output_size else [2.0] * max(n, 1))
        elif e.kind == K_INT:
            value = ("V", 0 if name in ("dim", "dim0", "axis") else 1)
        elif e.kind == K_SCALAR:
            value = ("V", 1)
        elif e.kind == K_FLOAT:
            value = ("V", 1e-5 if name == "eps" else 0.5)
        elif e.kind == K_BOOL:
            value = ("V", False)
        elif e.kind == K_STR:
            value = ("V", "none")
        elif e.kind == K_ENUM:
            keys = [k for k in e.extra if not isinstance(k, str)]
            value = ("V", torch.float32 if keys and isinstance(keys[0], torch.dtype) else (keys[0] if keys else None))
        else:
            value = ("V", None)
        if e.flags & F_OPTIONAL and e.kind != K_TENSOR and value[1] is None:
            value = ("V", None)
        kwargs.append((name, value))
    return {"op": kernel.name, "mode": "valid", "args": [], "kwargs": kwargs, "outs": outs, "out_dtype": dtype,
            "mutation": None, "target": None}


# ---- materializing the class outs (in the worker) ------------------------------------


def _values(dtype: torch.dtype, n: int, kind: str) -> torch.Tensor:
    if kind == "huge":
        return torch.full((n,), 2**40, dtype=torch.int64).to(dtype)
    if kind == "positive":
        return (torch.arange(n, dtype=torch.float64) % 3 + 0.5).to(dtype)
    integer = not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)
    info = torch.iinfo(dtype if integer else torch.int64)  # a float or bool gets int64's, converted
    minus_one = -1 if info.min < 0 else info.max
    cycle = {"int_min": [info.min], "int_max": [info.max], "minus_one": [minus_one], "zero": [0],
             "extremes": [info.min, info.max, minus_one, 0]}[kind]
    return torch.tensor([cycle[i % len(cycle)] for i in range(n)], dtype=torch.int64).to(dtype)


#: value kinds of a tensor spec this module adds (materialize._values delegates them here)
VALUE_KINDS = ("int_min", "int_max", "minus_one", "zero", "extremes", "huge", "positive")


def values(shape, dtype: torch.dtype, kind: str) -> torch.Tensor:
    """A tensor of `shape` and `dtype` holding the class values `kind`."""
    return _values(dtype, math.prod(shape), kind).reshape(shape)


def _shape_dtype(want, case):
    if isinstance(want, torch.Tensor):
        return tuple(want.shape), want.dtype
    return (3,), getattr(torch, case.get("out_dtype") or "float32")


def _filled(shape, dtype):
    t = torch.empty(shape, dtype=dtype)
    t.fill_(True if dtype == torch.bool else 7)
    return t


def _sharing(first: torch.Tensor, shape, dtype, fill_first=True):
    """`first`'s values moved into a fresh buffer, and a tensor of `shape` and
    `dtype` starting one of its elements into that buffer: (first's copy, the view)."""
    size = max(first.numel() * first.element_size(), (math.prod(shape) + 1) * dtype.itemsize) + 16
    storage = torch.zeros(size, dtype=torch.uint8).untyped_storage()
    moved = torch.empty(0, dtype=first.dtype).set_(storage, 0, tuple(first.shape), _strides(tuple(first.shape)))
    if fill_first:
        moved.copy_(first)
    view = torch.empty(0, dtype=dtype).set_(storage, 1, tuple(shape), _strides(tuple(shape)))
    return moved, view


def _strides(shape: tuple) -> list:
    """The contiguous strides of `shape`."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return strides[::-1]


def make_out(spec, want, case, args_by_name, outs_so_far):
    """The out `spec` asks for (a class out spec), or None when it does not apply
    (no tensor to overlap; the caller falls back to an out of ATen's shape). A
    ``shifted`` out replaces its input in `args_by_name` with the copy it overlaps."""
    shape, dtype = _shape_dtype(want, case)
    tag = spec[0]
    if tag == "dtype":
        return _filled(shape, getattr(torch, spec[1]))
    if tag == "small":
        if math.prod(shape) <= 1 or not shape:
            return None
        small = (1,) * len(shape) if spec[1] == "one" else shape[:-1] + (max(shape[-1] // 2, 1),) if shape[-1] > 1 else (1,) * len(shape)
        return _filled(small, dtype)
    if tag == "shifted":
        x = args_by_name.get(spec[1])
        if not isinstance(x, torch.Tensor) or x.numel() == 0 or math.prod(shape) == 0 or x.device.type != "cpu":
            return None
        moved, view = _sharing(x, shape, dtype)
        args_by_name[spec[1]] = moved
        return view
    if tag == "shifted_out":
        first = outs_so_far.get(spec[1])
        if not isinstance(first, torch.Tensor) or first.numel() == 0 or math.prod(shape) == 0:
            return None
        moved, view = _sharing(first, shape, dtype)
        outs_so_far[spec[1]] = moved
        return view
    raise ValueError(f"unknown class out spec {spec!r}")


# ---- reproducers ----------------------------------------------------------------------


def _tensor_code(t: torch.Tensor) -> str:
    dtype = str(t.dtype)
    if t.device.type != "cpu":
        return f"torch.empty({list(t.shape)}, dtype={dtype}, device={t.device.type!r})"
    if t.numel() == 0:
        return f"torch.empty({list(t.shape)}, dtype={dtype})"
    if t.numel() <= 64:
        code = f"torch.tensor({t.tolist()!r}, dtype={dtype})"
    else:
        code = f"torch.arange({t.numel()}).reshape({list(t.shape)}).to({dtype})  # values differ from the fuzzer's"
    dense = t.is_contiguous() and t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.numel() * t.element_size()
    if not dense:
        if 0 in t.stride():
            return f"{code}.contiguous()  # expanded (stride {list(t.stride())}) in the fuzzed call"
        return f"torch.empty_strided({list(t.shape)}, {list(t.stride())}, dtype={dtype}).copy_({code})"
    return code


def snippet(op: str, args, kwargs, program: bool = True) -> str:
    """A Python reproducer of the call `op(*args, **kwargs)` about to be made
    (tensors written out by value when small; tensors sharing memory as views of
    one buffer, the first one's values copied in)."""
    flat: list = []

    def collect(value):
        if isinstance(value, torch.Tensor) and value.device.type == "cpu":
            flat.append(value)
        elif isinstance(value, (list, tuple)):
            for v in value:
                collect(v)

    for value in list(args) + list(kwargs.values()):
        collect(value)
    groups: dict = {}
    for t in flat:
        groups.setdefault(t.untyped_storage().data_ptr(), []).append(t)
    pre: list[str] = []
    names: dict = {}
    for key, members in groups.items():
        if len({id(m) for m in members}) < 2 or key == 0:
            continue
        buf = f"buf{len(pre)}"
        pre.append(f"{buf} = torch.zeros({members[0].untyped_storage().nbytes()}, dtype=torch.uint8).untyped_storage()")
        for j, m in enumerate(members):
            if id(m) in names:
                continue
            names[id(m)] = f"{buf}_{j}"
            pre.append(f"{buf}_{j} = torch.empty(0, dtype={m.dtype}).set_({buf}, {m.storage_offset()}, {list(m.shape)}, {list(m.stride())})")
        first = members[0]
        if first.numel():
            pre.append(f"{names[id(first)]}.copy_({_tensor_code(first.contiguous())})")

    def code(value):
        if isinstance(value, torch.Tensor):
            return names.get(id(value)) or _tensor_code(value)
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(code(v) for v in value) + "]"
        if hasattr(value, "__array__") and not isinstance(value, (int, float)):
            return f"np.asarray({value.tolist()!r})"
        if isinstance(value, torch.dtype):
            return str(value)
        return repr(value)

    parts = [code(a) for a in args] + [f"{k}={code(v)}" for k, v in kwargs.items()]
    call = f"etops.as_program(etops.registry().get_kernel({op!r}))" if program else f"etops.registry().get_kernel({op!r})"
    return "\n".join(["import torch, etops", "import numpy as np", *pre, f"{call}({', '.join(parts)})"])
