"""torch's own checks of a call, before an ExecuTorch kernel sees it.

ExecuTorch's kernels trust their caller: given a float out for a complex result
they write past its end. A call of an aten:: kernel is therefore first run through
torch's meta kernel of the same out variant, with meta copies of the given outs:
whatever torch refuses (dtype promotion and castability, broadcasting, ranks, dims
out of range) raises here and never reaches the kernel. The C call path asks once
per argument signature (dtypes, ranks, sizes, int values), so calls that repeat a
signature pay nothing; torch's answer per signature, accepted or refused, is kept
(``checked_with_torch``, TORCH_ACCEPTED; a refusal as a ``Refused``: a meta kernel sees
no tensor values, only what the signature holds, so the same signature is refused in
the same words). Core module: imports torch and the core only.
"""

from __future__ import annotations

import re
import threading
import warnings
from dataclasses import dataclass
from typing import Any

from .errors import refusing
from .meta_safety import runs_on_meta
from .signature_cache import SignatureCache, asked, signature
from .tensors import to_meta

@dataclass(frozen=True)
class Refused:
    """torch's refusal of a call on meta tensors, kept per signature: all that
    refusal_error reads of torch's exception (whether it is a TypeError, its message)."""

    type_error: bool
    message: str

    @classmethod
    def of(cls, exc: BaseException) -> "Refused":
        return cls(isinstance(exc, TypeError), str(exc))

    def exception(self) -> Exception:
        """An exception refusal_error words as it words torch's own."""
        return (TypeError if self.type_error else RuntimeError)(self.message)


def refused_error(name: str, exc: BaseException, bound: dict, out_names) -> Exception:
    """refusal_error's exception for torch's refusal `exc`, with the Refused it was
    made from as its ``torch_refused`` (what a signature's cache keeps)."""
    made = refusal_error(name, exc, bound, out_names)
    made.torch_refused = Refused.of(exc)  # type: ignore[attr-defined]
    return made


#: torch messages that say the meta kernel cannot run at all (not a refusal)
_NO_META = (
    "no fake impl", "meta tensor", "data pointer", "Could not run", "not implemented for 'Meta'",
    "dtype nullptr (uninitialized)",  # a Python out wrapper on an out its functional leaves None
    "Too many positional arguments",  # torch's Python meta of add/sub.Scalar_out has no alpha parameter
)


#: serializes etops' own changes of the process-wide warning filters: two threads'
#: overlapping catch_warnings blocks restore each other's filters, leaving torch's
#: resize warning (or, before, every warning) silenced for the whole process
_FILTERS_LOCK = threading.RLock()
#: torch's out= resize warning (C++ and Python meta kernels): the call path warns itself
_TORCH_RESIZE_WARNING = "An output with one or more elements was resized"


def torch_refusal(name: str, overload, bound: dict, out_names) -> Exception | None:
    """The exception a call of `overload` (torch's OpOverload of operator `name`)
    with these bound arguments raises under torch's meta kernel, as the TypeError or
    ValueError etops raises for it; None when torch accepts the call or cannot
    check it (no meta kernel)."""
    return check_with_torch(name, overload, bound, out_names)[0]


def check_with_torch(name: str, overload, bound: dict, out_names):
    """(refusal, resizes): torch_refusal's exception or None, and for a call torch
    accepts, out name -> the shape torch's out= resizes that given out to (a list
    of shapes for a tensor-list out), for the outs whose shape differs; resizes is
    None when torch cannot check the call (no meta kernel), so nothing is known of
    the out shapes."""
    if not runs_on_meta(overload):
        return None, None  # a native kernel behind the meta key: torch has no check to ask
    schema = overload._schema
    args = {a.name: to_meta(bound[a.name]) for a in schema.arguments if a.name in bound}
    positional = [args[a.name] for a in schema.arguments if not a.kwarg_only and a.name in args]
    keywords = {a.name: args[a.name] for a in schema.arguments if a.kwarg_only and a.name in args}
    shapes_before = {n: _shapes(args.get(n)) for n in out_names}
    try:
        with _FILTERS_LOCK, warnings.catch_warnings():
            # only torch's resize warning: another thread's warnings in the meantime still show
            warnings.filterwarnings("ignore", message=_TORCH_RESIZE_WARNING)
            try:
                overload(*positional, **keywords)
            finally:
                asked()
    except NotImplementedError:
        return None, None
    except (RuntimeError, TypeError, ValueError, IndexError, AssertionError, ZeroDivisionError) as exc:  # meta kernels assert too
        message = str(exc).split("\n", 1)[0]
        if isinstance(exc, ZeroDivisionError) or any(marker in message for marker in _NO_META):
            # a meta kernel's own bug (dividing by an output size of 0, as adaptive pools do): no check
            return None, None
        return refused_error(name, exc, _schema_bound(overload, bound), out_names), {}
    resizes = {}
    for n in out_names:
        after = _shapes(args.get(n))
        if after is not None and after != shapes_before[n]:
            resizes[n] = after
    return None, resizes


