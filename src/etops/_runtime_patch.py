"""Keeps etops working whichever of it and executorch's Python modules comes first.

- Extends ``executorch.runtime``'s OperatorRegistry with etops' kernel objects:
  ``Runtime.get().operator_registry.aten.add.out`` and ``.get_kernel(name)``.
- Re-installs etops' ExecuTorch platform layer (logging, abort notice) after
  executorch's pybindings extension loads, since it installs its own.

etops must not import executorch.runtime itself (it pulls in executorch.exir,
seconds of import): what is already imported is handled now, the rest by an
import hook right after it is first imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

from .hooks import extension

_RUNTIME = "executorch.runtime"
_PYBINDINGS = "executorch.extension.pybindings._C"


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

    def register_kernel(self, name, impl=None, kernel_key=None, **options):
        """``etops.register_kernel(name, source | function pointer | library symbol,
        kernel_key)``: registers an ExecuTorch kernel, returns its handle."""
        return extension("register_kernel")(name, impl, kernel_key, **options)

    cls.__getattr__ = __getattr__
    cls.get_kernel = get_kernel
    cls.register_kernel = register_kernel
    cls.__dir__ = __dir__
    cls._etops_extended = True


def _reinstall_pal(module) -> None:
    """Takes the platform layer back from executorch's pybindings, which install
    their own when they load (etops also takes it back before every call)."""
    from . import _native

    _native.install_pal()


#: module name -> what to do once it is imported
_AFTER_IMPORT = {_RUNTIME: _extend, _PYBINDINGS: _reinstall_pal}


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the loaders of the modules above so their hook runs once they exist."""

    def find_spec(self, fullname, path, target=None):
        hook = _AFTER_IMPORT.get(fullname)
        if hook is None or getattr(self, "_busy", False):
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
            hook(module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    for name, hook in _AFTER_IMPORT.items():
        module = sys.modules.get(name)
        if module is not None:
            hook(module)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
