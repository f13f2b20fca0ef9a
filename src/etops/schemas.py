"""Where a kernel's schema comes from: torch's operator registry, after importing
(lazily, only when a schema of that namespace is needed) the Python module that
defines the namespace with torch.library; or a schema string the user gives."""

from __future__ import annotations

import threading
from typing import Any

import torch

from . import llm_library, schema_cache

#: namespace -> modules whose import defines its operators in torch.library.
#: Imported on first need only: several pull in executorch.exir (seconds); what they
#: define is kept on disk (schema_cache; bump its FORMAT when this table changes).
NAMESPACE_MODULES: dict[str, tuple[str, ...]] = {
    "quantized_decomposed": (
        "torch.ao.quantization.fx._decomposed",
        "executorch.kernels.quantized",
        "executorch.exir.passes._quant_patterns_and_replacements",
    ),
    "dim_order_ops": ("executorch.exir.passes.dim_order_ops_registry",),
    "executorch_prim": ("executorch.exir.passes.executorch_prim_ops_registry",),
    "et_copy": ("executorch.exir.passes._device_copy_ops_registry",),
    "llama": ("executorch.extension.llm.custom_ops.custom_ops",),
}

_user_schemas: dict[str, torch._C.FunctionSchema] = {}
_loaded: set[str] = set()
_lock = threading.Lock()


def split_name(name: str) -> tuple[str, str, str]:
    """'aten::add.out' -> ('aten', 'add', 'out'); an overload-less name gets 'default'."""
    if "::" not in name:
        raise ValueError(f"operator name {name!r} must look like 'namespace::op.overload'")
    namespace, rest = name.split("::", 1)
    op, _, overload = rest.partition(".")
    return namespace, op, overload or "default"


def _load_namespace(namespace: str) -> None:
    with _lock:
        if namespace in _loaded:
            return
        _loaded.add(namespace)
    for module in NAMESPACE_MODULES.get(namespace, ()):
        try:
            llm_library.import_module(module)
        except Exception:  # an optional definer; the schema may still come from elsewhere
            continue


def _overload_now(namespace: str, op: str, overload: str) -> Any:
    """torch's OpOverload if torch defines it in this process already, else None."""
    try:
        return getattr(getattr(getattr(torch.ops, namespace), op), overload)
    except (AttributeError, RuntimeError):
        return None


def torch_overload(name: str) -> Any:
    """torch's OpOverload for `name`, or None when no installed package defines it."""
    namespace, op, overload = split_name(name)
    found = _overload_now(namespace, op, overload)
    if found is None and namespace != "aten":
        _load_namespace(namespace)
        found = _overload_now(namespace, op, overload)
    return found


def set_schema(name: str, schema: str) -> torch._C.FunctionSchema:
    """Gives etops the schema of an operator no installed package defines
    (for example ``"executorch_prim::mod.int(int a, int b) -> int"``). Takes
    effect for kernel objects made afterwards (``registry().get_kernel(name,
    schema=...)`` remakes the cached one)."""
    parsed = torch._C.parse_schema(schema)
    namespace, op, overload = split_name(name)
    if parsed.name != f"{namespace}::{op}" or (parsed.overload_name or "default") != overload:
        raise ValueError(f"schema {schema!r} names {parsed.name}.{parsed.overload_name}, not {name}")
    _user_schemas[name] = parsed
    return parsed


_UNKNOWN = "no installed package defines this operator for torch; give one with etops.set_schema(name, schema)"


def find_schema(name: str) -> tuple[torch._C.FunctionSchema | None, str]:
    """(schema, where it came from) for `name`; (None, reason) when none is known."""
    namespace, op, overload = split_name(name)
    for spelling in (name, f"{namespace}::{op}.{overload}", f"{namespace}::{op}"):
        if spelling in _user_schemas:
            return _user_schemas[spelling], "given by the user"
    if namespace in NAMESPACE_MODULES:
        # the namespace's modules are slow to import: what an earlier process learned
        known, text = schema_cache.lookup(name)
        found = _overload_now(namespace, op, overload)  # what torch knows here wins
        if found is None and known:
            return (torch._C.parse_schema(text), "torch.ops") if text is not None else (None, _UNKNOWN)
        if not known:
            _load_namespace(namespace)
            found = _overload_now(namespace, op, overload)
            schema_cache.remember(namespace, name, str(found._schema) if found is not None else None)
    else:
        found = torch_overload(name)
    if found is not None:
        return found._schema, "torch.ops"
    return None, _UNKNOWN
