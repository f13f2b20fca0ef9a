"""Checks of the tensor values a kernel's footprint depends on: constructors, each
written once, of the checks a rule's ``Footprint`` part names (etops.ops.parts).

A kernel whose out sizes or read / write positions depend on tensor values (indices,
repeats, a mask's count) is safe on a signature's first call (probed between guard
pages) but not on a later call of the same signature with other values. These checks
refuse what torch's CPU kernels refuse of those values (an index out of range, a
negative repeat, repeats whose sum no size can hold, a source shorter than a mask's
count, values that do not fit the indexing result), before every call of every
policy: the C path's precheck runs them ahead of the call memo, and an index check
(``indices_in_dim``) runs in C itself (kernel_footprint.c), calling back only to
word a refusal. A refusal raises
ValueError naming the argument, with what torch says, as torch's other checks do
(etops.torch_checks). A check passes silently over arguments of the wrong kind (not
a tensor, not an integer tensor): torch's checks of the signature report those.
Imports torch and etops.tensors only.
"""

from __future__ import annotations

import torch

from .. import tensors
from ..errors import refusing

#: the largest size an ExecuTorch tensor can have (its sizes are int32)
_ET_MAX_SIZE = 2**31 - 1
_INT64_MAX = 2**63 - 1


#: below this many elements the values are read as a Python list (one call into
#: torch); above it torch's aminmax reads them (one pass, whatever their number)
_SMALL = 256
_INTEGER = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.uint16, torch.uint32, torch.uint64)


def _tensor(value):
    """`value` as a torch tensor (DLPack producers converted), or what it is."""
    return value if type(value) is torch.Tensor else tensors.as_torch(value)


def _integer_tensor(value):
    """`value` as a torch tensor when it is an integer (not bool) tensor, else None."""
    t = _tensor(value)
    return t if isinstance(t, torch.Tensor) and t.dtype in _INTEGER else None


def _range(t: torch.Tensor) -> tuple[int, int]:
    """(min, max) of a non-empty integer tensor's values (lazy bits resolved, as torch reads them)."""
    if t.numel() <= _SMALL:
        values = t.reshape(-1).tolist()
        return min(values), max(values)
    low, high = torch.aminmax(t)
    return int(low), int(high)


_TORCH_REFUSES_INDEX = "torch refuses it (index out of range)"


def indices_in_dim(index: str, source: str, dim: str | int, why: str = _TORCH_REFUSES_INDEX):
    """Every value of integer tensor `index` lies in [0, n), n the size of dim `dim`
    (an argument name or a fixed dim, skipped when `source` has too few dims) of
    `source` (for a dim argument, a 0-dim source has one element):
    gather, scatter, index_select, embedding (torch refuses negative indices there).
    `why` ends the refusal's message. The C call path scans the values itself
    (`index_range`: kernel_footprint.c) and calls the check only to word a refusal."""

    def check(bound, info):
        idx, src = _integer_tensor(bound.get(index)), _tensor(bound.get(source))
        d = bound.get(dim) if isinstance(dim, str) else dim
        if idx is None or not isinstance(src, torch.Tensor) or idx.numel() == 0 or not isinstance(d, int):
            return
        if isinstance(dim, int) and src.dim() <= dim:
            return  # a table of too few dims (a 0-dim weight): the kernel's own rank check answers
        ndim = max(src.dim(), 1)
        if not -ndim <= d < ndim:
            return  # torch's checks of the signature name the dim
        size = src.shape[d] if src.dim() else 1
        low, high = _range(idx)
        if low < 0 or high >= size:
            bad = low if low < 0 else high
            raise refusing(ValueError, f"{index}", f"{info.name}: argument '{index}' holds {bad}, outside [0, {size}) (dim {d % ndim} of '{source}'); {why}")

    check.index_range = (index, source, dim)  # type: ignore[attr-defined]  # the C call path scans the values (kernel_footprint.c)
    return check


def _index_plan(src: torch.Tensor, indices) -> list:
    """(position in `indices`, tensor, first dim of `src` it indexes) of each index
    tensor given, bool / uint8 masks covering as many dims as they have."""
    plan, d = [], 0
    for i, item in enumerate(indices):
        t = _tensor(item)
        if not isinstance(t, torch.Tensor):
            d += 1
            continue
        plan.append((i, t, d))
        d += t.dim() if t.dtype in (torch.bool, torch.uint8) else 1
    return plan


def tensor_indices(source: str = "self", indices: str = "indices"):
    """Each integer tensor of list `indices` holds values in [-n, n), n the size of
    the dim of `source` it indexes (negative values count from the end, as torch's
    advanced indexing does): index.Tensor, index_put."""

    def check(bound, info):
        src, given = _tensor(bound.get(source)), bound.get(indices)
        if not isinstance(src, torch.Tensor) or not isinstance(given, (list, tuple)):
            return
        for i, t, d in _index_plan(src, given):
            if t.dtype in (torch.bool, torch.uint8) or _integer_tensor(t) is None or t.numel() == 0 or d >= src.dim():
                continue
            size = src.shape[d]
            low, high = _range(t)
            if low < -size or high >= size:
                bad = low if low < -size else high
                raise refusing(ValueError, f"{indices}[{i}]", f"{info.name}: argument '{indices}[{i}]' holds {bad}, outside [{-size}, {size}) (dim {d} of "
                                 f"'{source}'); torch refuses it (index {bad} is out of bounds for dimension {d} with size {size})")

    return check


