"""Keeps etops working whichever of it and executorch's Python modules comes first.

- Extends ``executorch.runtime``'s OperatorRegistry with etops' kernel objects:
  ``Runtime.get().operator_registry.aten.add.out`` and ``.get_kernel(name)``.
- Re-installs etops' ExecuTorch platform layer (logging, abort notice) after
  executorch's pybindings extension loads, since it installs its own.

etops must not import executorch.runtime itself (it pulls in executorch.exir,
seconds of import): what is already imported is handled now, the rest right after
it is first imported (import_hooks.after_import).
"""

from __future__ import annotations

from .hooks import extension
from .import_hooks import after_import

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


def install() -> None:
    """Extends executorch.runtime and takes the platform layer back from executorch's
    pybindings: now for what is imported, else right after its import."""
    after_import(_RUNTIME, _extend)
    after_import(_PYBINDINGS, _reinstall_pal)
