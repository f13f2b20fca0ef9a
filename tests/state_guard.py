"""The process-wide state a test module must leave as it found it: what later
modules read, so that a leak makes tests pass or fail by the order they run in
(tests/conftest.py compares it around every module). Cheap to take: it runs twice
a module."""

from __future__ import annotations

import os
import sys

import torch

import etops
from etops import _native, schemas


def process_state() -> dict[str, object]:
    """Name -> value of each piece of state (the registry's kernels as ExecuTorch
    holds them, the user's schemas, the kernel objects etops cached, the guard's
    timeout, torch's global modes, the environment fresh interpreters inherit)."""
    state: dict[str, object] = {
        "registered kernels (name, key, address)": frozenset(map(tuple, _native.registered_kernels())),
        "etops.set_schema schemas": {name: str(s) for name, s in schemas._user_schemas.items()},
        "torch default dtype": torch.get_default_dtype(),
        "torch grad mode": torch.is_grad_enabled(),
        "torch threads": torch.get_num_threads(),
        "torch deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
        "os.environ": {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"},
    }
    for name, kernel in etops.registry()._kernels.items():
        state[f"cached kernel object {name}"] = id(kernel)
    added = sys.modules.get("etops.conformance.references")
    if added is not None:  # references.add (etops.testing's reference cases) replaces a kernel's reference process-wide
        state["references added (conformance.references.add)"] = {name: id(ref) for name, ref in added._USER.items()}
    server = sys.modules.get("etops.guard.server")
    if server is not None:
        state["etops.guard timeout"] = server._timeout
    return state


def state_changes(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """What differs, one line each, for the pieces both snapshots hold (a kernel
    object made for the first time, a module imported for the first time, is not a
    change). The environment is told key by key: a variable changed or removed,
    or one of etops' own (``ETOPS_*``) added (libraries add others on first use,
    torch's ``TORCHINDUCTOR_CACHE_DIR`` say)."""
    changes = []
    for key in before.keys() & after.keys():
        if key == "os.environ":
            old, new = before[key], after[key]
            assert isinstance(old, dict) and isinstance(new, dict)
            changes += [f"os.environ[{k!r}]: {old.get(k)!r} -> {new.get(k)!r}"
                        for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)
                        and (k in old or k.startswith("ETOPS"))]
        elif isinstance(before[key], frozenset) and before[key] != after[key]:
            old, new = before[key], after[key]
            assert isinstance(old, frozenset) and isinstance(new, frozenset)
            changes.append(f"{key}: gone {_short(sorted(old - new, key=repr))}, new {_short(sorted(new - old, key=repr))}")
        elif before[key] != after[key]:
            changes.append(f"{key}: {_short(before[key])} -> {_short(after[key])}")
    return sorted(changes)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."
