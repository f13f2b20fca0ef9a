"""Shrinking a failing case to its smallest input that still fails the same way.

``shrink(func, kernel, args, kwargs, still_fails)`` tries smaller variants of the
inputs, greedily: dense copies of strided tensors, then every size shared by the
tensors cut at once (a dim of size s becomes 1, s // 2 or s - 1 in every tensor
that has it, so shapes that must agree still agree), then one dim of one tensor at
a time. A variant is kept when ATen still accepts it, it has fewer elements, and
``still_fails(args, kwargs)`` says the same finding remains (the caller compares
cluster keys). Values are kept (a variant is a slice of the original tensors).

``shrink_isolated`` runs the search in a forked child, so a variant that kills the
kernel (a smaller input may abort where the larger did not) costs the search, not
the process (etops.child_process's ChildCall). Imports torch and etops.child_process.
"""

from __future__ import annotations

import os

import torch

from ..child_process import ChildCall

#: variants tried per case, at most
MAX_TRIES = 60


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def total_elements(args, kwargs) -> int:
    """Elements of every tensor of a call (what shrinking lowers)."""
    return sum(t.numel() for t in _tensors([args, kwargs]))


def _mapped(value, fn):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_mapped(v, fn) for v in value)
    return value


def _cut(t: torch.Tensor, sizes) -> torch.Tensor:
    """`t` sliced to `sizes` (each at most its own), dense."""
    index = tuple(slice(0, s) for s in sizes)
    return t[index].contiguous() if t.dim() else t.clone()


def _variants(args, kwargs):
    """Smaller variants of a call, most promising first."""
    call = [list(args), dict(kwargs)]
    tensors = _tensors(call)
    if any(not t.is_contiguous() for t in tensors):
        yield _mapped(call, lambda t: t.contiguous())
    sizes = sorted({s for t in tensors for s in t.shape if s > 1}, reverse=True)
    for s in sizes:
        for new in sorted({1, s // 2, s - 1}):
            if 0 < new < s:
                yield _mapped(call, lambda t, s=s, new=new: _cut(t, [new if d == s else d for d in t.shape]))
    for i, target in enumerate(tensors):
        for dim, s in enumerate(target.shape):
            for new in sorted({1, s // 2}):
                if 0 < new < s:
                    def one(t, target=target, dim=dim, new=new):
                        if t is not target:
                            return t
                        shape = list(t.shape)
                        shape[dim] = new
                        return _cut(t, shape)
                    yield _mapped(call, one)


def shrink(func, args, kwargs, still_fails, max_tries: int = MAX_TRIES):
    """The smallest (args, kwargs) found whose ATen call `func` succeeds and for
    which `still_fails(args, kwargs)` is true; the originals when none is smaller.
    Returns (args, kwargs, variants tried)."""
    best = (list(args), dict(kwargs))
    best_size = total_elements(*best)
    tries = 0
    improved = True
    while improved and tries < max_tries:
        improved = False
        for cand_args, cand_kwargs in _variants(*best):
            if tries >= max_tries:
                break
            size = total_elements(cand_args, cand_kwargs)
            if size >= best_size and not any(not t.is_contiguous() for t in _tensors(best)):
                continue
            tries += 1
            try:
                func(*_mapped(cand_args, torch.clone), **{k: _mapped(v, torch.clone) for k, v in cand_kwargs.items()})
            except Exception:  # noqa: BLE001 - ATen refuses the variant
                continue
            if still_fails(cand_args, cand_kwargs):
                best, best_size, improved = (cand_args, cand_kwargs), size, True
                break
    return best[0], best[1], tries


def shrink_isolated(func, args, kwargs, still_fails, max_tries: int = MAX_TRIES):
    """``shrink`` in a forked child (where fork exists): a variant that kills the
    process ends the search there and the originals come back. Returns (args,
    kwargs, tries, how: "shrunk" / "unchanged" / "search died" / "result not readable")."""
    if not hasattr(os, "fork"):
        a, k, tries = shrink(func, args, kwargs, still_fails, max_tries)
        return a, k, tries, "shrunk" if total_elements(a, k) < total_elements(args, kwargs) else "unchanged"
    outcome = ChildCall(lambda: shrink(func, args, kwargs, still_fails, max_tries)).result()
    if outcome.kind == "unreadable":  # a value that does not come back through pickle
        return list(args), dict(kwargs), 0, "result not readable"
    if outcome.kind != "returned":
        return list(args), dict(kwargs), 0, "search died"
    a, k, tries = outcome.value
    return a, k, tries, "shrunk" if total_elements(a, k) < total_elements(args, kwargs) else "unchanged"
