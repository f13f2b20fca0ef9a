"""etops.load_library: shared libraries whose static initialisers register kernels.

ExecuTorch aborts the process when a library registers a name + key that is
already registered. So before loading a library here, etops loads it in a probe
process whose registry has been emptied (every entry made a free slot), reads what
the library registered there, and refuses the library, naming the kernels, when any
of them is live here. Only then does it load the library in this process.
"""

from __future__ import annotations

import collections
import ctypes
import json
import os
import subprocess
import sys

from .. import _native
from ..errors import DuplicateKernelError, RegistrationError, RegistryFullError
from .registration import loaded_libraries, registry_lock

_PROBE = r"""
import json, sys, types, os
pkg = types.ModuleType("etops"); pkg.__path__ = [sys.argv[1]]
sys.modules["etops"] = pkg
import etops._native as n
n._core._reg_hide_all()
import ctypes
before = len(n.registered_kernels())
ctypes.CDLL(sys.argv[2])
after = n.registered_kernels()[before:]
print(json.dumps([[name, key] for name, key, _ in after]))
"""


def probe(path: str) -> list[tuple[str, str | None]]:
    """(name, key) of every kernel the library registers when loaded, found in a
    separate process (whose registry is emptied first, so it cannot abort)."""
    pkg_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", _PROBE, pkg_dir, path], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RegistrationError(f"cannot load {path}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else 'the probe process failed'}")
    return [tuple(e) for e in json.loads(proc.stdout.strip().splitlines()[-1])]


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

