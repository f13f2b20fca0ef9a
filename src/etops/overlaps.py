"""Memory a call's tensors share: what torch refuses, and what etops refuses with it.

torch refuses an out= call whose written tensor shares some, but not all, of an
input's elements ("some elements of the input tensor and the written-to tensor refer
to a single memory location"), and allows a full alias (the same memory and layout)
where the operator computes in place (abs, add, mm), refusing it where it does not
(cat, index_select, gather). ExecuTorch's kernels read and write through raw
pointers with no such check, so a partial overlap smears their results, whatever the
operator: etops refuses it for every kernel (also where torch's kernel forgets to,
as its reductions do), and allows a full alias where torch's out= allows it for the
operator; there a kernel that is not pointwise (flip, roll, tril read elements
they already wrote, where torch's out= computes into a temporary) reads the input
from a snapshot (`snapshot`, `computes_in_place`). Two written tensors sharing memory are refused too (torch takes one
tensor as two outs and keeps whichever result it wrote last: an ExecuTorch kernel
writes in its own order), and so is resizing an out that shares memory with
another argument (resize.py). The C call path compares byte ranges on every call
(_native/kernel_checks.c) and asks `refuse_overlaps` only when two of them meet.
Core module: imports torch and the core only.
"""

from __future__ import annotations

import warnings

import torch

from .layouts import is_dense

FULL, PARTIAL, NONE, TOO_HARD = "full", "partial", "none", "too hard"

#: argument flags of the plan (plan.py): written tensors
_F_OUT, _F_MUTABLE = 4, 16

#: torch's message for memory an out shares with an input (at::assert_no_overlap and
#: TensorIterator's check)
TORCH_SAYS = "some elements of the input tensor and the written-to tensor refer to a single memory location"


def memory_span(t: torch.Tensor, shape=None) -> tuple[int, int, int]:
    """(storage address, first byte, end byte) of what `t` covers, or would cover
    once resized to `shape` (contiguously, from its storage offset)."""
    size = t.element_size()
    first = t.storage_offset() * size
    if shape is not None:
        extent = torch.Size(shape).numel()
    else:
        extent = 0 if t.numel() == 0 else 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return t.untyped_storage().data_ptr(), int(first), int(first + extent * size)


def overlaps(a: torch.Tensor, b: torch.Tensor, a_shape=None) -> bool:
    """Whether `a` (or `a` once resized to `a_shape`) and `b` are the same tensor or
    share bytes of one storage."""
    if a is b:
        return True
    address, first, end = memory_span(a, a_shape)
    b_address, b_first, b_end = memory_span(b)
    return address == b_address and address != 0 and first < b_end and b_first < end


def overlap_status(a: torch.Tensor, b: torch.Tensor) -> str:
    """How `a` and `b` share memory, as torch decides it: FULL (the same tensor, or
    the same bytes with the same strides), PARTIAL (bytes in common otherwise), NONE,
    or TOO_HARD (they meet, and one is not dense: torch lets such calls through; etops
    passes a non-dense tensor to a kernel as a copy, so the kernel never reads what it
    writes)."""
    if a is b:
        return FULL
    if a.numel() == 0 or b.numel() == 0:
        return NONE
    a_first, a_end = _bytes(a)
    b_first, b_end = _bytes(b)
    if a_first >= b_end or b_first >= a_end:
        return NONE
    if not is_dense(a.shape, a.stride()) or not is_dense(b.shape, b.stride()):
        return TOO_HARD
    if a_first == b_first and a_end == b_end:
        return FULL if tuple(a.stride()) == tuple(b.stride()) and a.dim() == b.dim() else PARTIAL
    return PARTIAL


def _bytes(t: torch.Tensor) -> tuple[int, int]:
    """[first, end) addresses of the bytes a non-empty torch tensor reaches."""
    item = t.element_size()
    low = t.data_ptr()
    reach = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 0)
    return low, low + (reach + 1) * item


def _as_torch(value):
    from .tensors import from_dlpack

    if isinstance(value, torch.Tensor) or not hasattr(value, "__dlpack__"):
        return value
    return from_dlpack(value)


def call_tensors(names, values, flags) -> list[tuple[str, int, bool, bool, torch.Tensor]]:
    """(label, argument index, written, out, tensor) of every tensor of a call, list
    items as 'name[i]'; `flags`: the plan's flags per argument."""
    found = []
    for index, (name, value, flag) in enumerate(zip(names, values, flags)):
        written, out = bool(flag & (_F_OUT | _F_MUTABLE)), bool(flag & _F_OUT)
        items = enumerate(value) if isinstance(value, (list, tuple)) else [(None, value)]
        for i, item in items:
            t = _as_torch(item)
            if isinstance(t, torch.Tensor):
                found.append((name if i is None else f"{name}[{i}]", index, written, out, t))
    return found


