"""Dim orders and dense strides: the one place that turns an ExecuTorch dim order
(outermost dimension first, e.g. ``(0, 2, 3, 1)`` for channels-last) into torch
strides and back.

Imports the standard library only.
"""

from __future__ import annotations

__all__ = ["dim_order_of", "is_dense", "strides_for"]


def strides_for(shape, dim_order=None) -> tuple:
    """Dense strides of ``shape`` laid out in ``dim_order`` (outermost dim first;
    None: contiguous). Sizes of 0 count as 1, as torch does."""
    shape = tuple(int(s) for s in shape)
    order = tuple(range(len(shape))) if dim_order is None else tuple(int(d) for d in dim_order)
    if sorted(order) != list(range(len(shape))):
        raise ValueError(f"dim_order {list(order)} is not a permutation of the {len(shape)} dims of shape {list(shape)}")
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= max(shape[d], 1)
    return tuple(strides)


def dim_order_of(shape, strides) -> tuple | None:
    """The dim order whose dense strides are ``strides`` (ties between dims of size
    1 or equal strides keep the dims in order), None when the strides are not
    dense (gaps, overlaps, broadcast)."""
    shape, strides = tuple(int(s) for s in shape), tuple(int(s) for s in strides)
    if len(shape) != len(strides):
        raise ValueError(f"strides {list(strides)} do not match shape {list(shape)}")
    order = tuple(sorted(range(len(shape)), key=lambda d: -strides[d]))
    expected = strides_for(shape, order)
    same = all(shape[d] == 1 or strides[d] == expected[d] for d in range(len(shape)))
    return order if same else None


def is_dense(shape, strides) -> bool:
    """True when ``strides`` lay ``shape`` out densely in some dim order (no gaps,
    no overlaps; dims of size 1 may have any stride; an empty shape is dense)."""
    return 0 in tuple(shape) or dim_order_of(shape, strides) is not None