def _schema_bound(overload, bound: dict) -> dict:
    """`bound`'s arguments of `overload`'s schema, in its order."""
    return {a.name: bound[a.name] for a in overload._schema.arguments if a.name in bound}


def _shapes(meta):
    if isinstance(meta, (list, tuple)):
        return [tuple(m.shape) if hasattr(m, "shape") else None for m in meta]
    return tuple(meta.shape) if hasattr(meta, "shape") else None


def refusal_error(name: str, exc: BaseException, bound: dict, out_names) -> Exception:
    """torch's refusal `exc` of a call of operator `name` with `bound` (argument name
    -> value, in schema order) as the exception etops raises: a TypeError for
    dtypes, castability and argument types (a number where torch wants a Tensor),
    else a ValueError; it names the argument torch's message names ('out' for a
    result it cannot cast into, the n-th tensor input for "argument at index n")."""
    arg_names = list(bound)
    message = str(exc).split("\n", 1)[0]
    if "can't be cast to the desired output type" in message or "to out tensor with dtype" in message:
        out = out_names[0] if out_names else "out"
        return refusing(TypeError, out, f"{name}: argument '{out}' cannot hold the result (torch says: {message})")
    typed = ("dtype", "scalar type", "Expected a value of type")
    kind = TypeError if isinstance(exc, TypeError) or any(word in message for word in typed) else ValueError
    named = _named_argument(message, arg_names) or _indexed_tensor_input(message, bound, out_names)
    if named is None and len(out_names) == 1 and re.search(r"\bout(put)? (tensor|dtype)\b", message):
        named = out_names[0]  # "Expected out tensor to have dtype ...": the only out
    which = f"argument '{named}'" if named else "these arguments"
    return refusing(kind, named, f"{name}: torch refuses {which} (torch says: {message})")


def _indexed_tensor_input(message: str, bound: dict, out_names) -> str | None:
    """The input torch's broadcasting names by position ("Mismatching argument at
    index 1"): the index counts the tensor inputs given, in schema order."""
    found = re.search(r"\bargument at index (\d+)\b", message)
    if found is None:
        return None
    tensors = [n for n, v in bound.items() if n not in out_names and hasattr(v, "shape")]
    index = int(found.group(1))
    return tensors[index] if index < len(tensors) else None


def _named_argument(message: str, names) -> str | None:
    """The argument torch's message names (quoted, or as `argument x`), if any."""
    for arg in names:
        if re.search(rf"['`\"]{re.escape(arg)}['`\"]|\bargument {re.escape(arg)}\b", message):
            return arg
    return None


# ---- value checks torch's CPU kernels make and its meta kernels skip -----------------


def check_values(name: str, bound: dict, out_names) -> None:
    """Refuses, before an ExecuTorch kernel sees it, what torch's CPU kernels refuse
    and their meta kernels let through (or what has no torch kernel to refuse it:
    ExecuTorch's dim-order ops), by what an argument is rather than by operator,
    for every kernel that validates (once per argument signature): a tensor whose
    view reaches beyond its storage; convolution and pooling geometry (strides and
    dilations > 0, paddings and output paddings >= 0, groups > 0); a convolution bias
    that is not one value per output channel; a dim order that is not a permutation
    of the tensor's dims; an inverse FFT's last_dim_size that does not fit its
    input. Raises ValueError naming the argument, with torch's words."""
    for arg, value in bound.items():
        for label, t in _tensors(arg, value):
            check_bounds(name, label, t)
    _check_geometry(name, bound)
    _check_convolution_bias(name, bound)
    _check_dim_order(name, bound, out_names)
    _check_last_dim_size(name, bound)


