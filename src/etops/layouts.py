"""Dim orders and dense strides: the one place that turns an ExecuTorch dim order
(outermost dimension first, e.g. ``(0, 2, 3, 1)`` for channels-last) into torch
strides and back, the layout mode of calls (``etops.layout``), and the once-per-kernel
warning of a kernel the rules table records as wrong on a layout (``layout_warning``).

Imports the standard library and etops._native only.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from . import _native

__all__ = ["WrongLayoutWarning", "dim_order_of", "is_dense", "layout", "layout_is_preserved", "layout_name", "strides_for"]

LAYOUT_MODES = ("programs", "preserve")


class layout:  # noqa: N801 - used like a function: etops.layout("preserve")
    """The layouts in which kernel calls receive dense tensors, on this thread.

    ``"programs"`` (the default) gives kernels what an exported program's memory
    planning gives them: contiguous or channels-last tensors. A tensor in any
    other dim order (``w.t()``) is copied to contiguous first, and an out in such
    an order is computed into a contiguous copy and copied back.
    ``"preserve"`` passes every dense tensor zero-copy with its true dim order, for
    kernel authors testing dim-order handling (many kernels ignore dim orders and
    then compute wrong values; docs/layouts.md lists the known ones).

    Use it as a context (``with etops.layout("preserve"): op(...)``) or wrap one
    call (``etops.layout("preserve")(op)(a, b, out=c)``)."""

    def __init__(self, mode: str):
        if mode not in LAYOUT_MODES:
            raise ValueError(f"etops.layout: mode must be one of {list(LAYOUT_MODES)}, not {mode!r}")
        self.mode = mode
        self._previous: list[bool] = []

    def __enter__(self) -> "layout":
        self._previous.append(_native.set_layout_preserve(self.mode == "preserve"))
        return self

    def __exit__(self, *exc: object) -> None:
        _native.set_layout_preserve(self._previous.pop())

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn` wrapped so that each of its calls runs in this layout mode."""

        @functools.wraps(fn)
        def in_mode(*args: Any, **kwargs: Any) -> Any:
            with layout(self.mode):
                return fn(*args, **kwargs)

        return in_mode

    def __repr__(self) -> str:
        return f"etops.layout({self.mode!r})"


class WrongLayoutWarning(UserWarning):
    """A kernel known to compute wrong values on a layout got a tensor in it."""


def layout_name(dim_order: Sequence[int]) -> str:
    """'contiguous', 'channels-last' (rank 4 and 5, as programs lay tensors out) or
    'permuted' (any other dim order)."""
    order, n = tuple(dim_order), len(tuple(dim_order))
    if order == tuple(range(n)):
        return "contiguous"
    if n in (4, 5) and order == (0, *range(2, n), 1):
        return "channels-last"
    return "permuted"


def layout_is_preserved() -> bool:
    """Whether this thread's calls pass permuted tensors as they are."""
    previous = _native.set_layout_preserve(False)
    _native.set_layout_preserve(previous)
    return previous


def strides_for(shape: Sequence[int], dim_order: Sequence[int] | None = None) -> tuple:
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


def dim_order_of(shape: Sequence[int], strides: Sequence[int]) -> tuple | None:
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


def is_dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """True when ``strides`` lay ``shape`` out densely in some dim order (no gaps,
    no overlaps; dims of size 1 may have any stride; an empty shape is dense)."""
    return 0 in tuple(shape) or dim_order_of(shape, strides) is not None


#: (kernel, layout) pairs warned about in this process
_WARNED_LAYOUTS: set = set()


def wrong_layout_message(name: str, finding, argument: str) -> str:
    """What a call (and explain) says when argument `argument` reaches kernel
    `name` in a layout the rules table records it as silently wrong on."""
    return (f"{name} computes wrong values on {finding.layout} inputs, with no error ({finding.found}; docs/layouts.md), "
            f"and argument '{argument}' reaches it {finding.layout}. Pass .contiguous() tensors, or run the call under "
            f"etops.layout('preserve') to pass it as it is on purpose (no warning then)")


def layout_warning(name: str, judging):
    """The C kernel's warn_layout(argument, dim order): warns once per kernel and
    layout (a WrongLayoutWarning) when `judging` records the kernel wrong on it."""

    def warn(argument: str, dim_order: tuple) -> None:
        layout = layout_name(dim_order)
        finding = judging.wrong_on(layout)
        if finding is None or (name, layout) in _WARNED_LAYOUTS:
            return
        _WARNED_LAYOUTS.add((name, layout))
        warnings.warn(wrong_layout_message(name, finding, argument), WrongLayoutWarning, stacklevel=3)

    return warn
