"""One lowered module as a Python callable: backend init once, execute per call.

``load(lowered)`` initialises the lowered module's backend with its processed blob,
compile specs and named data, as a Method would, and wraps the handle in the same C
``Kernel`` object a registered kernel is: the call binds, validates and converts
arguments and sizes the outputs on the foundation's path, from a schema etops
writes for the delegate out of its original subgraph's input and output specs::

    XnnpackBackend::lowered_module_0(Tensor x, *, Tensor(o0!) out) -> Tensor(o0!)

The handle is destroyed (the backend's destroy) when the kernel object goes away.
"""

from __future__ import annotations

import operator
import re
import threading
import weakref
from dataclasses import dataclass

import torch

from .. import _native, dtypes
from ..plan import build_plan
from ..call_failure import kernel_failure
from ..errors import DelegateError, SchemaError
from ..kernel import KernelInfo
from ..tensors import as_torch
from ..overlaps import overlaps
from ..resize import handled_in_this_call
from ..slow_path import SLOW_PATH
from . import backend_registry as _backends
from ..layouts import strides_for
from .lowered import compile_specs, named_data, reference_module

#: schema type of a non-tensor input value
_SCALAR_TYPES = {int: "SymInt", float: "float", bool: "bool"}


@dataclass(frozen=True)
class ValueSpec:
    """One input or output of a delegate, from its original subgraph's metadata."""

    name: str
    kind: str  #: "Tensor", "SymInt", "float" or "bool"
    dtype: torch.dtype | None = None
    shape: tuple = ()  #: ints, or sympy expressions for dynamic dims
    dim_order: tuple[int, ...] = ()

    @property
    def static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    def describe(self) -> str:
        if self.kind != "Tensor":
            return f"{self.name}: {self.kind}"
        order = "" if self.dim_order == tuple(range(len(self.shape))) else f", dim order {list(self.dim_order)}"
        return f"{self.name}: {str(self.dtype).replace('torch.', '')}{list(self.shape)}{order}"


def _dim(size):
    """An int, or the sympy expression of a symbolic size."""
    if isinstance(size, int):
        return size
    node = getattr(size, "node", None)
    expr = getattr(node, "expr", None)
    if expr is not None and getattr(expr, "is_number", False):
        return int(expr)
    return expr if expr is not None else size


def _value_spec(name: str, val) -> ValueSpec:
    if isinstance(val, torch.Tensor):
        shape = tuple(_dim(s) for s in val.shape)
        try:
            order = tuple(int(d) for d in val.dim_order())
        except Exception:  # noqa: BLE001 - symbolic strides torch cannot order
            order = tuple(range(val.dim()))
        return ValueSpec(name, "Tensor", val.dtype, shape, order)
    for py_type, kind in _SCALAR_TYPES.items():
        if isinstance(val, py_type) or type(val).__name__ == f"Sym{py_type.__name__.capitalize()}":
            return ValueSpec(name, kind)
    raise SchemaError(f"delegate value '{name}' is a {type(val).__name__}; etops passes tensors, ints, floats and bools")


def _identifier(name: str, taken: set[str]) -> str:
    ident = re.sub(r"\W", "_", name) or "arg"
    if ident[0].isdigit():
        ident = "_" + ident
    while ident in taken:
        ident += "_"
    taken.add(ident)
    return ident


def _specs(lowered) -> tuple[list[ValueSpec], list[ValueSpec]]:
    """Input and output specs of `lowered`, from its original subgraph: the user
    inputs in call order, then every value its output node returns."""
    program = lowered.original_module
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    taken: set[str] = set()
    inputs = []
    for name in program.graph_signature.user_inputs:
        node = placeholders[name]
        inputs.append(_value_spec(_identifier(name, taken), node.meta.get("val")))
    results = program.graph.output_node().args[0]
    results = list(results) if isinstance(results, (list, tuple)) else [results]
    outputs = []
    for i, node in enumerate(results):
        name = _identifier("out" if len(results) == 1 else f"out{i}", taken)
        spec = _value_spec(name, node.meta.get("val") if hasattr(node, "meta") else node)
        if spec.kind != "Tensor":
            raise SchemaError(f"delegate output {i} is a {spec.kind}; etops takes tensor outputs only")
        outputs.append(spec)
    return inputs, outputs


