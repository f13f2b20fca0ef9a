"""Kernel keys of run-time registrations: a user's spec (None, a key string, a
``(dtype, dim order or rank)`` pair or a list of them) turned into ExecuTorch's
kernel key string for an operator's schema, checked as ExecuTorch would read it."""

from __future__ import annotations

import re

from .. import _native, dtypes
from ..errors import RegistrationError

_KEY = re.compile(r"^v1/\d+;(\d+(,\d+)*)?(\|\d+;(\d+(,\d+)*)?)*$")


def _tensor_slots(schema) -> tuple[int, int | None, bool]:
    """(number of Tensor arguments, position among them of the out the return slot
    repeats or None, whether that count is fixed: no optional tensors)."""
    tensors = 0
    first_out = None
    fixed = True
    for a in schema.arguments:
        t = str(a.real_type)
        if t in ("Tensor", "Optional[Tensor]"):
            if t != "Tensor":
                fixed = False
            if a.is_out and first_out is None:
                first_out = tensors
            tensors += 1
    returns_out = any(r.alias_info is not None and r.alias_info.is_write for r in schema.returns)
    return tensors, first_out if returns_out else None, fixed


def kernel_key(spec, schema=None) -> str | None:
    """ExecuTorch's kernel key string from ``spec``: None (the fallback kernel), a key
    string ('v1/6;0,1|...', checked), or one ``(dtype, dim order)`` per Tensor on the
    kernel's stack, dim order a tuple or an int (the rank, contiguous). Given a schema,
    a list with one entry per Tensor argument gets the repeated out (the return slot
    of an out variant) appended, as ExecuTorch's key has it."""
    if spec is None:
        return None
    if isinstance(spec, str):
        if not _KEY.match(spec):
            raise RegistrationError(f"kernel key {spec!r} is not ExecuTorch's format 'v1/<dtype>;<dim order>|...'")
        for part in spec[3:].split("|"):
            dt, _, order = part.partition(";")
            if int(dt) not in dtypes.ET_SCALAR_TYPE.values():
                raise RegistrationError(f"kernel key {spec!r}: {dt} is not an ExecuTorch dtype")
            dims = [int(d) for d in order.split(",") if d]
            if sorted(dims) != list(range(len(dims))):
                raise RegistrationError(f"kernel key {spec!r}: {order!r} is not a dim order")
        return spec
    pairs = []
    for entry in spec:
        try:
            dtype, order = entry
        except (TypeError, ValueError):
            raise RegistrationError(f"kernel key entry {entry!r} must be (dtype, dim order or rank)") from None
        if dtype not in dtypes.ET_SCALAR_TYPE:
            raise RegistrationError(f"kernel key entry {entry!r}: {dtype} is not a dtype ExecuTorch has")
        dim_order = tuple(range(order)) if isinstance(order, int) else tuple(int(d) for d in order)
        if sorted(dim_order) != list(range(len(dim_order))) or len(dim_order) > _native.MAX_DIM:
            raise RegistrationError(f"kernel key entry {entry!r}: {dim_order} is not a dim order")
        pairs.append((dtypes.ET_SCALAR_TYPE[dtype], dim_order))
    if not pairs:
        raise RegistrationError("an empty kernel key; give None for the fallback kernel")
    if schema is not None:
        n, first_out, fixed = _tensor_slots(schema)
        total = n + (first_out is not None)
        if len(pairs) == 1 and total > 1:
            pairs = pairs * total  # one (dtype, dim order) for every tensor
        elif first_out is not None and len(pairs) == n:
            pairs.append(pairs[first_out])
        if fixed and len(pairs) != total:
            raise RegistrationError(
                f"kernel key gives {len(pairs)} tensors; {schema.name} has {n} Tensor arguments"
                + (" (plus its out again as the return)" if first_out is not None else "")
                + f": give {n} or {total} (dtype, dim order) entries, or one for all"
            )
    if len(pairs) > 16:
        raise RegistrationError("ExecuTorch keys at most 16 tensors")
    return _native.make_key(pairs)
