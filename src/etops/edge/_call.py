"""One edge op on its ExecuTorch kernel: ``etops.edge.call`` and ``on_executorch()``.

The out variant of a functional op comes from exir's own conversion (the one
``ToOutVarPass`` uses before emission): ``EdgeOpOverload.to_out_variant()`` and
``get_out_args_from_opoverload`` for edge ops, ``exir.operator.convert.to_out_variant``
for plain ATen overloads. The kernel name is the one the emitter writes into the
``.pte`` (``namespace::op`` plus ``.overload`` unless it is ``default``).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any

import torch
from executorch.exir.dialects.edge._ops import EdgeOpOverload
from executorch.exir.operator.convert import (
    _get_overload_schema,
    get_out_args_from_opoverload,
    to_out_variant,
)
from executorch.exir.passes.executorch_prim_ops_registry import (
    _EXECUTORCH_SYM_OPS,
    _PYTHON_SYM_OPS_TO_EXECUTORCH_SYM_OPS,
)
from torchgen.model import SchemaKind

from .. import registry
from ..errors import KernelNotFoundError
from ..layouts import is_dense
from ..meta_safety import runs_on_meta
from ..out_shapes import specs_of_result
from ..tensors import to_meta
from ..resize import quiet_ids

__all__ = ["call", "kernel_for", "kernel_name", "on_executorch", "resolve"]


def kernel_name(op) -> str:
    """The name ExecuTorch's emitter gives the kernel of an OpOverload (edge,
    backend or ATen): ``aten::add.out``, ``aten::relu.out``, ``aten::sym_size.int``."""
    schema = op._schema
    name = schema.name
    overload = schema.overload_name
    return name if overload in ("", "default") else f"{name}.{overload}"


def _display(op) -> str:
    if isinstance(op, (EdgeOpOverload, torch._ops.OpOverload)):
        return kernel_name(op)
    return getattr(op, "__name__", repr(op))


@dataclass(frozen=True)
class Resolved:
    """How an op runs on ExecuTorch: ``kind`` is "out" (functional op through its
    out variant, outs to allocate), "direct" (the op itself is the kernel: out
    variants, in-place ops, symbolic scalar ops) ."""

    op: object
    kind: str
    kernel: Any
    kernel_name: str
    out_names: tuple[str, ...]
    out_schema_args: frozenset  #: argument names the kernel's schema has
    functional: Any  #: the ATen op that infers the out shapes (kind "out")


_resolved: dict = {}
_resolved_lock = threading.Lock()


def _schema_kind(op):
    schema = _get_overload_schema(op._op if isinstance(op, EdgeOpOverload) else op)
    return schema.kind() if schema is not None else None


def resolve(op) -> Resolved:
    """The ExecuTorch kernel an op runs on, found as ``to_executorch()`` finds it.
    Raises KernelNotFoundError naming the op and the out variant looked for."""
    try:
        found = _resolved.get(op)
    except TypeError:
        found = None
    if found is not None:
        return found
    found = _resolve(op)
    with _resolved_lock:
        _resolved[op] = found
    return found


def _get(name: str, op, looked_for: str):
    try:
        return registry().get_kernel(name)
    except KernelNotFoundError as exc:
        raise KernelNotFoundError(
            f"{_display(op)} has no ExecuTorch kernel: {looked_for} {name} is not registered"
            + (f" (did you mean {', '.join(exc.suggestions)}?)" if exc.suggestions else ""),
            name,
            exc.suggestions,
        ) from None


def _resolve(op) -> Resolved:
    # Python symbolic-scalar ops (operator.add on SymInts ...): the emitter writes
    # executorch_prim ops for them.
    try:
        prim = _PYTHON_SYM_OPS_TO_EXECUTORCH_SYM_OPS.get(op)
    except TypeError:
        prim = None
    if prim is not None:
        name = kernel_name(prim)
        kernel = _get(name, op, "the symbolic scalar kernel")
        return Resolved(op, "direct", kernel, name, (), frozenset(a.name for a in prim._schema.arguments), None)
    if not isinstance(op, (EdgeOpOverload, torch._ops.OpOverload)):
        raise TypeError(f"etops.edge: {op!r} is not an operator overload (an EdgeOpOverload, a torch OpOverload or a symbolic scalar op)")
    aten = op._op if isinstance(op, EdgeOpOverload) else op
    kind = _schema_kind(op)
    if op in _EXECUTORCH_SYM_OPS or aten in _EXECUTORCH_SYM_OPS or kind in (SchemaKind.out, SchemaKind.inplace) or (
        kind is None
    ):
        # Kernels registered under the op's own name.
        name = kernel_name(op)
        kernel = _get(name, op, "the kernel")
        out_names = get_out_args_from_opoverload(aten) if kind == SchemaKind.out else ()
        return Resolved(op, "direct", kernel, name, tuple(out_names), frozenset(a.name for a in op._schema.arguments), None)
    try:
        if isinstance(op, EdgeOpOverload):  # BackendOpOverload included
            target = op.to_out_variant()
            out_names = get_out_args_from_opoverload(target)
        else:
            target, out_names = to_out_variant(op)
    except (RuntimeError, AssertionError) as exc:
        # No out variant in torch: ExecuTorch may still register a kernel under the
        # functional name (custom ops); otherwise say what was looked for.
        name = kernel_name(op)
        if name in registry():
            kernel = registry().get_kernel(name)
            return Resolved(op, "direct", kernel, name, (), frozenset(a.name for a in op._schema.arguments), None)
        raise KernelNotFoundError(
            f"{_display(op)} has no ExecuTorch kernel: exir finds no out variant for it ({str(exc).splitlines()[0]})",
            name,
        ) from None
    name = kernel_name(target)
    kernel = _get(name, op, "its out variant")
    return Resolved(op, "out", kernel, name, tuple(out_names), frozenset(a.name for a in target._schema.arguments), aten)


def kernel_for(op):
    """The etops kernel object an op runs on (``etops.registry().get_kernel(...)``)."""
    return resolve(op).kernel


# ---- out allocation -------------------------------------------------------------------


def empty_like_spec(shape, dtype, stride=None) -> torch.Tensor:
    """An out for the kernel: dense, with torch's strides when they are dense
    (ExecuTorch's dim order), contiguous otherwise."""
    shape = tuple(int(s) for s in shape)
    if stride is not None:
        stride = tuple(int(s) for s in stride)
        if is_dense(shape, stride):
            return torch.empty_strided(shape, stride, dtype=dtype)
    return torch.empty(shape, dtype=dtype)


def infer_outs(resolved: Resolved, args, kwargs):
    """Allocated outs (name -> tensor or None) by the shapes torch's meta kernel of
    the functional op infers (ATen on the real inputs when the meta kernel cannot
    say: data-dependent shapes); None when torch fails altogether."""
    try:
        if not runs_on_meta(resolved.functional):
            raise NotImplementedError("a native kernel behind the meta key")  # ATen on the real inputs, below
        result = resolved.functional(*to_meta(tuple(args)), **to_meta(dict(kwargs)))
    except Exception:  # noqa: BLE001 - meta kernels refuse data-dependent shapes
        try:  # ... and meta inputs with a `device=cpu` argument: ask ATen itself
            result = resolved.functional(*args, **kwargs)
        except Exception:  # noqa: BLE001 - the kernel object sizes what it can
            return None
    outs: dict[str, Any] = {}
    for name, spec in specs_of_result(result, resolved.out_names).items():
        if spec is None:
            outs[name] = None
        elif isinstance(spec, list):
            outs[name] = [empty_like_spec(*s) for s in spec]
        else:
            outs[name] = empty_like_spec(*spec)
    return outs


def call_resolved(resolved: Resolved, args, kwargs, outs=None, planned: bool = False):
    """Runs the kernel of a resolved op. ``outs`` (name -> tensor) overrides the
    allocation (``edge.run`` allocates from the graph's tensor specs);
    ``planned``: the outs passed in kwargs are the program's own allocations."""
    if resolved.kind == "direct":
        if not planned or not resolved.out_names:
            return resolved.kernel(*args, **kwargs)
        mine = _own_outs({n: kwargs.get(n) for n in resolved.out_names}, {})
        quiet = quiet_ids()
        quiet |= mine
        try:
            return resolved.kernel(*args, **kwargs)
        finally:
            quiet -= mine
    given = {n: kwargs[n] for n in resolved.out_names if kwargs.get(n) is not None}
    # exir keeps the functional op's positional args and pools only the keyword
    # args the out variant has.
    pooled = {k: v for k, v in kwargs.items() if k in resolved.out_schema_args and k not in resolved.out_names}
    if len(given) != len(resolved.out_names):
        if outs is None:
            # shapes and dtypes from the functional op with all its arguments
            # (``dtype`` of _to_dim_order_copy is the out's dtype, not an argument)
            outs = infer_outs(resolved, args, {k: v for k, v in kwargs.items() if k not in resolved.out_names})
        if outs is None:  # data-dependent: the kernel object allocates
            return resolved.kernel(*args, **pooled, **given)
        outs = {**outs, **given}
    else:
        outs = given
    mine = _own_outs(outs, given)
    quiet = quiet_ids()
    quiet |= mine
    try:
        result = resolved.kernel(*args, **pooled, **outs)
    finally:
        quiet -= mine
    if result is None:  # `-> ()` out variants (tensor-list outs)
        values = [outs[n] for n in resolved.out_names]
        return values[0] if len(values) == 1 else tuple(values)
    return result


def _own_outs(outs: dict, given: dict) -> set:
    """ids of the outs etops.edge allocated (upper bounds of dynamic shapes the
    kernel may shrink, as ExecuTorch's memory planning allocates them): the
    foundation does not warn when a kernel resizes those."""
    ids = set()
    for name, value in outs.items():
        if name in given:
            continue
        for t in value if isinstance(value, list) else [value]:
            if t is not None:
                ids.add(id(t))
    return ids


def call(op, *args, **kwargs):
    """Runs an edge op (``exir_ops.edge.aten.add.Tensor``), a torch OpOverload or a
    symbolic scalar op on the ExecuTorch kernel ``to_executorch()`` would pick: the
    out variant exir converts it to, outs allocated by the shapes torch infers
    (pass them as keywords, by the out variant's names, to reuse your own)."""
    return call_resolved(resolve(op), args, kwargs)


# ---- on_executorch() ----------------------------------------------------------------

_local = threading.local()
_patch_lock = threading.Lock()
_patch_users = 0
_original_call = None


def _plain(value) -> bool:
    """Whether an argument can go to an ExecuTorch kernel (not a fake, meta or
    traced tensor: tracing keeps running ATen)."""
    if isinstance(value, torch.Tensor):
        return type(value) in (torch.Tensor, torch.nn.Parameter) and value.device.type == "cpu"
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(v) for v in value.values())
    return not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))


