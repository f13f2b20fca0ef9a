"""Out shapes: what the outs of a call must be, before the kernel runs.

torch's meta kernel of the op's functional counterpart gives every out's shape,
dtype and strides (cached per argument signature); operators whose out shape
depends on the data get an upper bound the kernel shrinks the out to (ExecuTorch
never grows a tensor). Used by the slow path (allocation, resize) and by
``etops.edge`` (outs of edge ops). Core module: imports torch and the core only,
never etops.ops: the operator's record in the rules table comes with the kernel's info.
"""

from __future__ import annotations

import torch
from typing import Any

from .errors import SchemaError
from .signature_cache import SignatureCache, asked, signature
from .layouts import is_dense, strides_for
from . import _logs
from .meta_safety import runs_on_meta
from .tensors import as_torch, from_dlpack, to_meta
from .torch_checks import Refused, refusal_error, refused_error


def specs_of_result(result, out_names) -> dict:
    """out name -> (shape, dtype, stride), a list of those for a tensor-list out, or
    None where torch's functional returned None, from what the functional returned."""
    results = [result] if len(out_names) == 1 else list(result)
    specs: dict[str, Any] = {}
    for name, value in zip(out_names, results):
        if value is None:
            specs[name] = None
        elif isinstance(value, (list, tuple)):
            specs[name] = [(tuple(v.shape), v.dtype, tuple(v.stride())) for v in value]
        else:
            specs[name] = (tuple(value.shape), value.dtype, tuple(value.stride()))
    return specs


# ---- data-dependent output shapes --------------------------------------------------


def sizing_of(info):
    """What sizes the outs of `info`'s operator (a KernelInfo; any object with the
    operator's policy entry as ``entry``): its entry's sizing part, read for
    ``upper_bound`` and ``sized_from_data``. The one place this module reads it."""
    return info.entry.sizing


def is_data_dependent(info) -> bool:
    """Whether the out shapes of `info`'s operator depend on the input values: its
    record in the rules table has an upper bound (the kernel shrinks its outs to
    the real size) or says the outs are sized from the data. Never cached by
    signature."""
    sizing = sizing_of(info)
    return sizing.upper_bound is not None or sizing.sized_from_data


def _fake_says_data_dependent(functional, positional, keywords) -> bool:
    """Whether torch's fake kernel of `functional` refuses these (meta) arguments
    because the out shapes depend on the data (and not for an argument error)."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode

    mode = FakeTensorMode()

    def fake(v):
        if isinstance(v, torch.Tensor):
            return mode.from_tensor(torch.empty_strided(v.shape, v.stride(), dtype=v.dtype))
        if isinstance(v, (list, tuple)):
            return type(v)(fake(x) for x in v)
        return v

    try:
        with mode:
            functional(*[fake(v) for v in positional], **{k: fake(v) for k, v in keywords.items()})
    except (DynamicOutputShapeException, DataDependentOutputException):
        return True
    except Exception:  # noqa: BLE001 - an argument error: not data-dependent
        return False
    return False


# ---- the cache ----------------------------------------------------------------------


#: torch's out specs per (operator name, schema: a schema registered again
#: differently gets its own entries) and argument signature, or torch_checks.Refused
#: when its meta kernel refused the signature
OUT_SHAPES = SignatureCache("out shapes", 1 << 15)


def _operator_key(info) -> tuple:
    """(name, schema) of `info`'s operator, found once per KernelInfo."""
    key = info.__dict__.get("_operator_key")
    if key is None:
        key = info.__dict__["_operator_key"] = (info.name, str(getattr(info, "_schema", None)))
    return key


def infer_outs(info, bound: dict) -> dict:
    """out name -> (shape, dtype, stride or None) or list of those for tensor-list
    outs, from torch's meta kernels (cached per operator and argument signature);
    data-dependent ops get an upper bound. None for an out torch's functional does not compute (it
    returns None for it: convolution_backward's output_mask), which the kernel
    leaves alone too."""
    if is_data_dependent(info):
        return _infer_outs_uncached(info, bound)
    outs = set(info.out_names())
    try:
        key = (_operator_key(info), tuple(signature(v) for n, v in bound.items() if n not in outs))
    except TypeError:
        return _infer_outs_uncached(info, bound)
    found = OUT_SHAPES.get(key)
    if isinstance(found, Refused):  # torch refused this signature before: the same refusal, not asked again
        raise refused_error(info.name, found.exception(), bound, info.out_names())
    if found is None:
        try:
            found = _infer_outs_uncached(info, bound)
        except (TypeError, ValueError) as exc:
            refused = getattr(exc, "torch_refused", None)
            if isinstance(refused, Refused):
                OUT_SHAPES.put(key, refused)
            raise
        OUT_SHAPES.put(key, found)
    return found


