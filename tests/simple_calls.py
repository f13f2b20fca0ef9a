"""Simple calls of every registered aten kernel, for sweeps over the call path: each
kernel's arguments built from its torch schema (a float tensor of one of a few
shapes for each Tensor, zeros for indices, 1 / [1] / 0.5 / 2 / False for numbers,
defaults and None elsewhere), kept when it has a tensor input, the kernel accepts
them and computes the same result twice (random kernels are left out). No OpInfo:
one call per kernel."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch

import etops
from etops.schemas import torch_overload

_SHAPES = [(2, 3), (1, 2, 3, 3)]
_NUMBERS = {"int": 1, "SymInt": 1, "float": 0.5, "bool": False, "number": 2, "List[int]": [1], "List[SymInt]": [1]}


@dataclass
class SimpleCall:
    """One accepted call: the kernel, its arguments (outs left out), its result as a
    tuple of tensors and its out names in result order."""

    name: str
    kernel: Any
    overload: Any
    kwargs: dict
    results: tuple
    outs: tuple

    def make_outs(self, make) -> dict | None:
        """Outs for the call, make(result) for each result (a list out takes them
        all), or None when its outs do not line up with its results."""
        lists = [str(a.type) == "List[Tensor]" for a in self.overload._schema.arguments if a.name in self.outs]
        if lists == [True]:
            return {self.outs[0]: [make(r) for r in self.results]}
        if any(lists) or len(self.outs) != len(self.results):
            return None
        return {n: make(r) for n, r in zip(self.outs, self.results)}

    def with_tensors(self, change) -> dict:
        """The arguments with each tensor t (list items too) replaced by change(t)."""
        return {n: _map_tensors(v, change) for n, v in self.kwargs.items()}


def _map_tensors(value, change):
    if isinstance(value, torch.Tensor):
        return change(value)
    if isinstance(value, list):
        return [_map_tensors(v, change) for v in value]
    return value


def _value(arg, shape):
    kind = str(arg.type)
    if kind == "Tensor":
        return torch.zeros(shape, dtype=torch.long) if arg.name in ("index", "indices") else torch.randn(shape)
    if kind == "List[Tensor]":
        return [torch.randn(shape), torch.randn(shape)]
    if arg.default_value is not None or (kind.startswith("Optional[") and arg.has_default_value()):
        return ...  # its default
    if kind.startswith("Optional["):
        return _NONE  # given, as torch's schema wants it
    return _NUMBERS.get(kind)


def _as_tuple(result) -> tuple:
    """A result as a flat tuple (a list of tensors flattened)."""
    items = result if isinstance(result, (tuple, list)) else (result,)
    return tuple(x for item in items for x in (item if isinstance(item, list) else [item]))


def _resolved(t: torch.Tensor) -> torch.Tensor:
    return t.resolve_neg().resolve_conj()


def _same(a: tuple, b: tuple, close: bool = False) -> bool:
    def one(x, y) -> bool:
        if not isinstance(x, torch.Tensor):
            return x == y
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        x, y = _resolved(x), _resolved(y)
        if close and x.is_floating_point():
            return torch.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True)
        return torch.equal(x, y) or (x.is_floating_point() and torch.equal(torch.nan_to_num(x), torch.nan_to_num(y)))

    return len(a) == len(b) and all(one(x, y) for x, y in zip(a, b))


def flat(outs: dict) -> tuple:
    """The tensors of make_outs' outs, in result order."""
    return _as_tuple(tuple(outs.values()))


def same_results(a, b, close: bool = False) -> bool:
    """Whether two results (a tensor or a tuple) hold the same values as torch sees
    them (`close`: within float rounding, for a kernel computing in another order)."""
    return _same(_as_tuple(a), _as_tuple(b), close)


def simple_calls() -> list[SimpleCall]:
    """Every registered aten kernel that accepts a simple call, once per process."""
    global _CALLS
    if _CALLS is not None:
        return _CALLS
    reg = etops.registry()
    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in sorted(n for n in reg.operator_names if n.startswith("aten::")):
            overload = torch_overload(name)
            if overload is None or torch.Tag.nondeterministic_seeded in overload.tags:
                continue  # random kernels: ExecuTorch's random numbers are not torch's
            kernel = reg.get_kernel(name)
            outs = tuple(kernel._info.out_names())
            for shape in _SHAPES:
                torch.manual_seed(0)
                values = {a.name: _value(a, shape) for a in overload._schema.arguments if a.name not in outs}
                if any(v is None for v in values.values()):
                    break
                kwargs = {n: None if v is _NONE else v for n, v in values.items() if v is not ...}
                if not any(isinstance(v, torch.Tensor) or (isinstance(v, list) and isinstance(v[0], torch.Tensor))
                           for v in kwargs.values()):
                    break  # no tensor in: nothing to sweep (and empty.out's garbage may match itself)
                try:
                    first = _as_tuple(kernel(**kwargs))
                    again = _as_tuple(kernel(**kwargs))
                except Exception:  # noqa: BLE001 - the kernel does not take these simple arguments
                    continue
                if _same(first, again) and all(isinstance(r, torch.Tensor) for r in first):
                    found.append(SimpleCall(name, kernel, overload, kwargs, first, outs))
                break
    _CALLS = found
    return found


_CALLS: list[SimpleCall] | None = None
_NONE = object()  # an optional argument without a default: given as None