def delegate_schema(name: str, inputs: list[ValueSpec], outputs: list[ValueSpec]):
    """The torch FunctionSchema etops calls a delegate with: inputs positional,
    outputs as keyword-only outs, returned as an out variant returns them."""
    args = [f"{spec.kind} {spec.name}" for spec in inputs]
    outs = [f"Tensor(o{i}!) {spec.name}" for i, spec in enumerate(outputs)]
    rets = [f"Tensor(o{i}!)" for i in range(len(outputs))]
    returns = rets[0] if len(rets) == 1 else f"({', '.join(rets)})"
    return torch._C.parse_schema(f"{name}({', '.join(args + ['*'] + outs)}) -> {returns}")


class DelegateInfo(KernelInfo):
    """What a loaded delegate knows about itself: its backend, the input and output
    specs of its subgraph, the ops inside it; shared by the kernel object as ``_info``."""

    error_type = DelegateError

    def __init__(self, name: str, lowered, inputs: list[ValueSpec], outputs: list[ValueSpec]):
        schema = delegate_schema(name, inputs, outputs)
        super().__init__(name, schema, "lowered module", build_plan(name, schema, return_slot=False), None)
        self._handle: _native._core.Delegate | None = None  #: the Delegate (set by load)
        self.backend = lowered.backend_id
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.original_module = lowered.original_module  #: the subgraph the backend replaced, on ATen
        self.processed_size = len(lowered.processed_bytes)
        self.compile_specs = tuple(key for key, _ in compile_specs(lowered))
        self.ops = tuple(
            str(getattr(n.target, "__name__", n.target))
            for n in self.original_module.graph.nodes
            if n.op == "call_function" and n.target is not operator.getitem
        )
        # Symbol -> (lowest, highest) size a call may give it. The highest is the
        # program's bound (what the .pte's memory plan holds); the lowest is 1, as a
        # Method accepts: torch.export's lower bound of 2 only keeps sizes 0 and 1
        # apart while tracing.
        self._ranges = {
            sym: (1, None if r.upper.is_infinite else int(r.upper))
            for sym, r in getattr(self.original_module, "range_constraints", {}).items()
        }

    # ---- introspection -------------------------------------------------------------

    @property
    def kernels(self):
        return []

    def made_with(self, policy, kernel):
        """A delegate runs its lowered program whatever the call policy: `kernel`
        (etops.as_program gives it back as it is)."""
        return kernel

    @property
    def library(self) -> str:
        return f"backend {self.backend}"

    def explain(self, *args, **kwargs) -> str:
        return f"{self.name} runs backend {self.backend} on its processed blob ({len(self.ops)} ops inside: {', '.join(self.ops)})"

    def __repr__(self) -> str:
        lines = [f"ExecuTorch delegate {self.name}"]
        lines.append(f"  schema:  {self._schema}")
        lines.append(f"  backend: {self.backend} (processed blob of {self.processed_size} bytes, compile specs: {list(self.compile_specs)})")
        lines.extend(f"  input    {spec.describe()}" for spec in self.inputs)
        lines.extend(f"  output   {spec.describe()}" for spec in self.outputs)
        lines.append(f"  ops inside: {', '.join(self.ops)}")
        return "\n".join(lines)

    def reference(self, *inputs):
        """The delegated subgraph run on ATen (its original module): the outputs as
        a list of tensors."""
        with torch.no_grad():
            result = reference_module(self.original_module)(*inputs)
        return list(result) if isinstance(result, (list, tuple)) else [result]

    # ---- the slow path's questions -------------------------------------------------

    def _sizes(self, bound: dict) -> dict:
        """Symbol -> size, from the inputs' actual shapes (checked against the specs)."""
        sizes: dict = {}
        for spec in self.inputs:
            value = bound[spec.name]
            if spec.kind != "Tensor":
                continue
            shape = tuple(value.shape)
            if len(shape) != len(spec.shape):
                raise ValueError(f"{self.name}: argument '{spec.name}' has {len(shape)} dims, the delegate takes {spec.describe()}")
            for axis, (got, want) in enumerate(zip(shape, spec.shape)):
                if isinstance(want, int):
                    if got != want:
                        raise ValueError(f"{self.name}: argument '{spec.name}' has shape {list(shape)}, the delegate takes {spec.describe()} (dim {axis} differs)")
                    continue
                if getattr(want, "is_Symbol", False):
                    low, high = self._ranges.get(want, (1, None))
                    if got < low or (high is not None and got > high):
                        raise ValueError(f"{self.name}: argument '{spec.name}' dim {axis} is {got}; the delegate takes {want} in [{low}, {high if high is not None else 'inf'}]")
                    if sizes.setdefault(want, got) != got:
                        raise ValueError(f"{self.name}: argument '{spec.name}' dim {axis} is {got}, but {want} is {sizes[want]} in another input")
        return sizes

    @property
    def stale(self) -> bool:
        """Whether ExecuTorch's threadpool was replaced since this delegate was
        initialised (its backend may hold the freed pool: it must be loaded again)."""
        return self._handle is not None and self._handle.stale

    @property
    def has_symbolic_sizes(self) -> bool:
        return any(spec.kind == "Tensor" and not spec.static for spec in self.inputs)

    def c_specs(self) -> tuple:
        """Per argument, what the C call path checks on every call (see
        _native/kernel_specs.c): dtype, dim order and static sizes. A mismatch goes
        to explain_mismatch, which raises the error naming the argument (or lets an out of another shape
        be resized, as torch's out= does)."""
        specs: list[tuple[int, tuple | None, tuple[int, ...]] | None] = []
        for spec in self.inputs + self.outputs:
            if spec.kind != "Tensor":
                specs.append(None)
                continue
            if spec.dtype is None:
                raise SchemaError(f"{self.name}: tensor '{spec.name}' has no dtype in the lowered module's specs")
            sizes = spec.shape if spec.static else None
            specs.append((dtypes.ET_SCALAR_TYPE[spec.dtype], sizes, spec.dim_order))
        return tuple(specs)

    def validate(self, bound: dict, meta_checked: bool = False) -> dict | None:
        """A delegate's checks are its tensor specs (explain_mismatch): its Kernel
        never asks torch, so there is nothing to do here (nothing known of shapes)."""
        return None

    def explain_mismatch(self, bound: dict) -> None:
        """An argument failed the C spec check (c_specs): raises the error naming
        it, or returns for an out of another shape that may be resized."""
        self.precheck(bound)

    def describe_call(self, bound: dict) -> str:
        """What a call runs: the backend (no kernel selection happens)."""
        return self.explain()

    def precheck(self, bound: dict) -> None:
        """Refuses what the backend would misread or overrun: inputs of the wrong
        kind, dtype, shape or dim order, outs of the wrong dtype or dim order (a
        backend trusts what its program told it and writes the outputs it planned);
        and a delegate whose threadpool was replaced since init. Runs before every
        call of a delegate with symbolic sizes (C checks only static ones)."""
        if self.stale:
            raise DelegateError(self.name, 0x02, "InvalidState", "", detail="the threadpool was resized since this delegate was initialised; load it again")
        for spec in self.inputs:
            if spec.kind == "Tensor":
                self._check_layout(spec, bound[spec.name], "argument")
        for spec in self.outputs:
            out = bound.get(spec.name)
            if out is not None and not handled_in_this_call(out):
                self._check_layout(spec, out, "out argument")
                self._check_no_alias(spec.name, bound)
                if not isinstance(out, torch.Tensor) and spec.static and tuple(out.shape) != spec.shape:
                    raise ValueError(f"{self.name}: out argument '{spec.name}' has shape {list(out.shape)}, the delegate writes {spec.describe()}, and only a torch.Tensor out can be resized")
        self._sizes(bound)

    def _check_no_alias(self, out_name: str, bound: dict) -> None:
        """A backend reads its inputs while it writes its outputs (a .pte's memory
        plan never overlaps them): an out sharing memory with an input is refused."""
        out = as_torch(bound[out_name])
        for spec in self.inputs:
            value = bound[spec.name]
            if spec.kind == "Tensor" and value is not None and overlaps(out, as_torch(value)):
                raise ValueError(f"{self.name}: out argument '{out_name}' shares memory with argument '{spec.name}'; the backend reads one while it writes the other")

    def _check_layout(self, spec: ValueSpec, value, what: str) -> None:
        """The dtype and (for a tensor of the spec's rank) the dim order of `value`
        are the spec's; a non-dense input counts as contiguous (it is copied so)."""
        et_dtype, order, dense = _native.tensor_meta(value, self.name, spec.name)
        if dtypes.TORCH_DTYPE.get(et_dtype) != spec.dtype:
            raise TypeError(f"{self.name}: {what} '{spec.name}' is {dtypes.dtype_name(et_dtype)}, the delegate {'takes' if what == 'argument' else 'writes'} {spec.describe()}")
        seen = tuple(order) if dense else tuple(range(len(order)))
        if len(seen) == len(spec.dim_order) and seen != spec.dim_order and len(seen) > 1:
            raise ValueError(
                f"{self.name}: {what} '{spec.name}' has dim order {list(seen)}, the delegate {'takes' if what == 'argument' else 'writes'} "
                f"{spec.describe()} (dim order {list(spec.dim_order)})"
            )

    def out_specs(self, bound: dict) -> dict:
        """out name -> (shape, dtype, stride) for the outputs of a call with these inputs."""
        sizes = None
        out = {}
        for spec in self.outputs:
            shape: tuple
            if spec.static:
                shape = spec.shape
            else:
                if sizes is None:
                    sizes = self._sizes(bound)
                solved = []
                for d in spec.shape:
                    value = d if isinstance(d, int) else d.xreplace(sizes)
                    if not getattr(value, "is_number", isinstance(value, int)):
                        raise SchemaError(f"{self.name}: output '{spec.name}' has size {d}, which the inputs do not determine; pass the outs")
                    solved.append(int(value))
                shape = tuple(solved)
            out[spec.name] = (shape, spec.dtype, strides_for(shape, spec.dim_order))
        return out