def _infer_outs_uncached(info, bound: dict) -> dict:
    """infer_outs without the cache. torch's implementation may run ExecuTorch
    code (a library's ATen wrapper of a kernel): what it logs is its own."""
    try:
        return _infer_outs_with_torch(info, bound)
    finally:
        asked()
        _logs.drain_as(f"torch's functional counterpart of {info.name} (sizing its outs)")


def _infer_outs_with_torch(info, bound: dict) -> dict:
    sizing = sizing_of(info)
    upper_bound = sizing.upper_bound
    if upper_bound is not None:
        return {n: (tuple(s), d, None) for n, (s, d) in upper_bound(bound).items()}
    functional = info.functional_overload()
    if functional is None:
        raise SchemaError(f"{info.name}: etops cannot infer the out shapes (torch has no functional variant); pass the outs")
    if not runs_on_meta(functional):
        raise SchemaError(f"{info.name}: etops cannot infer the out shapes (torch's {functional} has no meta kernel, and its "
                          "native kernel would read the meta tensors' absent data); pass the outs")
    inputs = {n: to_meta(v) for n, v in bound.items() if n not in info.out_names()}
    positional, keywords = functional_arguments(functional, inputs)
    try:
        result = functional(*positional, **keywords)
    except Exception as meta_exc:  # noqa: BLE001
        if not (sizing.sized_from_data and _fake_says_data_dependent(functional, positional, keywords)):
            if isinstance(meta_exc, NotImplementedError):
                raise SchemaError(f"{info.name}: etops cannot infer the out shapes (torch's meta kernel says: {meta_exc}); pass the outs") from meta_exc
            raise refused_error(info.name, meta_exc, bound, info.out_names()) from meta_exc
        # The out shapes depend on the values, and the arguments are valid: ATen sizes them.
        real = {n: as_torch(v) for n, v in bound.items() if n not in info.out_names()}
        try:
            real_positional, real_keywords = functional_arguments(functional, real)
            result = functional(*real_positional, **real_keywords)
        except Exception as exc:  # noqa: BLE001 - torch's checks refused the arguments
            raise refusal_error(info.name, exc, bound, info.out_names()) from meta_exc
    return specs_of_result(result, info.out_names())


def functional_arguments(functional, values: dict):
    """(positional, keywords) of a call of torch's `functional` (KernelInfo's
    functional_overload) with an out variant's non-out arguments `values`; the
    functional's options the out variant lacks (dtype, layout, ...) stay unset."""
    schema = functional._schema.arguments
    positional = [values[a.name] for a in schema if not a.kwarg_only]
    keywords = {a.name: values[a.name] for a in schema if a.kwarg_only and a.name in values}
    return positional, keywords


def outs_as_result(info, outs: dict):
    """What a call of a kernel whose schema returns nothing gives back when etops
    allocated its outs: the one out, or a tuple of them in schema order."""
    values = [outs[n] for n in info.out_names()]
    return values[0] if len(values) == 1 else tuple(values)


def allocated_strides(shape, stride) -> tuple:
    """The strides etops allocates an out of torch's `shape` and `stride` with:
    torch's when they are dense (channels-last stays channels-last), else
    contiguous ones: torch's meta may propagate an expanded input's strides, and an
    out must not overlap."""
    if stride is not None and is_dense(shape, stride):
        return tuple(stride)
    return strides_for(shape)


#: what a poisoned out's bytes hold, in integer dtypes (a value no sample makes on purpose)
POISON_BYTE = 0xA5


def poisoned(out):
    """`out` (a tensor, or a list of them) filled in place, and returned, with values a
    kernel that writes every element of its out replaces: NaN in floating and
    complex dtypes, POISON_BYTE in every byte of an integer, True in bool. An element
    the kernel leaves unwritten then reads the same, wrong, on every run; a fresh
    allocation holds whatever the memory held last, at times the very values
    expected."""
    if isinstance(out, (list, tuple)):
        for t in out:
            poisoned(t)
        return out
    if not isinstance(out, torch.Tensor) or out.numel() == 0:
        return out
    if out.dtype.is_floating_point or out.dtype.is_complex:
        out.fill_(float("nan"))
    elif out.dtype == torch.bool:
        out.fill_(True)
    else:
        size = out.element_size()
        signed = out.dtype not in (torch.uint8, torch.uint16, torch.uint32, torch.uint64)
        out.fill_(int.from_bytes(bytes([POISON_BYTE]) * size, "little", signed=signed))
    return out


def allocate(spec):
    """A fresh out for one spec of infer_outs (an empty tensor for None: an out the
    kernel will not write still needs a tensor), laid out by allocated_strides."""
    if spec is None:
        return torch.empty(0)
    if isinstance(spec, list):
        return [allocate(s) for s in spec]
    shape, dtype, stride = spec
    return torch.empty_strided(shape, allocated_strides(shape, stride), dtype=dtype)
