"""ExecuTorch's backend registry: which delegate backends this process has.

The executorch wheel ships its backends as ``lib/libexecutorch_backend_*.so``; each
registers itself when it loads, into the registry of the one ``libexecutorch.so``
etops shares with ``executorch.runtime``. etops loads them on first use (XNNPACK
first), so listing backends or loading a delegate never depends on whether a
``.pte`` ran before.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from dataclasses import dataclass

from .. import _native

#: Backend library loaded before the others (the CPU backend every wheel has).
PREFERRED_BACKEND_LIBRARY = _native.shared_library_name("executorch_backend_xnnpack")

_load_lock = threading.Lock()
_loaded: dict[str, ctypes.CDLL] = {}


def backend_libraries() -> list[str]:
    """Paths of the backend libraries in the executorch wheel, XNNPACK first."""
    paths = glob.glob(os.path.join(_native.executorch_lib_dir(), "libexecutorch_backend_*" + _native.SHARED_LIBRARY_SUFFIX))
    return sorted(paths, key=lambda p: (os.path.basename(p) != PREFERRED_BACKEND_LIBRARY, p))


def load_backend_libraries() -> dict[str, str]:
    """Loads every backend library of the wheel once per process. Returns file name ->
    "" for each loaded library, or the loader's message for one that failed (a
    backend whose own dependencies are missing is left out, not fatal)."""
    status = {}
    with _load_lock:
        for path in backend_libraries():
            name = os.path.basename(path)
            if name in _loaded:
                status[name] = ""
                continue
            try:
                _loaded[name] = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                status[name] = ""
            except OSError as exc:
                status[name] = str(exc)
    return status


@dataclass(frozen=True)
class Backend:
    """One backend of ExecuTorch's registry, under the name ``.pte`` files use."""

    name: str
    available: bool  #: what the backend's is_available() said when listed

    def is_available(self) -> bool:
        """Asks the backend again (it may depend on the hardware or a driver)."""
        for name, available in _native._core.backends():
            if name == self.name:
                return bool(available)
        return False

    def __repr__(self) -> str:
        return f"Backend({self.name!r}, available={self.available})"


def backends() -> list[Backend]:
    """Every backend registered in this process, in registration order, each with its
    availability. Loads the wheel's backend libraries first."""
    load_backend_libraries()
    return [Backend(name, bool(available)) for name, available in _native._core.backends()]


def backend_names() -> list[str]:
    """Names of the registered backends (after loading the wheel's libraries)."""
    return [b.name for b in backends()]
