"""What to do once a module is imported (``after_import``): now when it is, else right
after its first import finishes, through a finder at the front of ``sys.meta_path``
that wraps that module's loader. _runtime_patch extends executorch.runtime and takes
the platform layer back from executorch's pybindings with it; llm_library registers
the LLM library's deferred Inductor lowerings. Core module: imports the standard
library only."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

#: module name -> what to do once it is imported, in order
_AFTER_IMPORT: dict = {}


def after_import(name: str, hook) -> None:
    """Runs ``hook(module)`` once module `name` is imported: now when it is, else
    right after its first import finishes (before the import statement returns)."""
    module = sys.modules.get(name)
    if module is not None:
        hook(module)
        return
    _AFTER_IMPORT.setdefault(name, []).append(hook)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the loaders of the modules of _AFTER_IMPORT so their hooks run once they exist."""

    def find_spec(self, fullname, path, target=None):
        hooks = _AFTER_IMPORT.get(fullname)
        if not hooks or getattr(self, "_busy", False):
            return None
        self._busy = True  # find the real spec without finding ourselves
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original_exec = spec.loader.exec_module

        def exec_module(module):
            original_exec(module)
            for hook in hooks:
                hook(module)

        spec.loader.exec_module = exec_module
        return spec