def _tensors(arg: str, value):
    """(label, tensor) of an argument's torch tensors and numpy arrays."""
    import torch

    items = enumerate(value) if isinstance(value, (list, tuple)) else [(None, value)]
    for i, item in items:
        if isinstance(item, torch.Tensor) or (type(item).__module__ == "numpy" and hasattr(item, "__array_interface__")):
            yield (arg if i is None else f"{arg}[{i}]"), item


def check_bounds(name: str, label: str, t) -> None:
    """Raises ValueError naming `label` when torch tensor or numpy array `t` is a
    view reaching outside the memory it lives in: run per argument signature for
    every tensor (check_values), and per call for every tensor the C path copies
    (a strided or offset view: etops' densify); the C path refuses a tensor whose
    storage was freed (no data pointer) on every call."""
    if type(t).__module__ == "numpy" and hasattr(t, "__array_interface__"):
        _check_array_bounds(name, label, t)
    elif hasattr(t, "untyped_storage"):
        _check_storage_bounds(name, label, t)


def _check_array_bounds(name: str, label: str, a) -> None:
    """A numpy view (numpy.lib.stride_tricks.as_strided) reaches no byte outside the
    array that owns its memory (numpy does not check; torch's from_numpy views
    cannot be made so)."""
    import numpy

    owner, link = a, a.base
    while link is not None:  # as_strided's views hold their array through a plain object's .base
        if isinstance(link, numpy.ndarray):
            owner = link
        link = getattr(link, "base", None)
    if owner is a or owner.base is not None or a.size == 0:
        return  # owns its memory, or lives in a buffer numpy cannot bound (bytes, mmap)
    bounds = getattr(getattr(numpy.lib, "array_utils", numpy), "byte_bounds")
    low, high = bounds(a)
    owner_low, owner_high = bounds(owner)
    if low < owner_low or high > owner_high:
        raise ValueError(
            f"{name}: argument '{label}' (shape {list(a.shape)}, strides {list(a.strides)} bytes) reaches bytes "
            f"[{low - owner_low}, {high - owner_low}) of the {owner_high - owner_low}-byte array that owns its memory; "
            "the kernel would read or write outside it (torch refuses such views: out of bounds for storage)"
        )


def _check_storage_bounds(name: str, label: str, t) -> None:
    """torch's setStorage bound: the view's last element lies within its storage (a
    storage shrunk after the view was made, untyped_storage().resize_(), would have
    the kernel read or write past it). Tensors without storage are the C path's."""
    if t.numel() == 0 or t.is_meta:
        return
    try:
        have = t.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return
    reach = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    need = (t.storage_offset() + reach + 1) * t.element_size()
    if need > have:
        raise ValueError(
            f"{name}: argument '{label}' (sizes {list(t.shape)}, strides {list(t.stride())}, storage offset "
            f"{t.storage_offset()}) requires a storage size of {need} bytes, out of bounds for its storage of size {have} "
            "(was the storage resized after the view was made?); torch refuses such views"
        )


def _ints(value):
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


#: argument -> (the least value torch's CPU kernels accept, what torch says)
_GEOMETRY = {
    "stride": (1, "non-positive stride is not supported (stride should be greater than zero)"),
    "dilation": (1, "dilation should be greater than zero"),
    "padding": (0, "negative padding is not supported (pad must be non-negative)"),
    "output_padding": (0, "negative output_padding is not supported"),
    "groups": (1, "non-positive groups is not supported"),
    "kernel_size": (1, "kernel size should be greater than zero"),
}


def _check_geometry(name: str, bound: dict) -> None:
    """Convolution and pooling geometry (the kernels with both a `stride` and a
    `padding` argument): torch's CPU kernels refuse what its meta kernels accept."""
    if "stride" not in bound or "padding" not in bound:
        return
    for arg, (least, says) in _GEOMETRY.items():
        values = _ints(bound.get(arg))
        if values and min(values) < least:
            raise ValueError(f"{name}: argument '{arg}' is {bound[arg]!r}; torch refuses it ({says})")