def load(lowered, *, name: str | None = None, method: str = "forward"):
    """Initialises `lowered`'s backend with its processed blob, compile specs and
    named data, and returns the delegate as a kernel object: call it with the
    subgraph's inputs (outputs allocated, or passed as ``out=`` / ``out0=``...).

    Raises DelegateError when the backend is not registered, not available, or
    refuses the blob; SchemaError when an input or output is of a kind etops
    cannot pass. The backend's handle is destroyed with the returned object."""
    if not hasattr(lowered, "processed_bytes") or not hasattr(lowered, "backend_id"):
        raise TypeError(f"lowered must be a LoweredBackendModule (see etops.delegate.lowered_modules), not {type(lowered).__name__}")
    _backends.load_backend_libraries()
    label = f"{lowered.backend_id}::{name or 'lowered_module'}"
    inputs, outputs = _specs(lowered)
    info = DelegateInfo(label, lowered, inputs, outputs)
    handle = _native._core.delegate_init(lowered.backend_id, lowered.processed_bytes, compile_specs(lowered), named_data(lowered), method)
    if isinstance(handle, _native._core.CallFailure):
        if handle.kind in ("aborted", "crashed"):
            raise kernel_failure(DelegateError, label, handle)
        registered = _backends.backend_names()
        if lowered.backend_id not in registered:
            detail = f"no backend named {lowered.backend_id!r} is registered (registered: {', '.join(registered) or 'none'})"
        elif handle.name == "NotSupported":
            detail = f"backend {lowered.backend_id} is not available on this machine"
        else:
            detail = f"backend {lowered.backend_id} refused the processed blob ({len(lowered.processed_bytes)} bytes)"
        raise kernel_failure(DelegateError, label, handle, action="init", detail=detail)
    info._handle = handle
    # dtypes, dim orders, static sizes and overlaps are checked in C on every call;
    # symbolic sizes (ranges, one size per symbol) in Python, by precheck
    return _native.Kernel(
        label, info._require_plan().args, info._require_plan().returns, info, SLOW_PATH,
        precheck=info.has_symbolic_sizes, delegate=handle, specs=info.c_specs(),
    )


_cache_lock = threading.Lock()
_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def loaded(lowered, name: str | None = None):
    """The delegate kernel of `lowered`, initialised once per lowered module and kept
    while the module lives (edge.run, edge.compare and bench share it); initialised
    again after a threadpool resize."""
    with _cache_lock:
        kernel = _cache.get(lowered)
        if kernel is None or kernel._info.stale:
            kernel = load(lowered, name=name)
            _cache[lowered] = kernel
        return kernel
