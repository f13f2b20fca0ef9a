"""Materializing a fuzz case: the Python values of the value specs strategies.py
draws (tensors of a shape, dtype, layout and value kind from a seed, lists, numbers,
odd objects), and the copies and byte snapshots the worker compares them by.

Imports torch, numpy and fuzz.classes only.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import classes


def _values(shape, dtype, seed, values):
    if values in classes.VALUE_KINDS:
        return classes.values(shape, dtype, values)
    g = torch.Generator().manual_seed(seed)
    n = math.prod(shape)
    if values in ("index", "oob_high", "oob_low"):
        lo, hi = {"index": (-1, 4), "oob_high": (50, 1000), "oob_low": (-1000, -50)}[values]
        t = torch.randint(lo, hi, (n,), generator=g)
    elif dtype.is_floating_point or dtype.is_complex:
        t = torch.rand((n,), generator=g, dtype=torch.float64) * 6 - 3
        if values == "special" and n:
            picks = torch.randint(0, 6, (n,), generator=g)
            t = torch.where(picks == 0, float("nan"), t)
            t = torch.where(picks == 1, float("inf"), t)
            t = torch.where(picks == 2, float("-inf"), t)
            t = torch.where(picks == 3, 0.0, t)
    elif dtype == torch.bool:
        t = torch.randint(0, 2, (n,), generator=g)
    else:
        lo = 0 if dtype == torch.uint8 else -5
        t = torch.randint(lo, 6, (n,), generator=g)
        if values == "special" and n:
            t[0] = 0
    return t.to(dtype).reshape(shape)


def make_tensor(spec):
    """The tensor (or numpy array) of a "T" spec: shape, dtype, layout, seed and value kind."""
    _, shape, dtype_name, layout, seed, values = spec
    dtype = getattr(torch, dtype_name)
    if layout == "big":
        return torch.empty((0, 2**31), dtype=dtype)
    if layout == "rank17":
        return torch.zeros([1] * 17, dtype=dtype)
    if layout == "meta":
        return torch.empty(shape, dtype=dtype, device="meta")
    t = _values(tuple(shape), dtype, seed, values)
    if isinstance(layout, (tuple, list)) and layout[0] == "p":
        perm = list(layout[1])
        inverse = [perm.index(i) for i in range(len(perm))]
        return t.permute(perm).contiguous().permute(inverse)
    if layout == "cl" and t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if layout == "nd" and t.dim() >= 1:
        big = torch.zeros(tuple(shape[:-1]) + (shape[-1] * 2,), dtype=dtype)
        big[..., ::2] = t
        return big[..., ::2]
    if layout == "ex" and t.dim() >= 1:
        return t[..., :1].expand(t.shape) if t.shape[-1] else t
    if layout in ("np", "np_ro"):
        if dtype in (torch.bfloat16,):
            return t
        arr = t.numpy().copy()
        if layout == "np_ro":
            arr.flags.writeable = False
        return arr
    return t


def materialize(spec):
    """The Python value of a value spec (strategies.py lists them): tensors, lists, numbers, odd objects."""
    tag = spec[0]
    if tag == "T":
        return make_tensor(spec)
    if tag == "L":
        return [materialize(s) for s in spec[1]]
    if tag == "V":
        value = spec[1]
        if isinstance(value, str) and value.startswith("torch."):  # dtypes spelled in findings.py
            return getattr(torch, value[len("torch.") :])
        return list(value) if isinstance(value, list) else value
    if tag == "OBJ":
        return object()
    if tag == "DICT":
        return {1: 2}
    if tag == "HUGE_INTS":
        return [1] * spec[1]
    if tag == "HUGE_TENSORS":
        return [torch.zeros(1) for _ in range(spec[1])]
    raise ValueError(f"unknown value spec {spec!r}")


def torch_copy(value):
    """A copy ATen may write: a numpy array or tensor copied (a meta tensor as it is), lists item by item."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, torch.Tensor):
        return value.clone() if value.device.type != "meta" else value
    if isinstance(value, list):
        return [torch_copy(v) for v in value]
    return value


def tensor_bytes(t):
    """(shape, bytes) of a tensor or numpy array, to compare before and after a call; None for other values."""
    if isinstance(t, np.ndarray):
        return (t.shape, t.tobytes())
    if isinstance(t, torch.Tensor):
        if t.device.type == "meta":
            return (tuple(t.shape), b"")
        flat = torch.empty(t.numel(), dtype=t.dtype)
        flat.copy_(t.detach().reshape(-1))
        if flat.dtype == torch.bool:
            flat = flat.to(torch.uint8)
        return (tuple(t.shape), bytes(flat.view(torch.uint8).numpy().tobytes()) if flat.numel() else b"")
    return None