def _check_convolution_bias(name: str, bound: dict) -> None:
    """A convolution's bias is one value per output channel (torch's CPU check; its
    meta kernel takes a zero-size bias, and the kernel would read past it)."""
    import torch

    weight, bias = bound.get("weight"), bound.get("bias")
    if not {"weight", "bias", "groups", "transposed"} <= set(bound) or not isinstance(bias, torch.Tensor) or not isinstance(weight, torch.Tensor) or weight.dim() < 2:
        return
    groups = bound["groups"] if isinstance(bound["groups"], int) else 1
    channels = weight.shape[1] * groups if bound["transposed"] else weight.shape[0]
    if bias.dim() != 1 or bias.shape[0] != channels:
        raise ValueError(
            f"{name}: argument 'bias' has size {list(bias.shape)}; torch refuses it (Given weight of size "
            f"{list(weight.shape)}, expected bias to be 1-dimensional with {channels} elements)"
        )


def _check_dim_order(name: str, bound: dict, out_names) -> None:
    """A `dim_order` lists each dim of the tensor once (torch's dim-order ops refuse
    anything else: "Failed to map a given dim_order"); ExecuTorch's _empty_dim_order
    takes it as it is."""
    order = _ints(bound.get("dim_order"))
    if order is None:
        return
    x: Any = bound.get("self")
    rank = x.dim() if hasattr(x, "dim") else len(bound["size"]) if _ints(bound.get("size")) is not None else None
    if sorted(order) != list(range(len(order))) or (rank is not None and len(order) != rank):
        raise ValueError(
            f"{name}: argument 'dim_order' is {order}, not a permutation of the {rank if rank is not None else len(order)} dims "
            "of the tensor; torch refuses it (Failed to map a given dim_order)"
        )


def _check_last_dim_size(name: str, bound: dict) -> None:
    """An inverse real FFT's last_dim_size fits its input: the input's last
    transformed dim is last_dim_size or last_dim_size // 2 + 1 (torch's CPU
    assertion; its meta kernel sizes the out from last_dim_size alone and the kernel
    would read past the input)."""
    size, dims = bound.get("last_dim_size"), _ints(bound.get("dim"))
    x: Any = bound.get("self")
    if not isinstance(size, int) or not dims or not hasattr(x, "shape") or not -x.dim() <= dims[-1] < x.dim():
        return
    have = x.shape[dims[-1]]
    if size < 1 or have not in (size, size // 2 + 1):
        raise ValueError(
            f"{name}: argument 'last_dim_size' is {size}, and 'self' has {have} elements in dim {dims[-1]}; torch refuses it "
            f"(the input's last dim must be last_dim_size // 2 + 1 = {size // 2 + 1}, or last_dim_size)"
        )


#: torch's checks per call: (operator, argument signature, outs included) -> (the outs'
#: resizes,) when torch accepted it, its Refused when torch refused it
TORCH_ACCEPTED = SignatureCache("torch accepted", 1 << 15)


def checked_with_torch(name: str, overload, bound: dict, out_names):
    """check_with_torch's (refusal, resizes), a signature's from TORCH_ACCEPTED when
    torch answered it before (a refusal made again from its Refused: the same
    exception, in the same words, naming the same argument)."""
    try:
        key = (name, tuple((n, signature(v)) for n, v in bound.items()))
    except TypeError:
        return check_with_torch(name, overload, bound, out_names)
    found = TORCH_ACCEPTED.get(key)
    if isinstance(found, Refused):
        return refused_error(name, found.exception(), _schema_bound(overload, bound), out_names), {}
    if found is not None:
        return None, None if found[0] is None else dict(found[0])
    refusal, resizes = check_with_torch(name, overload, bound, out_names)
    if refusal is None:
        TORCH_ACCEPTED.put(key, (None if resizes is None else dict(resizes),))
    elif isinstance(getattr(refusal, "torch_refused", None), Refused):
        TORCH_ACCEPTED.put(key, refusal.torch_refused)
    return refusal, resizes
