"""torch's own checks of a call, before an ExecuTorch kernel sees it.

ExecuTorch's kernels trust their caller: given a float out for a complex result
they write past its end. A call of an aten:: kernel is therefore first run through
torch's meta kernel of the same out variant, with meta copies of the given outs:
whatever torch refuses (dtype promotion and castability, broadcasting, ranks, dims
out of range) raises here and never reaches the kernel. The C call path asks once
per argument signature (dtypes, ranks, sizes, int values), so calls that repeat a
signature pay nothing. Core module: imports torch and the core only.
"""

from __future__ import annotations

import re
import threading
import warnings

from .out_shapes import to_meta

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
    schema = overload._schema
    args = {a.name: to_meta(bound[a.name]) for a in schema.arguments if a.name in bound}
    positional = [args[a.name] for a in schema.arguments if not a.kwarg_only and a.name in args]
    keywords = {a.name: args[a.name] for a in schema.arguments if a.kwarg_only and a.name in args}
    shapes_before = {n: _shapes(args.get(n)) for n in out_names}
    try:
        with _FILTERS_LOCK, warnings.catch_warnings():
            # only torch's resize warning: another thread's warnings in the meantime still show
            warnings.filterwarnings("ignore", message=_TORCH_RESIZE_WARNING)
            overload(*positional, **keywords)
    except NotImplementedError:
        return None, None
    except (RuntimeError, TypeError, ValueError, IndexError, AssertionError, ZeroDivisionError) as exc:  # meta kernels assert too
        message = str(exc).split("\n", 1)[0]
        if isinstance(exc, ZeroDivisionError) or any(marker in message for marker in _NO_META):
            # a meta kernel's own bug (dividing by an output size of 0, as adaptive pools do): no check
            return None, None
        return refusal_error(name, exc, {a.name: bound[a.name] for a in schema.arguments if a.name in bound}, out_names), {}
    resizes = {}
    for n in out_names:
        after = _shapes(args.get(n))
        if after is not None and after != shapes_before[n]:
            resizes[n] = after
    return None, resizes


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
        return TypeError(f"{name}: argument '{out}' cannot hold the result (torch says: {message})")
    typed = ("dtype", "scalar type", "Expected a value of type")
    kind = TypeError if isinstance(exc, TypeError) or any(word in message for word in typed) else ValueError
    named = _named_argument(message, arg_names) or _indexed_tensor_input(message, bound, out_names)
    if named is None and len(out_names) == 1 and re.search(r"\bout(put)? (tensor|dtype)\b", message):
        named = out_names[0]  # "Expected out tensor to have dtype ...": the only out
    which = f"argument '{named}'" if named else "these arguments"
    return kind(f"{name}: torch refuses {which} (torch says: {message})")


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
