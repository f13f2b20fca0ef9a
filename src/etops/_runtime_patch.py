"""Extends ``executorch.runtime``'s OperatorRegistry with etops' kernel objects:
``Runtime.get().operator_registry.aten.add.out`` and ``.get_kernel(name)``.

etops must not import executorch.runtime itself (it pulls in executorch.exir,
seconds of import): if it is already imported the class is extended now, else an
import hook extends it right after it is first imported.
"""

from __future__ import annotations

import importlib.abc
import sys

_MODULE = "executorch.runtime"


def _extend(module) -> None:
    cls = getattr(module, "OperatorRegistry", None)
    if cls is None or getattr(cls, "_etops_extended", False):
        return
    from .registry import registry

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(registry(), name)

    def get_kernel(self, name, schema=None):
        """The etops kernel object for ``"namespace::op.overload"``."""
        return registry().get_kernel(name, schema)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(dir(registry())))

    cls.__getattr__ = __getattr__
    cls.get_kernel = get_kernel
    cls.__dir__ = __dir__
    cls._etops_extended = True


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the loader of executorch.runtime so the class is extended once it exists."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _MODULE:
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util

            spec = importlib.util.find_spec(fullname)
        finally:
            pass
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            _extend(module)

        loader.exec_module = exec_module
        return spec


def install() -> None:
    module = sys.modules.get(_MODULE)
    if module is not None:
        _extend(module)
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
