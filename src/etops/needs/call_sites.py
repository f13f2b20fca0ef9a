"""Every kernel and delegate call of a deserialized program, per method (execution
plan), chain and instruction, with what each argument is in the program's values
table. Knows nothing of this process's registry.

The tensors a call's kernel key is built from follow ExecuTorch's loader
(``Method::resolve_operator`` in runtime/executor/method.cpp): the call's arguments
in order, outs included (an out variant lists its out twice, as argument and as
return), keeping only the Tensor values; TensorList and optional TensorList
arguments are not part of the key. A tensor's dim order is the one serialized."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import dtypes
from ..errors import ProgramFileError


@dataclass(frozen=True)
class Argument:
    """One argument of a call: a value of the method's values table."""

    index: int  #: position in the method's values table
    kind: str  #: 'Tensor', 'TensorList', 'OptionalTensorList', 'Int', 'Double', 'Bool', 'IntList', 'Null', ...
    dtype: int | None = None  #: ExecuTorch ScalarType of a tensor
    dim_order: tuple[int, ...] | None = None
    sizes: tuple[int, ...] | None = None  #: serialized sizes (upper bounds for a dynamic shape)
    dynamic: bool = False  #: the tensor's shape may change between runs
    value: Any = None  #: a scalar's value; a list's items (value indices or numbers)

    def describe(self) -> str:
        if self.kind == "Tensor":
            dtype, order = self.tensor_meta()
            text = f"{dtypes.dtype_name(dtype)}{list(self.sizes or ())} dim_order={list(order)}"
            return text + (" (dynamic)" if self.dynamic else "")
        if self.kind in ("Int", "Double", "Bool", "String"):
            return f"{self.kind}({self.value!r})"
        if self.kind == "Null":
            return "None"
        return f"{self.kind}[{len(self.value or ())}]"

    def tensor_meta(self) -> tuple[int, tuple[int, ...]]:
        """(ScalarType, dim order) of a Tensor argument, as its kernel key lists it."""
        if self.dtype is None or self.dim_order is None:
            raise ValueError(f"value {self.index} ({self.kind}) is not a tensor with a dtype and dim order")
        return self.dtype, self.dim_order


@dataclass(frozen=True)
class KernelCallSite:
    """One KernelCall instruction."""

    method: str
    chain: int
    instruction: int
    operator: str  #: 'ns::op.overload' as ExecuTorch looks it up ('ns::op' without overload)
    arguments: tuple[Argument, ...]
    tensors: tuple[tuple[int, tuple[int, ...]], ...]  #: (ScalarType, dim order) in kernel-key order
    list_tensors: tuple[Argument, ...] = field(default=())  #: tensors inside TensorList arguments (not in the key)


@dataclass(frozen=True)
class DelegateCallSite:
    """One DelegateCall instruction."""

    method: str
    chain: int
    instruction: int
    backend: str  #: the backend id the program asks for (e.g. 'XnnpackBackend')
    delegate_index: int
    arguments: tuple[Argument, ...]


def _argument(index: int, evalue) -> Argument:
    val = evalue.val
    kind = type(val).__name__
    if kind == "Tensor":
        dynamic = int(getattr(val.shape_dynamism, "value", val.shape_dynamism)) != 0
        return Argument(index, kind, int(val.scalar_type), tuple(val.dim_order), tuple(val.sizes), dynamic)
    if kind == "Int":
        return Argument(index, kind, value=val.int_val)
    if kind == "Bool":
        return Argument(index, kind, value=bool(val.bool_val))
    if kind == "Double":
        return Argument(index, kind, value=float(val.double_val))
    if kind == "String":
        return Argument(index, kind, value=val.string_val)
    if hasattr(val, "items"):
        return Argument(index, kind, value=tuple(val.items))
    return Argument(index, kind)


def _values(label: str, plan, indices, what: str) -> list[Argument]:
    out = []
    for i in indices:
        if not 0 <= i < len(plan.values):
            raise ProgramFileError(f"{label}: method {plan.name!r}: {what} uses value {i}, the method has {len(plan.values)} values")
        out.append(_argument(i, plan.values[i]))
    return out


def _operator_name(label: str, plan, op_index: int) -> str:
    if not 0 <= op_index < len(plan.operators):
        raise ProgramFileError(f"{label}: method {plan.name!r}: operator index {op_index} out of range ({len(plan.operators)} operators)")
    op = plan.operators[op_index]
    return f"{op.name}.{op.overload}" if op.overload else op.name


def call_sites(label: str, program) -> tuple[list[KernelCallSite], list[DelegateCallSite]]:
    """Every kernel call and delegate call of every method of `program` (an exir
    ``Program``), in execution-plan, chain and instruction order (control flow's
    branches are instructions of the same chain)."""
    kernels, delegates = [], []
    for plan in program.execution_plan:
        for c, chain in enumerate(plan.chains):
            for n, instruction in enumerate(chain.instructions):
                args = instruction.instr_args
                kind = type(args).__name__
                where = f"instruction {n} of chain {c}"
                if kind == "KernelCall":
                    arguments = _values(label, plan, args.args, where)
                    tensors = tuple(a.tensor_meta() for a in arguments if a.kind == "Tensor")
                    in_lists = [
                        item
                        for a in arguments
                        if a.kind in ("TensorList", "OptionalTensorList")
                        for item in _values(label, plan, [i for i in a.value if i >= 0], where)
                        if item.kind == "Tensor"
                    ]
                    name = _operator_name(label, plan, args.op_index)
                    kernels.append(KernelCallSite(plan.name, c, n, name, tuple(arguments), tensors, tuple(in_lists)))
                elif kind == "DelegateCall":
                    if not 0 <= args.delegate_index < len(plan.delegates):
                        raise ProgramFileError(
                            f"{label}: method {plan.name!r}: {where} calls delegate {args.delegate_index}, "
                            f"the method has {len(plan.delegates)}"
                        )
                    backend = plan.delegates[args.delegate_index].id
                    arguments = _values(label, plan, args.args, where)
                    delegates.append(DelegateCallSite(plan.name, c, n, backend, args.delegate_index, tuple(arguments)))
    return kernels, delegates