def refuse_overlaps(info, names, values, flags) -> tuple:
    """Raises ValueError naming both arguments when a written tensor of the call
    shares memory with another tensor other than as torch allows: part of an input's
    memory, all of it where torch's out= refuses that for the operator (asked once
    per pair of arguments, torch_allows_full_alias), or part of another written
    tensor's. Returns the (written, input, snapshot) argument index triples found
    full aliases torch allows, snapshot when the kernel must read that input from a
    copy (not computes_in_place), for the C call path to remember."""
    tensors = call_tensors(names, values, flags)
    allowed = []
    for n, (label, index, written, out, t) in enumerate(tensors):
        if not written:
            continue
        what = _kind(flags[index])
        for m, (other_label, other_index, other_written, _, other) in enumerate(tensors):
            if m == n or (other_written and m < n):
                continue
            status = overlap_status(t, other)
            if status in (NONE, TOO_HARD):
                continue
            if other_written:
                raise ValueError(
                    f"{info.name}: {what} '{label}' and {_kind(flags[other_index])} '{other_label}' share "
                    f"{'all' if status == FULL else 'part'} of their memory, so the kernel would write some elements "
                    "through both (which result stays depends on its loops); pass separate tensors"
                )
            if status == PARTIAL:
                raise ValueError(
                    f"{info.name}: {what} '{label}' shares part of its memory with argument '{other_label}' "
                    f"(unsupported operation, as torch's out= says: {TORCH_SAYS}); pass a clone of '{other_label}'"
                )
            refusal = torch_allows_full_alias(info, names, values, label, other_label)
            if refusal is not None:
                raise ValueError(
                    f"{info.name}: {what} '{label}' is the same memory as argument '{other_label}', which torch refuses "
                    f"for this operator (torch says: {refusal}); pass a clone of '{other_label}'"
                )
            allowed.append((index, other_index, not computes_in_place(info)))
    return tuple(allowed)


def computes_in_place(info) -> bool:
    """Whether the kernel computes an out that is the same memory as an input
    correctly in place: a pointwise operator (torch's `pointwise` tag: each out
    element reads only the same element of that input). Any other kernel, a custom
    one included, may read an element it already wrote: it reads a snapshot. Asked
    once per kernel (remembered on `info`)."""
    from .schemas import torch_overload

    known = info.__dict__.get("_computes_in_place")
    if known is None:
        overload = torch_overload(info.name) if info.name.startswith("aten::") else None
        known = info.__dict__["_computes_in_place"] = overload is not None and torch.Tag.pointwise in overload.tags
    return known


def snapshot(value) -> torch.Tensor:
    """A copy of `value` with its sizes and strides (a dense tensor: the same
    layout), which the kernel reads instead of memory it writes."""
    t = _as_torch(value)
    copy = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)
    with torch.no_grad():
        copy.copy_(t)
    return copy


def _kind(flag: int) -> str:
    return "out argument" if flag & _F_OUT else "argument"


def torch_allows_full_alias(info, names, values, written: str, other: str) -> str | None:
    """None when torch's out= accepts `written` being the same tensor as input `other`
    for this operator, else torch's message. torch decides this in its CPU kernel
    (its meta kernels do not check memory), so its out variant runs once per kernel
    and pair of arguments, on copies of the call's tensors (their storages cloned and
    zeroed, every view kept, so the alias is the same one), with grad off and the random
    state restored; the verdict is remembered on `info`. An operator torch has not
    (a custom kernel) keeps the alias: nothing says it may not."""
    from .schemas import torch_overload

    key = (written.split("[")[0], other.split("[")[0])
    verdicts = info.__dict__.setdefault("_full_alias_verdicts", {})
    if key in verdicts:
        return verdicts[key]
    overload = torch_overload(info.name) if info.name.startswith("aten::") else None
    verdict = None
    if overload is not None:
        clones: dict[int, torch.UntypedStorage] = {}

        def copy(value):
            if isinstance(value, (list, tuple)):
                return type(value)(copy(v) for v in value)
            t = _as_torch(value)
            if not isinstance(t, torch.Tensor):
                return value
            storage = t.untyped_storage()
            if storage.data_ptr() not in clones:
                # zeros, not the call's values: torch checks overlap before it
                # computes, and values such as INT64_MIN / -1 trap in its kernels
                clones[storage.data_ptr()] = storage.clone().fill_(0)
            cloned = clones[storage.data_ptr()]
            return torch.empty(0, dtype=t.dtype).set_(cloned, t.storage_offset(), t.shape, t.stride())

        schema = overload._schema.arguments
        args = {n: copy(v) for n, v in zip(names, values)}
        positional = [args[a.name] for a in schema if not a.kwarg_only and a.name in args]
        keywords = {a.name: args[a.name] for a in schema if a.kwarg_only and a.name in args}
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=[]), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                overload(*positional, **keywords)
        except Exception as exc:  # noqa: BLE001 - only torch's overlap refusal is a verdict
            message = str(exc).split("\n", 1)[0]
            if TORCH_SAYS in message or "unsupported operation" in message:
                verdict = message
            else:  # torch refused these arguments for another reason: no verdict on the alias to keep
                return None
    verdicts[key] = verdict
    return verdict