def _patched_call(self, *args, **kwargs):
    if getattr(_local, "depth", 0) and _plain(args) and _plain(kwargs) and not torch.compiler.is_compiling():
        return call(self, *args, **kwargs)
    return _original_call(self, *args, **kwargs)


@contextlib.contextmanager
def on_executorch():
    """Within the block, every EdgeOpOverload called on this thread (directly or
    through a GraphModule: ``edge.exported_program().module()(x)``) runs its
    ExecuTorch kernel. Other threads keep ATen; on exit EdgeOpOverload is restored
    (the class attribute itself, once no thread is inside the block). Calls on
    fake or meta tensors (tracing) keep running ATen."""
    global _patch_users, _original_call
    with _patch_lock:
        if _patch_users == 0:
            _original_call = EdgeOpOverload.__dict__["__call__"]
            EdgeOpOverload.__call__ = _patched_call
        _patch_users += 1
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1
        with _patch_lock:
            _patch_users -= 1
            if _patch_users == 0:
                # _original_call stays set: a thread already inside _patched_call
                # (outside any block) still goes on to ATen through it.
                EdgeOpOverload.__call__ = _original_call


def is_on_executorch() -> bool:
    """Whether this thread is inside ``on_executorch()``."""
    return bool(getattr(_local, "depth", 0))

