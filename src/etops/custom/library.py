"""etops.load_library: shared libraries whose static initialisers register kernels.

ExecuTorch aborts the process when a library registers a name + key that is
already registered. So before loading a library here, etops loads it in a probe
process (a fork of this one: etops.child_process.ChildCall) whose registry has been
emptied (every entry made a free slot), reads what the library registered there,
and refuses the library, naming the kernels, when any of them is live here. Only
then does it load the library in this process.
"""

from __future__ import annotations

import collections
import ctypes
import os

from .. import _native
from ..child_process import ChildCall
from ..errors import DuplicateKernelError, RegistrationError, RegistryFullError
from .registration import loaded_libraries, registry_lock

#: seconds a probe may take to load a library
PROBE_LIMIT = 120.0


def _registered_on_load(path: str) -> list[tuple[str, str | None]]:
    """In a probe process: the registry emptied (every entry a free slot), the
    library loaded; (name, key) of what its static initialisers registered."""
    _native._core._reg_hide_all()
    before = len(_native.registered_kernels())
    ctypes.CDLL(path)
    return [(name, key) for name, key, _ in _native.registered_kernels()[before:]]


def probe(path: str) -> list[tuple[str, str | None]]:
    """(name, key) of every kernel the library registers when loaded, found in a
    probe process (a fork of this one, etops.child_process, whose registry is
    emptied first, so it cannot abort)."""
    found = ChildCall(lambda: _registered_on_load(path)).result(limit=PROBE_LIMIT)
    if found.kind == "returned":
        return found.value
    if found.kind == "raised":
        why = found.error.strip().splitlines()[-1]
    elif found.kind == "timed out":
        why = f"the probe process took longer than {PROBE_LIMIT:.0f} s"
    else:
        why = f"the probe process {found.ended()}"
    raise RegistrationError(f"cannot load {path}: {why}")


def load_library(path) -> list[str]:
    """Loads a shared library built against the executorch wheel whose static
    initialisers register kernels, after checking (in a probe process) that none of
    them is registered already: a duplicate is refused with DuplicateKernelError
    naming the kernels, the library not loaded. Returns the names it registered."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    with registry_lock:
        if path in loaded_libraries:
            return list(loaded_libraries[path])
        new = probe(path)
        live = {(name, key) for name, key, _ in _native.registered_kernels()}
        dups = sorted({f"{name} ({key or 'fallback'})" for name, key in new if (name, key) in live})
        if dups:
            raise DuplicateKernelError(
                f"{os.path.basename(path)} would register kernels already registered (ExecuTorch would abort the "
                f"process): {', '.join(dups)}; not loaded"
            )
        counts = collections.Counter((n, k) for n, k in new)
        inner = sorted({f"{n} ({k or 'fallback'})" for (n, k), count in counts.items() if count > 1})
        if inner:
            raise DuplicateKernelError(f"{os.path.basename(path)} registers the same kernel twice: {', '.join(inner)}; not loaded")
        if len(_native.registered_kernels()) + len(new) > _native._core.REG_CAPACITY:
            raise RegistryFullError(f"{os.path.basename(path)} registers {len(new)} kernels; ExecuTorch's registry has no room for them")
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        names = sorted({name for name, _ in new})
        loaded_libraries[path] = names
    _native._core.reg_touch()  # kernel objects re-resolve: the registry grew behind etops
    return names

