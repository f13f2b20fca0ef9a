"""Tensor conversion: the torch objects etops works on, from what a caller passes
(torch tensors, DLPack producers such as numpy arrays, numpy scalars), and meta
copies of them. A leaf of the core: imports torch only (numpy when a value is one).
"""

from __future__ import annotations

import torch


def python_scalar(value):
    """numpy scalars (np.float32(1.5)) as the Python numbers torch's parser takes;
    a 0-d array stays a tensor."""
    if (
        not isinstance(value, (torch.Tensor, bool, int, float, complex))
        and type(value).__name__ != "ndarray"
        and getattr(value, "shape", None) == ()
        and hasattr(value, "item")
    ):
        return value.item()
    return value


def from_dlpack(value) -> torch.Tensor:
    """torch.from_dlpack(value), except that a numpy array with negative strides
    (which torch.from_dlpack cannot take: it ends the process) comes as a
    contiguous copy: its values, not its memory."""
    if type(value).__module__ == "numpy" and any(s < 0 for s in getattr(value, "strides", ())):
        import numpy

        return torch.from_numpy(numpy.ascontiguousarray(value))
    return torch.from_dlpack(value)


def to_meta(value):
    """`value` with every tensor (torch or DLPack producer) replaced by a meta tensor
    of the same shape, strides and dtype; lists and tuples keep their type."""
    value = python_scalar(value)
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    if isinstance(value, (list, tuple)):
        return type(value)(to_meta(v) for v in value)
    if hasattr(value, "__dlpack__") and not isinstance(value, type):
        return to_meta(from_dlpack(value))
    return value


def as_torch(value):
    """`value` with DLPack producers (numpy arrays) and numpy scalars as torch
    objects; torch tensors and everything else unchanged."""
    value = python_scalar(value)
    if isinstance(value, (list, tuple)):
        return type(value)(as_torch(v) for v in value)
    if isinstance(value, torch.Tensor) or not hasattr(value, "__dlpack__"):
        return value
    return from_dlpack(value)
