"""Tensors in memory between two inaccessible guard regions, for one guarded call
in a child process (etops.guard).

A GuardedBuffer is one anonymous mapping: a PROT_NONE guard region, the data pages,
another PROT_NONE guard region. The data ends flush against the region after it
(side "after") or starts right after the region before it (side "before"). Each
region is `reach` bytes (by default DEFAULT_REACH or the tensor's own size if
larger), reserved without backing memory, so that an access that far outside the
tensor faults in its own buffer's region, never in a neighbour's memory. An input
the kernel must not write is made read-only once filled. A buffer released after
its call (child.py, once the outcome holds copies) gives its mapping to the next
buffer of the same size: its guard regions stay inaccessible, its data pages are
made writable again and overwritten. Imports the standard library and torch only.
"""

from __future__ import annotations

import ctypes
import mmap

import torch

PAGE = mmap.PAGESIZE
#: the bytes of each guard region by default: a mebibyte (a quarter of a million
#: floats; address space only, it costs what a page costs) or the tensor's own size
#: when larger; farther accesses are placed by an attribution run
DEFAULT_REACH = 1 << 20
#: the largest guard region an attribution run reserves (address space only)
MAX_REACH = 1 << 32
_MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)  # Linux's value where Python does not name it
_FLAGS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_PROT_NONE, _PROT_READ, _PROT_READ_WRITE = 0, 1, 3
_MAP_FAILED = ctypes.c_void_p(-1).value


def _protect(address: int, length: int, prot: int) -> None:
    if _libc.mprotect(address, length, prot) != 0:
        raise OSError(ctypes.get_errno(), f"mprotect({address:#x}, {length}) failed")


class _Mapping:
    """One anonymous mapping, unmapped when the last object holding it goes (the
    buffer, and the ctypes array every tensor over it holds)."""

    __slots__ = ("start", "length", "read_only")

    def __init__(self, length: int):
        self.start, self.length = 0, 0  # nothing to unmap if the mmap fails
        self.read_only = True  # its data pages (all of it PROT_NONE until a buffer opens them)
        start = _libc.mmap(None, length, _PROT_NONE, _FLAGS, -1, 0)
        if start is None or start == _MAP_FAILED:
            raise OSError(ctypes.get_errno(), f"mmap of {length} bytes failed")
        self.start, self.length = int(start), length

    def __del__(self):
        if self.length:
            _libc.munmap(self.start, self.length)


#: released mappings kept for the next guarded call, per (data pages' length, reach):
#: an mmap, its munmap and the first touch of fresh pages cost more than a small call
_FREE: dict[tuple[int, int], list] = {}
#: mappings kept at most, and the bytes of their data pages at most (each stays resident)
FREE_LIMIT, FREE_BYTES = 64, 64 << 20
_free_count = _free_bytes = 0
#: tensors kept per mapping for reuse (tensor_like)
_VIEWS_PER_MAPPING = 8


def pages(nbytes: int) -> int:
    """`nbytes` rounded up to whole pages."""
    return -(-nbytes // PAGE) * PAGE


class GuardedBuffer:
    """`nbytes` of memory between two guard regions of `reach` bytes (None: the
    default; smaller when an address-space limit leaves less), flush against the
    one on `side` ("after" or "before")."""

    def __init__(self, nbytes: int, side: str, reach: int | None = None):
        if side not in ("after", "before"):
            raise ValueError(f"GuardedBuffer: argument 'side' must be 'after' or 'before', got {side!r}")
        self.nbytes, self.side = nbytes, side
        data_len = max(PAGE, pages(nbytes))
        self.reach = pages(min(MAX_REACH, max(reach or DEFAULT_REACH, nbytes, PAGE)))
        self._released = False
        reused = _take(data_len, self.reach)
        #: tensors over the data pages already made, by (offset, nbytes, dtype, shape,
        #: strides): kept with the mapping when it is released (never by the mapping:
        #: a tensor holds it), so the next buffer over it fills one of the same kind
        self._views: dict = {}
        if reused is not None:  # a released buffer's mapping: its guard regions never became accessible
            mapping, self._array, self._views = reused
        else:
            # all of it PROT_NONE (address space only), then the data pages made
            # accessible: one mmap and one mprotect, as many calls as a single guard page
            while True:
                try:
                    mapping = _Mapping(data_len + 2 * self.reach)
                    break
                except OSError:  # an address-space limit (RLIMIT_AS): regions as large as it allows
                    if self.reach <= PAGE:
                        raise
                    self.reach = pages(self.reach // 2)
            self._array = (ctypes.c_char * mapping.length).from_address(mapping.start)
            self._array.mapping = mapping  # torch.frombuffer holds the array, the array the mapping
        self._mapping = mapping
        self.map_start, self.map_end = mapping.start, mapping.start + mapping.length
        self._data_pages_start, self._data_pages_len = self.map_start + self.reach, data_len
        self.offset = self.reach + (data_len - nbytes if side == "after" else 0)
        self.data_start = self.map_start + self.offset
        self.data_end = self.data_start + nbytes
        if mapping.read_only:  # a reused mapping's data pages are writable unless its last input made them read-only
            _protect(self._data_pages_start, data_len, _PROT_READ_WRITE)
            mapping.read_only = False

    def tensor_like(self, value: torch.Tensor) -> torch.Tensor:
        """A tensor over this buffer holding `value`'s values, laid out as `value`
        (its strides, which must cover its elements exactly: a dense tensor in any
        dim order, as child.py passes them)."""
        key = (self.offset, self.nbytes, value.dtype, value.shape, value.stride())
        views = self._views
        t = views.get(key)
        if t is None or t.shape != value.shape or t.stride() != value.stride():  # (a call may have reshaped it)
            # count >= 1 so an empty tensor's data pointer is still the guarded address
            flat = torch.frombuffer(self._array, dtype=torch.uint8, count=max(self.nbytes, 1), offset=self.offset)
            elements = flat[: self.nbytes].view(value.dtype)
            t = elements.as_strided(value.shape, value.stride()) if value.numel() else elements.view(value.shape)
            if len(views) >= _VIEWS_PER_MAPPING:
                views.clear()
            views[key] = t
        t.copy_(value)
        return t

    def release(self) -> None:
        """Gives the mapping back for a later buffer of the same size (within
        FREE_LIMIT and FREE_BYTES; else it is unmapped when the last tensor over it
        goes). Call it once no tensor over this buffer will be used again: a later
        buffer overwrites its data."""
        global _free_count, _free_bytes
        if self._released:
            return
        self._released = True
        if _free_count < FREE_LIMIT and _free_bytes + self._data_pages_len <= FREE_BYTES:
            _FREE.setdefault((self._data_pages_len, self.reach), []).append((self._mapping, self._array, self._views))
            _free_count += 1
            _free_bytes += self._data_pages_len

    def make_read_only(self) -> None:
        _protect(self._data_pages_start, self._data_pages_len, _PROT_READ)
        self._mapping.read_only = True

    def record(self, label: str) -> tuple:
        """What the caller needs to map a fault back to this buffer: (label,
        map_start, map_end, data_start, data_end, reach)."""
        return (label, self.map_start, self.map_end, self.data_start, self.data_end, self.reach)


def _take(data_len: int, reach: int):
    """A released (mapping, array, views) of this size, or None."""
    global _free_count, _free_bytes
    free = _FREE.get((data_len, reach))
    if not free:
        return None
    _free_count -= 1
    _free_bytes -= data_len
    return free.pop()
