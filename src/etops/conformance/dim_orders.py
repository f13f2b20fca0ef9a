"""Conformance hooks of ``etops check --dim-orders MODE``: which kernels honour the
dim order of their inputs. The same sweep, with every dense input laid out anew
(same values):

- ``channels-last``: rank-4 inputs channels-last, rank-5 ones channels-last-3d, the
  one non-contiguous order an exported program gives a kernel (where the model asks
  for that memory format); etops passes them zero-copy, as a program does. A
  mismatch or crash here is a kernel bug a program can hit.
- ``reversed``: rank >= 2 inputs in the reversed dim order (``[1, 0]``,
  ``[3, 2, 1, 0]``), passed with their true dim order (``etops.layout("preserve")``):
  no program produces these; a mismatch is a kernel that ignores dim orders.

In the report a **mismatch** is a kernel that reads memory as if contiguous,
**unsupported** one that refuses the order (a KernelError: the right answer) and
**pass** one that handles it. Imports the core only.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from ..layouts import layout


def _relaid(value, lay):
    if isinstance(value, (list, tuple)):
        return type(value)(_relaid(v, lay) for v in value)
    if not isinstance(value, torch.Tensor) or not value.is_contiguous() or value.numel() < 2:
        return value
    return lay(value)


def _reversed(t: torch.Tensor) -> torch.Tensor:
    if t.dim() < 2:
        return t
    flipped = tuple(range(t.dim() - 1, -1, -1))
    return t.permute(flipped).contiguous().permute(flipped)


def _channels_last(t: torch.Tensor) -> torch.Tensor:
    if t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if t.dim() == 5:
        return t.contiguous(memory_format=torch.channels_last_3d)
    return t


class _Mode:
    """The hooks of one mode (see the module doc)."""

    def __init__(self, lay, preserve: bool):
        self._lay, self._preserve = lay, preserve

    def inputs(self, case, args, kwargs):
        return [_relaid(a, self._lay) for a in args], {k: _relaid(v, self._lay) for k, v in kwargs.items()}

    def calling(self, case):
        return layout("preserve") if self._preserve else nullcontext()


reversed_orders = _Mode(_reversed, preserve=True)
channels_last = _Mode(_channels_last, preserve=False)

#: --dim-orders value -> hooks spec
MODES = {"reversed": f"{__name__}:reversed_orders", "channels-last": f"{__name__}:channels_last"}
