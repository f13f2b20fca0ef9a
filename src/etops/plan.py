"""Schema -> argument plan: what the C call path needs to know about each argument.

A plan is computed once per kernel object from torch's FunctionSchema. It is a
tuple of ``PlanEntry`` (one per schema argument, then the return slot): the C call
path reads each as the plain tuple ``(name, kind, flags, default, extra,
fixed_len)``. The kinds and flags mirror ``etops_native.h``: change both together
(tests/test_plan_header.py parses the header and fails when they differ).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from . import dtypes
from .errors import SchemaError

# Kinds (etops_native.h).
K_TENSOR = 1
K_TENSOR_LIST = 2
K_OPT_TENSOR_LIST = 3
K_SCALAR = 4
K_INT = 5
K_FLOAT = 6
K_BOOL = 7
K_STR = 8
K_INT_LIST = 9
K_FLOAT_LIST = 10
K_BOOL_LIST = 11
K_ENUM = 12
K_RETURN_SLOT = 13

# Flags.
F_OPTIONAL = 1
F_KWONLY = 2
F_OUT = 4
F_HAS_DEFAULT = 8
F_MUTABLE = 16

#: schema type (torch's ``real_type`` spelling, Optional stripped) -> (kind, enum map)
_KINDS: dict[str, tuple[int, dict | None]] = {
    "Tensor": (K_TENSOR, None),
    "List[Tensor]": (K_TENSOR_LIST, None),
    "List[Optional[Tensor]]": (K_OPT_TENSOR_LIST, None),
    "number": (K_SCALAR, None),
    "int": (K_INT, None),
    "SymInt": (K_INT, None),
    "float": (K_FLOAT, None),
    "bool": (K_BOOL, None),
    "str": (K_STR, None),
    "List[int]": (K_INT_LIST, None),
    "List[SymInt]": (K_INT_LIST, None),
    "List[float]": (K_FLOAT_LIST, None),
    "List[bool]": (K_BOOL_LIST, None),
    "ScalarType": (K_ENUM, dtypes.ET_SCALAR_TYPE),
    "MemoryFormat": (K_ENUM, dtypes.ET_MEMORY_FORMAT),
    "Layout": (K_ENUM, dtypes.ET_LAYOUT),
    "Device": (K_ENUM, dtypes.ET_DEVICE),
}

#: Fresh return types a kernel can write into a return slot (prim ops).
_SLOT_RETURNS = {"int", "SymInt", "float", "bool", "number", "Scalar", "SymFloat", "SymBool"}


class PlanEntry(NamedTuple):
    """One argument (or the return slot) of a kernel's plan."""

    name: str  #: the schema's argument name ("<return>" for the return slot)
    kind: int  #: K_* below
    flags: int  #: F_* bits below
    default: Any  #: the schema default (when flags has F_HAS_DEFAULT)
    extra: Any  #: the enum map of an enum argument; for the return slot, the index of the out it aliases (or None)
    fixed_len: int  #: N of an ``int[N]`` argument, else 0


@dataclass(frozen=True)
class Plan:
    """The argument plan of one kernel: ``args`` for the C call path, ``returns``
    (argument index of an out, or ``-(k+1)`` for return slot k), and the names of
    the out arguments."""

    args: tuple
    returns: tuple[int, ...]
    out_names: tuple[str, ...]

    @cached_property
    def arguments(self) -> tuple[tuple[str, int, int], ...]:
        """(name, kind, flags) of each argument, the return slot left out."""
        return tuple((e.name, e.kind, e.flags) for e in self.args if e.kind != K_RETURN_SLOT)


def _strip_optional(type_str: str) -> tuple[str, bool]:
    if type_str.startswith("Optional[") and type_str.endswith("]"):
        return type_str[len("Optional[") : -1], True
    return type_str, False


def _enum_default(value, enum_map):
    """Schema defaults of enum arguments may come as ints: map them to torch objects."""
    if isinstance(value, int) and not isinstance(value, bool):
        for obj, number in enum_map.items():
            if number == value and not isinstance(obj, str):
                return obj
    return value


def build_plan(name: str, schema, return_slot: bool = True) -> Plan:
    """The plan for `schema` (a torch FunctionSchema). Raises SchemaError naming the
    argument whose type ExecuTorch kernels cannot take. Without `return_slot` the
    stack is the arguments alone, as a backend's execute takes it (inputs, outs)."""
    entries = []
    alias_to_arg: dict[str, int] = {}
    out_names = []
    for index, arg in enumerate(schema.arguments):
        type_str, optional = _strip_optional(str(arg.real_type))
        if type_str not in _KINDS:
            raise SchemaError(f"{name}: argument '{arg.name}' has type {arg.real_type}, which etops cannot pass to an ExecuTorch kernel")
        kind, enum_map = _KINDS[type_str]
        flags = 0
        if optional:
            flags |= F_OPTIONAL
        if arg.kwarg_only:
            flags |= F_KWONLY
        written = arg.alias_info is not None and arg.alias_info.is_write
        if arg.is_out:
            flags |= F_OUT
            out_names.append(arg.name)
        elif written:
            flags |= F_MUTABLE
        if written:
            for alias in arg.alias_info.before_set:
                alias_to_arg[str(alias)] = index
        default = None
        if arg.has_default_value():
            flags |= F_HAS_DEFAULT
            default = arg.default_value
            if enum_map is not None:
                default = _enum_default(default, enum_map)
        entries.append(PlanEntry(arg.name, kind, flags, default, enum_map, int(arg.N or 0)))

    # ExecuTorch's boxed kernels take the arguments and then exactly one more slot
    # (codegen's "+1 for the return value"): an out variant finds its (first) out
    # there again, a functional kernel (prim ops) writes its fresh result into it.
    returns: list[int] = []  # argument indices of the outs the results alias
    fresh = []
    for ret in schema.returns:
        if ret.alias_info is not None and ret.alias_info.is_write:
            sets = [str(a) for a in ret.alias_info.before_set]
            if not sets or sets[0] not in alias_to_arg:
                raise SchemaError(f"{name}: return {ret.name or len(returns)} aliases no argument")
            returns.append(alias_to_arg[sets[0]])
        else:
            type_str, _ = _strip_optional(str(getattr(ret, "real_type", ret.type)))
            if type_str not in _SLOT_RETURNS:
                raise SchemaError(
                    f"{name}: returns a fresh {ret.type}, which ExecuTorch's memory planner would provide; "
                    "etops can call kernels whose tensor results are out arguments"
                )
            fresh.append(ret)
    if fresh and (returns or len(fresh) > 1):
        raise SchemaError(f"{name}: returns {len(fresh)} fresh values; an ExecuTorch kernel has one return slot")
    if not return_slot:
        if fresh:
            raise SchemaError(f"{name}: returns a fresh value, which needs a kernel's return slot")
    elif fresh:
        entries.append(PlanEntry("<return>", K_RETURN_SLOT, 0, None, None, 0))
        returns = [-1]
    else:
        first_out = returns[0] if returns else next((i for i, e in enumerate(entries) if e.flags & F_OUT), None)
        entries.append(PlanEntry("<return>", K_RETURN_SLOT, 0, None, first_out, 0))
    return Plan(tuple(entries), tuple(returns), tuple(out_names))
