"""Tensors whose memory ends flush against an inaccessible guard page (or starts
right after one), for one guarded call in a child process (etops.guard).

A GuardedBuffer is one anonymous mapping: the data pages, and a PROT_NONE page
after them (side "after": the data ends where the guard page starts) or before them
(side "before": the data starts where the guard page ends). An input the kernel
must not write is made read-only once filled. Imports the standard library and
torch only.
"""

from __future__ import annotations

import ctypes
import mmap

import torch

PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_PROT_NONE, _PROT_READ = 0, 1


def _protect(address: int, length: int, prot: int) -> None:
    if _libc.mprotect(address, length, prot) != 0:
        raise OSError(ctypes.get_errno(), f"mprotect({address:#x}, {length}) failed")


class GuardedBuffer:
    """`nbytes` of memory against a guard page on `side` ("after" or "before")."""

    def __init__(self, nbytes: int, side: str):
        if side not in ("after", "before"):
            raise ValueError(f"GuardedBuffer: argument 'side' must be 'after' or 'before', got {side!r}")
        self.nbytes, self.side = nbytes, side
        data_pages = max(1, -(-nbytes // PAGE))
        self._map = mmap.mmap(-1, (data_pages + 1) * PAGE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self._map))
        if side == "after":
            self.guard_start = base + data_pages * PAGE
            self.offset = data_pages * PAGE - nbytes
        else:
            self.guard_start = base
            self.offset = PAGE
        self.guard_end = self.guard_start + PAGE
        self.data_start = base + self.offset
        self.data_end = self.data_start + nbytes
        self._data_pages_start = base + (0 if side == "after" else PAGE)
        self._data_pages_len = data_pages * PAGE
        _protect(self.guard_start, PAGE, _PROT_NONE)

    def tensor_like(self, value: torch.Tensor) -> torch.Tensor:
        """A contiguous tensor over this buffer holding `value`'s values."""
        # count >= 1 so an empty tensor's data pointer is still the guarded address
        flat = torch.frombuffer(self._map, dtype=torch.uint8, count=max(self.nbytes, 1), offset=self.offset)
        t = flat[: self.nbytes].view(value.dtype).view(value.shape)
        t.copy_(value)
        return t

    def make_read_only(self) -> None:
        _protect(self._data_pages_start, self._data_pages_len, _PROT_READ)

    def hit(self, address: int):
        """(where, offset) when `address` is in this buffer's guard page or data:
        "past the end" / "before the start" with the bytes beyond the data, or
        "inside" with the offset into it; None otherwise."""
        if self.guard_start <= address < self.guard_end:
            if self.side == "after":
                return "past the end", address - self.data_end
            return "before the start", self.data_start - address
        if self.data_start <= address < self.data_end:
            return "inside", address - self.data_start
        return None
