"""Where a faulting address lies among a call's tensor arguments, and the warning
that a fault may have corrupted memory.

When a kernel faults in-process (etops.KernelCrashed), the bridge reports the
address it touched; this module names the tensor argument whose memory holds it or
lies nearest to it, the direction and the distance, so that "a write 64 bytes past
the end of argument 'out'" reads as what it is. Core: imports torch only.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch


#: addresses below this are a null pointer plus an offset (the kernel's own bug, not
#: an overrun of any argument)
NULL_PAGE_BYTES = 65536


#: farther than this from every tensor (1 TiB), an address is a wild pointer
FARTHEST_BYTES = 1 << 40


#: how far from the stack pointer a stack's overflow touches (fault_trap.c's
#: NEAR_STACK_POINTER): unmapped memory this close to a live stack pointer can only
#: be the end of the stack
NEAR_STACK_POINTER_BYTES = 64 * 1024


def is_stack_overflow(address: int, stack_pointer: int) -> bool:
    """Whether a memory fault at `address`, with the stack pointer at
    `stack_pointer` (0: unknown), ran out of its thread's stack: the address lies next
    to the stack pointer (fault_trap.c's rule for a thread whose stack it did not
    record)."""
    return stack_pointer != 0 and abs(address - stack_pointer) < NEAR_STACK_POINTER_BYTES


def _extent(t: torch.Tensor) -> tuple[int, int]:
    """[start, end) of the bytes `t` can reach (end == start for an empty tensor)."""
    start = t.data_ptr()
    if t.numel() == 0:
        return start, start
    span = 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))
    low = start - sum((size - 1) * -stride for size, stride in zip(t.shape, t.stride()) if stride < 0) * t.element_size()
    return low, low + span * t.element_size()


def _tensors(bound: dict[str, Any]):
    """(label, tensor) of every torch tensor argument, list items labelled name[i]."""
    for name, value in bound.items():
        if isinstance(value, torch.Tensor):
            yield name, value
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if isinstance(item, torch.Tensor):
                    yield f"{name}[{i}]", item


def _extents(bound: dict[str, Any]):
    """(label, start, end) of the memory of every CPU tensor argument with bytes."""
    for label, t in _tensors(bound):
        try:
            if t.device.type != "cpu" or t.is_meta:
                continue
            lo, hi = _extent(t)
        except (RuntimeError, NotImplementedError):  # a tensor without storage
            continue
        if hi > lo:  # an empty tensor's pointer holds nothing of it
            yield label, lo, hi


def relative(address: int, extents) -> list[tuple[str, str, int]]:
    """(label, where, offset) of `address` against each (label, start, end) of
    `extents`, nearest first: where is "inside" (offset: bytes into it), "past the
    end" or "before the start" (offset: bytes beyond it, 0 for the first byte
    outside on either side)."""
    found = []
    for label, lo, hi in extents:
        if lo <= address < hi:
            found.append((-1, label, "inside", address - lo))
        elif address >= hi:
            found.append((address - hi, label, "past the end", address - hi))
        else:
            found.append((lo - 1 - address, label, "before the start", lo - 1 - address))
    found.sort(key=lambda f: f[0])
    return [f[1:] for f in found]


def locate_in(address: int, extents) -> tuple[str, str, int] | None:
    """(label, where, offset) of the extent ((label, start, end)) holding `address`
    or nearest to it, as `relative` gives it; None when there is no extent, and for
    an address in the first NULL_PAGE_BYTES (a null pointer) or farther than
    FARTHEST_BYTES from every extent (a wild pointer)."""
    if address < NULL_PAGE_BYTES:  # a null pointer plus an offset: no tensor's
        return None
    found = relative(address, extents)
    if not found or found[0][2] > FARTHEST_BYTES and found[0][1] != "inside":  # a wild pointer
        return None
    return found[0]


def locate(address: int, bound: dict[str, Any]) -> tuple[str, str, int] | None:
    """(argument, where, offset) of the tensor argument nearest to `address` (see
    locate_in; list items labelled name[i]); None when the call has no tensor with
    memory (or the tensors are not torch's: nothing to measure), for a null pointer
    and for a wild pointer."""
    return locate_in(address, _extents(bound))


class MemoryMayBeCorruptWarning(RuntimeWarning):
    """A kernel faulted on a write outside its memory: the interpreter goes on, but
    what it wrote before the fault may have corrupted memory nothing checks. Issued
    once per process (each such KernelCrashed says it too)."""


_warned = False


def warn_once_if_corrupt(error: Any) -> Any:
    """Returns `error`, after MemoryMayBeCorruptWarning the first time in this
    process that a trapped fault (a KernelCrashed) may have corrupted memory."""
    global _warned
    if _warned or not getattr(error, "memory_may_be_corrupt", False):
        return error
    _warned = True
    warnings.warn(f"ExecuTorch kernel {error.op} faulted on a write outside its memory; the process goes on, but "
                  "memory may already be corrupt. Run suspicious calls guarded (etops.guard.call, guard=True, or "
                  "etops check --isolated). Shown once per process.", MemoryMayBeCorruptWarning, stacklevel=3)
    return error
