"""The C core of etops (``_core``) and the loading of ExecuTorch's shared libraries.

Importing this package loads, once per process, the executorch wheel's
``libexecutorch.so`` (the runtime and its kernel registry) and its kernel
libraries, whose static initialisers register the kernels. It reuses libraries
that ``executorch.runtime`` already loaded: the dynamic loader keys them by path,
so every user in the process shares one registry.

Private to the core: ``_core`` is the package's compiled extension (C in *.c, a thin C++ bridge in *.cpp behind etops_bridge.h). May import: the stdlib only. The core imports it, and so do the extensions that bind
native code of their own (custom, delegate, bench.threads).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os

#: Kernel libraries of the executorch wheel, loaded in this order when present.
KERNEL_LIBRARIES = (
    "libexecutorch_threadpool.so",
    "libexecutorch_kernels_optimized.so",
    "libexecutorch_kernels_quantized.so",
)


def executorch_lib_dir() -> str:
    """The ``lib/`` folder of the installed executorch wheel (found without importing it)."""
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("etops needs the executorch package (pip install executorch==1.5.1)")
    return os.path.join(list(spec.submodule_search_locations)[0], "lib")


def _load_runtime() -> dict[str, ctypes.CDLL]:
    lib_dir = executorch_lib_dir()
    loaded = {}
    # RTLD_GLOBAL so that _core's NEEDED libexecutorch.so resolves to this very copy.
    runtime = os.path.join(lib_dir, "libexecutorch.so")
    loaded["libexecutorch.so"] = ctypes.CDLL(runtime, mode=ctypes.RTLD_GLOBAL)
    for name in KERNEL_LIBRARIES:
        path = os.path.join(lib_dir, name)
        if os.path.exists(path):
            loaded[name] = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    return loaded


#: The ExecuTorch libraries this process has loaded, by file name.
LIBRARIES = _load_runtime()

from ._core import (  # noqa: E402
    MAX_ARGS,
    MAX_DIM,
    Kernel,
    configure,
    drain_logs,
    error_name,
    guard_signals,
    install_pal,
    lookup,
    make_key,
    registered_kernels,
    registry_generation,
    set_layout_preserve,
    tensor_meta,
)

__all__ = [
    "LIBRARIES",
    "MAX_ARGS",
    "MAX_DIM",
    "Kernel",
    "configure",
    "drain_logs",
    "error_name",
    "executorch_lib_dir",
    "guard_signals",
    "install_pal",
    "lookup",
    "make_key",
    "registered_kernels",
    "registry_generation",
    "set_layout_preserve",
    "tensor_meta",
]
