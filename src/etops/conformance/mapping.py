"""From an ATen call to the ExecuTorch kernel that stands for it.

The mapping is found from schemas, not listed: for an ATen overload that a torch
dispatch mode sees being called,

1. a kernel registered under the very same name (``aten::copy_``,
   ``aten::_local_scalar_dense``) is called as is;
2. otherwise the out variant of the same op: among the schemas of ``aten::<base>``
   (``add_.Tensor`` and ``add.Tensor`` both have base ``add``) the one of kind *out*
   whose torchgen signature (overload name, outs, mutability and TensorOptions
   stripped, returns ignored) equals the called one's - the pairing exir's
   ``to_out_variant`` uses to turn a graph into out variants;
3. for a view op (``t``, ``view``, ``select.int``, ``expand``) the out variant of its
   ``_copy`` twin (``t_copy.out``), as exir's functionalization turns views into copies.

The result is used only when that out variant is a registered ExecuTorch kernel.
"""

from __future__ import annotations

import dataclasses
import functools
import threading

import torch

from ..schemas import split_name


def normalize(name: str) -> tuple[str, str, str]:
    return split_name(name)


def overload_name(func) -> str:
    """``aten::add.Tensor``; ``aten::relu.default`` spelled ``aten::relu``."""
    schema = func._schema
    return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name


@functools.lru_cache(maxsize=None)
def _native(schema_str: str):
    from torchgen.model import FunctionSchema

    try:
        return FunctionSchema.parse(schema_str)
    except Exception:  # noqa: BLE001 - torchgen cannot parse some prim schemas
        return None


def _signature(native, strip_copy: bool = False) -> str:
    return str(dataclasses.replace(native.signature(strip_view_copy_name=strip_copy), returns=()))


@functools.lru_cache(maxsize=None)
def _schemas_of(qualified: str) -> tuple[str, ...]:
    try:
        return tuple(str(s) for s in torch._C._jit_get_schemas_for_operator(qualified))
    except Exception:  # noqa: BLE001
        return ()


def _schema_full_name(native) -> str:
    name = str(native.name.name)
    if "::" not in name:
        name = f"aten::{name}"
    overload = native.name.overload_name
    return f"{name}.{overload}" if overload else name


class KernelMap:
    """ATen overload -> registered ExecuTorch kernel name (or None), cached.

    ``registered``: the registered kernel names (any spelling ExecuTorch uses).
    ``overrides``: ATen overload name -> kernel name, used instead of the search
    (``etops.testing`` uses it to stand a custom kernel in for an ATen op)."""

    def __init__(self, registered, overrides: dict[str, str] | None = None) -> None:
        self._registered = {normalize(n): n for n in registered if n.startswith("aten::")}
        self._overrides = {normalize(k): v for k, v in (overrides or {}).items()}
        self._cache: dict[object, str | None] = {}
        self._lock = threading.Lock()

    @property
    def registered(self) -> list[str]:
        return sorted(self._registered.values())

    def target(self, func) -> str | None:
        found = self._cache.get(func, False)
        if found is not False:
            return found  # type: ignore[return-value]
        try:
            found = self._find(func)
        except Exception:  # noqa: BLE001 - an unparsable schema maps to nothing
            found = None
        with self._lock:
            self._cache[func] = found
        return found

    def _find(self, func) -> str | None:
        name = overload_name(func)
        if not name.startswith("aten::"):
            return None
        key = normalize(name)
        if self._overrides:
            return self._overrides.get(key)
        if key in self._registered:
            return self._registered[key]
        native = _native(str(func._schema))
        if native is None:
            return None
        from torchgen.model import SchemaKind

        if native.kind() not in (SchemaKind.functional, SchemaKind.mutable, SchemaKind.inplace):
            return None
        base = native.name.name.base
        wanted = _signature(native)
        found = self._out_variant(f"aten::{base}", wanted, strip_copy=False)
        if found is None and (func.is_view or base.endswith("_copy") is False and _returns_alias(func)):
            found = self._out_variant(f"aten::{base}_copy", wanted, strip_copy=True)
        return found

    def _out_variant(self, qualified: str, wanted: str, strip_copy: bool) -> str | None:
        from torchgen.model import SchemaKind

        for schema_str in _schemas_of(qualified):
            candidate = _native(schema_str)
            if candidate is None or candidate.kind() != SchemaKind.out:
                continue
            if _signature(candidate, strip_copy) != wanted:
                continue
            registered = self._registered.get(normalize(_schema_full_name(candidate)))
            if registered is not None:
                return registered
        return None


def _returns_alias(func) -> bool:
    """Whether the op returns a view of an input (``split.Tensor`` -> ``Tensor(a)[]``)."""
    for ret in func._schema.returns:
        info = ret.alias_info
        if info is not None and not info.is_write:
            return True
    return False


def functional_names_for(kernel_name: str) -> list[str]:
    """The ATen overloads that map to `kernel_name` (for messages and tests)."""
    ns, op, overload = normalize(kernel_name)
    kmap = KernelMap([kernel_name])
    found = []
    for base in {op, op[: -len("_copy")] if op.endswith("_copy") else op, op + "_"}:
        packet = getattr(torch.ops.aten, base, None)
        if packet is None:
            continue
        for ov in packet.overloads():
            func = getattr(packet, ov)
            if kmap.target(func) == kernel_name and overload_name(func) != kernel_name:
                found.append(overload_name(func))
    return sorted(found)
