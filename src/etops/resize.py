"""Outs of the wrong size: torch's out= semantics on ExecuTorch tensors.

ExecuTorch never reallocates a tensor, so etops resizes outs in torch before a
call (as torch's out= does, warning when the out held elements), refuses resizes
an ExecuTorch tensor cannot hold or that would change an input, and mirrors in
torch a shrink the kernel made. Core module: imports torch and the core only.
"""

from __future__ import annotations

import threading
import warnings

import torch

from . import _native
from .overlaps import overlaps


_INT32_MAX = 2**31 - 1


def check_resizes(info, bound: dict, resizes) -> None:
    """Raises ValueError naming the out, before any out is touched, when an out to
    resize is not a torch.Tensor; would get a shape an ExecuTorch tensor cannot
    have (more than MAX_DIM dims, sizes or contiguous strides beyond int32: the
    retried call would refuse it, the out already changed); or is an input or
    shares memory with one (resizing it would change the input under the retried
    call; torch refuses such calls too: "some elements of the input tensor and the
    written-to tensor refer to a single memory location"), or with another out (one
    tensor given as two outs of different shapes)."""
    outs = set(info.out_names())
    inputs: list = []
    given_outs: list = []
    for name, value in bound.items():
        for i, t in enumerate(value) if isinstance(value, (list, tuple)) else [(None, value)]:
            if isinstance(t, torch.Tensor):
                (given_outs if name in outs else inputs).append((name if i is None else f"{name}[{i}]", t))
    targets = {label: tuple(shape) for label, _, shape in resizes}
    for label, out, shape in resizes:
        if not isinstance(out, torch.Tensor):
            raise ValueError(f"{info.name}: out argument '{label}' has shape {tuple(out.shape)}, the result needs {tuple(shape)}, and only a torch.Tensor out can be resized")
        if len(shape) > _native.MAX_DIM:
            raise ValueError(f"{info.name}: out argument '{label}' would be resized to {len(shape)} dims; ExecuTorch supports at most {_native.MAX_DIM}")
        stride = 1
        for size in reversed(shape):
            if size > _INT32_MAX or stride > _INT32_MAX:
                raise ValueError(f"{info.name}: out argument '{label}' would be resized to {list(shape)}, beyond ExecuTorch's int32 sizes and strides")
            stride *= max(size, 1)
        for name, t in inputs:
            if overlaps(out, t, shape):
                raise ValueError(
                    f"{info.name}: out argument '{label}' shares memory with argument '{name}' and must be resized "
                    f"from {list(out.shape)} to {list(shape)}, which would change '{name}' too; "
                    f"pass an out that does not alias '{name}' (or a clone of '{name}')"
                )
        for name, t in given_outs:
            # another out in the same memory: resizing this one changes it too (one
            # tensor given as two outs of different shapes would be resized back and
            # forth); the same tensor resized to the same shape for both is fine
            if name == label or (t is out and targets.get(name) == tuple(shape)):
                continue
            if overlaps(out, t, shape) or overlaps(t, out):
                raise ValueError(
                    f"{info.name}: out argument '{label}' shares memory with out argument '{name}' and must be resized "
                    f"from {list(out.shape)} to {list(shape)}, which would change '{name}' too "
                    f"(it needs {list(targets.get(name, t.shape))}); pass separate outs"
                )


def resize_like_torch(info, out, shape) -> None:
    """Resizes `out` (a tensor of another shape; check_resizes) to `shape` the
    way torch's out= does (warning when it held elements)."""
    if out.numel() != 0 and id(out) not in quiet_ids():
        warn_resized(info, out.shape, shape)
    quiet_ids().add(id(out))
    out.resize_(shape, memory_format=kept_memory_format(out, shape))


#: ids of outs etops itself allocated or already warned about, during one call on
#: this thread: the kernel shrinking them is no news to the user.
_quiet = threading.local()


def quiet_ids() -> set:
    ids = getattr(_quiet, "ids", None)
    if ids is None:
        ids = _quiet.ids = set()
    return ids


def handled_in_this_call(obj) -> bool:
    """Whether `obj` is an out etops allocated, or resized, in the call running on
    this thread (checked already, or fresh: a check of it again is redundant)."""
    return id(obj) in quiet_ids()


def warn_resized(info, old_shape, new_shape) -> None:
    warnings.warn(
        f"{info.name}: an output with one or more elements was resized since it had shape {list(old_shape)}, "
        f"which does not match the required output shape {list(new_shape)}. This behavior is deprecated in torch; "
        "pass an out of the right shape or an empty tensor.",
        UserWarning,
        stacklevel=4,
    )


def kept_memory_format(out: torch.Tensor, shape) -> torch.memory_format:
    """The memory format a resize of `out` to `shape` keeps: channels-last for a
    4-d channels-last out resized to 4 dims, contiguous otherwise."""
    channels_last = out.dim() == 4 and len(shape) == 4 and out.is_contiguous(memory_format=torch.channels_last) and not out.is_contiguous()
    return torch.channels_last if channels_last else torch.contiguous_format