def values_fit_indexing(source: str = "self", indices: str = "indices", values: str = "values"):
    """Tensor `values` broadcasts to the shape `source[indices]` has, which a bool
    mask's count decides (index_put; without a mask the shape is the signature's,
    which torch's checks saw)."""

    def check(bound, info):
        src, given, vals = _tensor(bound.get(source)), bound.get(indices), _tensor(bound.get(values))
        if not isinstance(src, torch.Tensor) or not isinstance(vals, torch.Tensor) or not isinstance(given, (list, tuple)):
            return
        items = [_tensor(t) for t in given]
        if not any(isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8) for t in items):
            return
        as_longs = []  # each mask as the long indices of its true elements: the shape torch's indexing gives
        for t in items:
            if isinstance(t, torch.Tensor) and t.dtype in (torch.bool, torch.uint8):
                as_longs.extend(torch.empty(n, dtype=torch.long, device="meta") for n in [int(t.count_nonzero())] * t.dim())
            else:
                as_longs.append(t.to("meta") if isinstance(t, torch.Tensor) else None)
        try:
            shape = torch.ops.aten.index.Tensor(src.to("meta"), as_longs).shape
        except (RuntimeError, IndexError, ValueError):
            return  # torch's checks of the signature report the indices themselves
        try:
            fits = torch.broadcast_shapes(vals.shape, shape) == shape
        except RuntimeError:
            fits = False
        if not fits:
            raise refusing(ValueError, f"{values}", f"{info.name}: argument '{values}' of shape {list(vals.shape)} cannot be broadcast to the indexing "
                             f"result of shape {list(shape)}; torch refuses it (shape mismatch)")

    return check


def repeats_fit(repeats: str = "repeats", output_size: str = "output_size"):
    """A 1-D integer `repeats` holds non-negative values whose sum an int64
    holds (torch: "cannot be represented as a SymInt") and ExecuTorch's int32 sizes
    hold; `output_size`, when given, is that sum."""

    def check(bound, info):
        r = _integer_tensor(bound.get(repeats))
        if r is None or r.dim() != 1:
            return  # torch's checks of the signature refuse it (1-D integer repeats only)
        if r.numel() <= _SMALL:
            values = r.tolist()
            low, total = min(values, default=0), sum(values)  # Python ints: no int64 wrap-around
        else:
            low, high = _range(r)
            total = int(r.sum()) if high <= _ET_MAX_SIZE else sum(r.tolist())  # no int64 wrap-around either way
        if low < 0:
            raise refusing(ValueError, f"{repeats}", f"{info.name}: argument '{repeats}' holds {low}; torch refuses it (repeats can not be negative)")
        if total > _INT64_MAX:
            raise refusing(ValueError, f"{repeats}", f"{info.name}: argument '{repeats}' sums to {total}, more than an int64 holds; torch refuses it "
                             "(the size cannot be represented as a SymInt)")
        if total > _ET_MAX_SIZE:
            raise refusing(ValueError, f"{repeats}", f"{info.name}: argument '{repeats}' sums to {total}, beyond ExecuTorch's int32 sizes")
        size = bound.get(output_size)
        if isinstance(size, int) and not isinstance(size, bool) and size != total:
            raise refusing(ValueError, f"{output_size}", f"{info.name}: argument '{output_size}' is {size}, '{repeats}' sums to {total}; torch refuses it "
                             "(allocated size does not match required size)")

    return check


def mask_count_within(mask: str = "mask", source: str = "source", target: str = "self"):
    """`source` has at least as many elements as `mask`, broadcast to `target`'s
    shape, has true elements (masked_scatter reads one source element per true)."""

    def check(bound, info):
        m, src, tgt = _tensor(bound.get(mask)), _tensor(bound.get(source)), _tensor(bound.get(target))
        if not (isinstance(m, torch.Tensor) and isinstance(src, torch.Tensor) and isinstance(tgt, torch.Tensor)):
            return
        if m.numel() <= src.numel() and m.shape == tgt.shape:
            return  # at most one true element per source element
        try:
            shape = torch.broadcast_shapes(m.shape, tgt.shape)
        except RuntimeError:
            return  # torch's checks of the signature report it
        count = int(m.expand(shape).count_nonzero())
        if count > src.numel():
            raise refusing(ValueError, f"{source}", f"{info.name}: argument '{source}' has {src.numel()} elements, '{mask}' {count} true ones; torch "
                             "refuses it (Number of elements of source < number of ones in mask)")

    return check
