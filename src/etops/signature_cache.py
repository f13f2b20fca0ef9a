"""Caches of torch's answers about a call, keyed by the call's argument signature
(tensors by shape, strides and dtype, everything else by type and value): the out
shapes torch's meta kernels give (out_shapes.py) and whether torch's checks accept a
call (kernel.py). The answers depend on the operator and the signature only, never
on the kernel object asking, so one cache serves every kernel object of an operator
(an edit swapped in, its base, each ``etops dev --watch`` round) and lives as long
as the process.

A process forked to run calls and be thrown away (``etops dev``'s task processes)
hands the entries it made back with its results (``made_here`` there, ``keep``
here), so that later forks start with them and no process works one out twice;
``entries`` and ``keep`` let a later process start with them too (etops.dev.learned).
``asked()`` is called each time torch was asked (a meta kernel run: the first one in
a process imports torch._dynamo, seconds), for whoever times a call around it
(``after_asking``: etops.conformance.case_clock restarts its case's time there).
Core module: imports torch and etops.tensors only.
"""

from __future__ import annotations

from typing import Any

import torch

from .tensors import from_dlpack

#: name -> SignatureCache, for made_here / keep
_CACHES: dict[str, "SignatureCache"] = {}
_changes = [0]  # entries stored in any cache so far (changes())


def signature(value) -> Any:
    """A hashable summary of an argument: tensors by shape, strides and dtype,
    everything else by type and value (TypeError when a value is not hashable)."""
    if isinstance(value, torch.Tensor):
        return ("T", tuple(value.shape), value.stride(), value.dtype)
    if isinstance(value, (list, tuple)):
        return tuple(signature(v) for v in value)
    if hasattr(value, "__dlpack__"):
        return signature(from_dlpack(value))
    hash(value)
    return (type(value), value)  # 2, 2.0 and True are equal but promote differently


class SignatureCache:
    """One process-wide cache, emptied when it holds `limit` entries."""

    def __init__(self, name: str, limit: int):
        self.name, self.limit = name, limit
        self._entries: dict = {}
        self._made: list = []  # keys put here since the last made_here()
        _CACHES[name] = self

    def get(self, key) -> Any:
        return self._entries.get(key)

    def put(self, key, value) -> None:
        self._store(key, value)
        self._made.append(key)
        if len(self._made) > self.limit:  # nobody takes them: only the latest could go back
            del self._made[: len(self._made) // 2]

    def _store(self, key, value) -> None:
        if len(self._entries) >= self.limit:
            self._entries.clear()
        if key not in self._entries:
            _changes[0] += 1
        self._entries[key] = value

    def clear(self) -> None:
        self._entries.clear()
        self._made.clear()


def made_here() -> dict:
    """Every cache's entries put in this process since the last call: cache name ->
    {key: value}, for a forked process to hand back (keep)."""
    made = {}
    for name, cache in _CACHES.items():
        entries = {key: cache._entries[key] for key in cache._made if key in cache._entries}
        cache._made.clear()
        if entries:
            made[name] = entries
    return made


#: called after torch was asked about a call (after_asking)
_AFTER_ASKING: list = []


def after_asking(callback) -> None:
    """`callback()` is called each time torch was asked about a call (once however
    often it is registered)."""
    if callback not in _AFTER_ASKING:
        _AFTER_ASKING.append(callback)


def asked() -> None:
    """torch was just asked about a call (its meta kernel ran): the after_asking callbacks."""
    for callback in list(_AFTER_ASKING):
        callback()


def changes() -> int:
    """How many entries this process has stored so far (its own and those kept):
    unchanged means nothing new to write (etops.dev.learned)."""
    return _changes[0]


def entries() -> dict:
    """Every cache's entries: cache name -> {key: value} (keep() takes them back)."""
    return {name: dict(cache._entries) for name, cache in _CACHES.items() if cache._entries}


def keep(made: dict) -> None:
    """Keeps the entries another process made (its made_here())."""
    for name, entries in made.items():
        cache = _CACHES.get(name)
        if cache is not None:
            for key, value in entries.items():
                cache._store(key, value)
