"""ExecuTorch's kernel registry as Python objects: registry -> namespace -> op ->
overload (the kernel object), the shape of torch.ops.

``reg.aten.add.out`` and ``reg.get_kernel("aten::add.out")`` return the same cached
kernel object. A name that is not registered raises KernelNotFoundError (both an
AttributeError and a KeyError) naming the closest registered names.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Iterable
from typing import Any

from . import _native
from .errors import KernelNotFoundError
from .hooks import extension
from .kernel import KernelInfo, KernelObject, UncallableKernel, make_kernel
from .schemas import find_schema, split_name


def _suggest(wanted: str, candidates: Iterable[str]) -> tuple[str, ...]:
    return tuple(difflib.get_close_matches(wanted, list(candidates), n=3, cutoff=0.5))


def _suggestions(names: dict, asked: str, namespace: str, op: str | None, overload: str | None) -> tuple[str, ...]:
    """The registered names closest to `asked` (`names`: Registry._names): the
    op's other overloads when only the overload is wrong, else up to three close
    names at the same level (namespaces, ops of the namespace, full names)."""
    if op is None:
        return _suggest(asked, names)
    if overload is None:
        return _suggest(asked, [f"{namespace}::{o}" for o in names.get(namespace, ())])
    overloads = names.get(namespace, {}).get(op)
    if overloads is not None:
        return tuple(sorted(overloads.values()))
    return _suggest(asked, [name for ops in names.values() for found in ops.values() for name in found.values()])


class Registry:
    """The process-wide ExecuTorch kernel registry (one per process: use
    ``etops.registry()``)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._kernels: dict[str, KernelObject] = {}
        self._namespaces: dict[str, Namespace] = {}
        # namespace -> op -> overload -> the name exactly as registered
        # ("aten::_local_scalar_dense", "executorch_prim::et_view.default")
        self._names: dict[str, dict[str, dict[str, str]]] = {}
        self._count = -1
        self._refresh()

    # ---- the registry's contents ----------------------------------------------------

    def _refresh(self) -> None:
        """Re-reads the operator names from ExecuTorch (after libraries registered more)."""
        generation = _native.registry_generation()
        entries = _native.registered_kernels()
        with self._lock:
            if len(entries) == self._count and generation == getattr(self, "_generation", None):
                return
            names: dict[str, dict[str, dict[str, str]]] = {}
            for name, _key, _addr in entries:
                if name == _native._core.REG_FREE_NAME:  # a deregistered entry (etops.custom)
                    continue
                namespace, op, overload = split_name(name)
                names.setdefault(namespace, {}).setdefault(op, {})[overload] = name
            self._names = names
            self._count = len(entries)
            self._generation = generation

    @property
    def operator_names(self) -> set[str]:
        """Every registered operator name, as ``executorch.runtime`` lists them."""
        self._refresh()
        return {name for name, _key, _addr in _native.registered_kernels() if name != _native._core.REG_FREE_NAME}

    @property
    def namespaces(self) -> list[str]:
        self._refresh()
        return sorted(self._names)

    def kernels(self) -> list:
        """Every registered operator's kernel object, sorted by name."""
        return [self.get_kernel(n) for n in sorted(self.operator_names)]

    def loaded_kernels(self) -> list:
        """The kernel objects made so far (``get_kernel``'s cache, and each one's
        ``as_program`` kernels), without making more."""
        with self._lock:
            made = list(self._kernels.values())
        return made + [twin for k in made for twin in getattr(getattr(k, "_info", None), "program_twins", list)()]

    # ---- lookup --------------------------------------------------------------------

    def _has(self, namespace: str, op: str | None = None, overload: str | None = None) -> bool:
        ops = self._names.get(namespace)
        if ops is None or op is None:
            return ops is not None
        overloads = ops.get(op)
        if overloads is None or overload is None:
            return overloads is not None
        return overload in overloads

    def _missing(self, namespace: str, op: str | None = None, overload: str | None = None) -> KernelNotFoundError:
        """The error for a name that is not registered; its suggestions are computed
        only when the message is shown (``hasattr`` never needs them)."""
        if op is None:
            asked = namespace
        else:
            asked = f"{namespace}::{op}" + ("" if overload is None or overload == "default" else f".{overload}")
        names = self._names  # _refresh replaces it whole: the names as of this lookup
        return KernelNotFoundError(
            f"no ExecuTorch kernel is registered for {asked}", asked,
            lambda: _suggestions(names, asked, namespace, op, overload))

    def get_kernel(self, name: str, schema: str | None = None) -> KernelObject:
        """The kernel object for ``"namespace::op.overload"`` (cached: the same object
        every time; ``.default`` may be left out). ``schema`` gives the schema of an
        operator no installed package defines for torch. Raises KernelNotFoundError
        when it is not registered."""
        namespace, op, overload = split_name(name)
        if not self._has(namespace, op, overload):
            self._refresh()
            if not self._has(namespace, op, overload):
                raise self._missing(namespace, op, overload)
        registered = self._names[namespace][op][overload]
        if schema is not None:
            from .schemas import set_schema

            set_schema(registered, schema)
            self._kernels.pop(registered, None)
            packet = self._namespaces.get(namespace, None)
            packet = packet.__dict__.get(op) if packet is not None else None
            if packet is not None:
                packet.__dict__.pop(overload, None)
        kernel = self._kernels.get(registered)
        if kernel is not None:
            return kernel
        with self._lock:
            kernel = self._kernels.get(registered)
            if kernel is None:
                found, source = find_schema(registered)
                kernel = make_kernel(registered, found, source)
                self._kernels[registered] = kernel
        return kernel

    def register_kernel(self, name: str, impl: Any = None, kernel_key: Any = None, **options: Any) -> Any:
        """``etops.register_kernel``: registers a kernel (C++ source, function pointer,
        library symbol or Python function) under `name` and `kernel_key` and returns
        its handle, callable like the kernel object."""
        return extension("register_kernel")(name, impl, kernel_key, **options)

    def __getattr__(self, namespace: str) -> "Namespace":
        if namespace.startswith("__"):
            raise AttributeError(namespace)
        ns = self._namespaces.get(namespace)
        if ns is None:
            if not self._has(namespace):
                self._refresh()
                if not self._has(namespace):
                    raise self._missing(namespace)
            ns = self._namespaces.setdefault(namespace, Namespace(self, namespace))
        return ns

    def __dir__(self) -> list[str]:
        self._refresh()
        return sorted(set(object.__dir__(self)) | set(self._names))

    def __contains__(self, name: str) -> bool:
        self._refresh()
        try:
            return self._has(*split_name(name))
        except ValueError:
            return False

    def __repr__(self) -> str:
        self._refresh()
        return f"<ExecuTorch kernel registry: {self._count} kernels in namespaces {', '.join(sorted(self._names))}>"


