"""Upstream's LLM custom-ops library (``llama::*``, ``preprocess::*`` kernels and their
torch ops): its namespaces and its loading, for ``etops check`` and for ``etops dev``
on a file of ``extension/llm/custom_ops`` (which needs its operators' schemas and
the kernels it replaces) and for ``etops gtest`` on their tests. Core module: imports
the standard library and torch only.

Upstream's module (custom_ops.py) imports ``torch._inductor.lowering`` for two Inductor
lowerings, and, unless its .so is loaded already, ``portable_lib``, which imports
``executorch.exir``: together 3-4 CPU seconds, more than the rest of a quick ``etops
dev`` round. ``load_llm_custom_ops`` loads the .so first and imports the module with
its two lowerings recorded, registered when ``torch._inductor.lowering`` is imported
(by torch.compile, say): the same library, meta kernels and lowerings, without
either import."""

from __future__ import annotations

import importlib
import sys
from typing import Any

#: the namespaces of the kernels ExecuTorch's LLM custom-ops library registers
LLM_NAMESPACES = ("llama::", "preprocess::")
#: the module of upstream's package that loads its library (whose .so defines the
#: preprocess ops for torch too)
LIBRARY = "executorch.extension.llm.custom_ops.custom_ops"
#: the package LIBRARY is in, next to its .so
_PACKAGE = "executorch.extension.llm.custom_ops"
#: the .so upstream's module loads (one, anywhere under the package; its own glob)
_SO_GLOB = "**/*custom_ops_aot_lib.*"
#: the Inductor module LIBRARY imports for its lowerings
_LOWERING = "torch._inductor.lowering"


def load_llm_custom_ops() -> None:
    """Imports upstream's LLM custom-ops package and the module of it that loads
    its library (the llama::* and preprocess::* kernels, and their ATen
    implementations and meta kernels for torch), hiding what the torchao it may
    import warns and logs; its Inductor lowerings are registered when
    ``torch._inductor.lowering`` is imported, now if it is already. ImportError
    when the package or its library cannot be loaded."""
    import logging
    import warnings

    if LIBRARY in sys.modules:
        return
    logger = logging.getLogger("torchao")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            package = importlib.import_module(_PACKAGE)
            _load_shared_library(package)
            if _LOWERING in sys.modules:
                importlib.import_module(LIBRARY)
            else:
                _import_lowerings_deferred()
    finally:
        logger.setLevel(level)


def _load_shared_library(package) -> None:
    """Loads the package's libcustom_ops_aot_lib.so into torch (the operators it
    defines and the ExecuTorch kernels it registers), as LIBRARY would after
    importing portable_lib; nothing when the package has not exactly one (LIBRARY
    then finds it, or says why not). It loads executorch's pybindings extension
    (a library it needs), whose platform layer etops takes back, as it does when
    portable_lib imports it (_runtime_patch)."""
    from pathlib import Path

    import torch

    from . import _native

    found = [p for folder in package.__path__ for p in Path(folder).glob(_SO_GLOB)]
    if len(found) == 1:
        torch.ops.load_library(str(found[0]))
        _native.install_pal()


class _Lowerings:
    """Stands in for ``torch._inductor.lowering`` while LIBRARY is imported: its
    ``register_lowering(...)(fn)`` calls are recorded; ``lowerings`` (LIBRARY's ``L``)
    is an empty dict until the real module's replaces it."""

    def __init__(self) -> None:
        self.calls: list = []
        self.lowerings: dict = {}

    def register_lowering(self, *args, **kwargs):
        def record(fn):
            self.calls.append((args, kwargs, fn))
            return fn

        return record


def _import_lowerings_deferred() -> None:
    """Imports LIBRARY with a stand-in for ``torch._inductor.lowering`` (which is not
    imported) and has its recorded lowerings registered once the real module is
    imported (import_hooks.after_import), LIBRARY's ``L`` made its ``lowerings``, as
    LIBRARY's own import would have left them; imports it plainly when LIBRARY asks
    the stand-in for another name (an upstream version this was not written for:
    nothing of it ran yet)."""
    import types

    from .import_hooks import after_import

    recorded = _Lowerings()
    stand_in: Any = types.ModuleType(_LOWERING)
    stand_in.lowerings = recorded.lowerings
    stand_in.register_lowering = recorded.register_lowering
    sys.modules[_LOWERING] = stand_in
    library: Any = None
    try:
        library = importlib.import_module(LIBRARY)
    except ImportError as exc:
        if exc.name != _LOWERING:
            raise
    finally:
        if sys.modules.get(_LOWERING) is stand_in:
            del sys.modules[_LOWERING]
    if library is None:
        importlib.import_module(LIBRARY)
        return

    def register(lowering) -> None:
        for args, kwargs, fn in recorded.calls:
            lowering.register_lowering(*args, **kwargs)(fn)
        library.L = lowering.lowerings

    after_import(_LOWERING, register)


def import_module(name: str):
    """Imports module `name` and returns it: LIBRARY through load_llm_custom_ops
    (without the imports it does not need), any other plainly."""
    if name == LIBRARY:
        load_llm_custom_ops()
    return importlib.import_module(name)
