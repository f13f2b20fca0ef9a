"""What crosses the pipes between a guarded call's caller and its guard process:
tagged, length-prefixed frames of pickles in which CPU tensors travel as their
dtype, shape and raw bytes (torch's own tensor pickling goes through
torch.save, ten times slower for the small tensors of a kernel call). Imports
the standard library and torch only."""

from __future__ import annotations

import ctypes
import io
import os
import pickle
import struct

import torch

_LENGTH = struct.Struct("=Q")


def dense_layout(t: torch.Tensor) -> bool:
    """Whether `t` is laid out as programs lay out tensors: contiguous, or
    channels-last at rank 4 or 5 (its memory is then exactly its elements)."""
    if t.is_contiguous():
        return True
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.dim())
    return fmt is not None and t.is_contiguous(memory_format=fmt)


def dense_in_any_order(t: torch.Tensor) -> bool:
    """Whether `t`'s memory is exactly its elements in some dim order (strides a
    permutation of a contiguous tensor's: what etops.layout("preserve") passes on)."""
    dims = sorted((stride, size) for size, stride in zip(t.shape, t.stride()) if size != 1)
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def _rebuilt(dtype: torch.dtype, shape: tuple, strides: tuple, data: bytes) -> torch.Tensor:
    """A tensor of `dtype`, `shape` and (dense) `strides` over `data`, its raw bytes."""
    if not data:
        return torch.empty_strided(shape, strides, dtype=dtype)
    flat = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype)
    return flat.as_strided(shape, strides)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if (type(obj) is torch.Tensor or type(obj) is torch.nn.Parameter) and obj.layout == torch.strided \
                and obj.device.type == "cpu" and not obj.is_quantized:
            t = obj.detach().resolve_conj().resolve_neg()  # lazy bits: not in the bytes
            t = t if dense_in_any_order(t) else t.contiguous()
            nbytes = t.numel() * t.element_size()
            data = ctypes.string_at(t.data_ptr(), nbytes) if nbytes else b""
            return _rebuilt, (t.dtype, tuple(t.shape), tuple(t.stride()), data)
        return NotImplemented


def dumps(obj) -> bytes:
    """`obj` pickled, its CPU tensors as raw bytes (values only, without autograd
    state; dense ones keep their layout, whatever their dim order, others arrive
    contiguous)."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def frame(tag: bytes, body: bytes) -> bytes:
    """One frame: a one-byte tag, the body's length, the body."""
    return tag + _LENGTH.pack(len(body)) + body


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_exact(fd: int, n: int) -> bytes:
    """`n` bytes from `fd`, or fewer when the writer closed it first."""
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame_body(fd: int) -> bytes | None:
    """The body of a frame whose tag was just read; None when the writer died mid-frame."""
    head = read_exact(fd, _LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (n,) = _LENGTH.unpack(head)
    body = read_exact(fd, n)
    return body if len(body) == n else None
