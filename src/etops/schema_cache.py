"""The schemas of the operators whose defining modules are slow to import
(schemas.NAMESPACE_MODULES: several import executorch.exir, seconds), kept on disk
so that the next process knows them without the import: ``etops list`` and
``etops show`` then cost little more than ``import torch``.

One JSON file per torch and executorch version (and FORMAT): operator name -> its
schema text, or None when even after the import no package defines it. Written
after a namespace's modules were imported, read instead of importing them. A
schema torch already knows in this process (defined by the user, or by a module
already imported) always wins over the file (schemas.py asks torch first).
Core module: imports torch, etops._native's build info and cache_files only."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import torch

from ._native import build_info
from .cache_files import cache_root, read_json, write_json

#: bumped when the file's layout or meaning changes, and when schemas.NAMESPACE_MODULES does
FORMAT = 1

_lock = threading.Lock()
_known: dict[str, str | None] | None = None  # the file's contents, read once


def _path() -> Path:
    key = hashlib.sha256(repr((FORMAT, build_info.TORCH_VERSION, build_info.EXECUTORCH_VERSION)).encode()).hexdigest()[:16]
    return cache_root() / f"schemas-{key}.json"


def _contents() -> dict[str, str | None]:
    global _known
    if _known is None:
        found = read_json(_path())
        _known = found if isinstance(found, dict) else {}
    return _known


def lookup(name: str) -> tuple[bool, str | None]:
    """(whether the file knows `name`, its schema text or None when no package
    defines it)."""
    with _lock:
        known = _contents()
        return (name in known, known.get(name))


def _defined(namespace: str) -> dict[str, str | None]:
    """Every operator torch defines in `namespace` now: name -> schema text."""
    prefix = namespace + "::"
    found: dict[str, str | None] = {}
    for qualified in torch._C._dispatch_get_all_op_names():
        if qualified.startswith(prefix):
            op, _, overload = qualified.partition(".")
            try:
                found[f"{op}.{overload or 'default'}"] = str(torch._C._get_schema(op, overload))
            except RuntimeError:
                continue
    return found


_scanned: set[str] = set()  # namespaces whose operators this process recorded


def remember(namespace: str, asked: str, asked_schema: str | None) -> None:
    """Records what was found for `asked` after its namespace's modules were
    imported (its schema text, or None), and the first time per process every
    operator torch now defines in `namespace`; writes the file when that changed it."""
    found = {} if namespace in _scanned else _defined(namespace)
    _scanned.add(namespace)
    found[asked] = asked_schema
    with _lock:
        known = _contents()
        if all(k in known and known[k] == v for k, v in found.items()):
            return
        known.update(found)
        write_json(_path(), known)