class Namespace:
    """``reg.aten``: the ops of one namespace as attributes."""

    def __init__(self, registry: Registry, name: str) -> None:
        self._registry = registry
        self._name = name

    def __getattr__(self, op: str) -> "OpPacket":
        if op.startswith("__"):
            raise AttributeError(op)
        reg = self._registry
        if not reg._has(self._name, op):
            reg._refresh()
            if not reg._has(self._name, op):
                raise reg._missing(self._name, op)
        packet = OpPacket(reg, self._name, op)
        setattr(self, op, packet)  # later lookups are plain attribute hits
        return packet

    def __dir__(self) -> list[str]:
        self._registry._refresh()
        return sorted(self._registry._names.get(self._name, {}))

    def __repr__(self) -> str:
        return f"<ExecuTorch kernels in namespace '{self._name}'>"


class OpPacket:
    """``reg.aten.add``: the registered overloads of one op as attributes; calling
    the packet calls its ``default`` overload, as torch.ops does."""

    def __init__(self, registry: Registry, namespace: str, op: str) -> None:
        self._registry = registry
        self._namespace = namespace
        self._op = op

    def __getattr__(self, overload: str) -> KernelObject:
        if overload.startswith("__"):
            raise AttributeError(overload)
        reg = self._registry
        if not reg._has(self._namespace, self._op, overload):
            reg._refresh()
            if not reg._has(self._namespace, self._op, overload):
                raise reg._missing(self._namespace, self._op, overload)
        kernel = reg.get_kernel(reg._names[self._namespace][self._op][overload])
        setattr(self, overload, kernel)
        return kernel

    def overloads(self) -> list[str]:
        self._registry._refresh()
        return sorted(self._registry._names.get(self._namespace, {}).get(self._op, ()))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.default(*args, **kwargs)

    def __dir__(self) -> list[str]:
        return self.overloads()

    def __repr__(self) -> str:
        return f"<ExecuTorch op {self._namespace}::{self._op} with overloads {self.overloads()}>"


_registry: Registry | None = None
_registry_lock = threading.Lock()


def registry() -> Registry:
    """The process-wide registry object."""
    global _registry
    if _registry is None:
        with _registry_lock:
            if _registry is None:
                _registry = Registry()
    return _registry


def get_kernel(name: str, schema: str | None = None) -> KernelObject:
    """``etops.registry().get_kernel(name)``."""
    return registry().get_kernel(name, schema)


def as_program(kernel: Any) -> Any:
    """The kernel as an exported program calls it (what etops' judges call: ``etops
    check``, the fuzzer, ``etops.testing``): the rules table's guards and workarounds
    for known kernel bugs (normalizers, no_work, contiguous_only) do not apply, so the
    verdict is the kernel's own (an ExecuTorch abort raises KernelAborted). Only the
    rules marked ``memory`` stay, whose inputs would corrupt memory or kill the
    process; torch's checks still refuse what torch refuses. `kernel` is a kernel
    object or a name; the result is made once and cached. A delegate or an
    uncallable kernel comes back as it is (there is nothing to switch off)."""
    if isinstance(kernel, str):
        kernel = registry().get_kernel(kernel)
    info = getattr(kernel, "_info", None)
    if not isinstance(info, KernelInfo) or isinstance(kernel, UncallableKernel):
        return kernel
    return info.program_twin(kernel)
