"""An edge program, node by node, on ExecuTorch's kernels (``etops.edge.run``).

The interpreter walks the graph of an ExportedProgram in edge dialect, or of the
program right before emission (``to_executorch()``'s, with ``memory.alloc`` outs,
``memory.view`` and executorch_prim ops), and gives every node to an executor:
``ExecuTorchExecutor`` runs the kernels the ``.pte`` would run, ``AtenExecutor``
runs ATen (the reference of ``etops.edge.compare``).

A delegate call (``executorch_call_delegate(lowered_module, *inputs)``) goes to the
executor's ``delegate`` method: ``ExecuTorchExecutor`` runs the lowered module's
backend on its processed blob (``etops.delegate.loaded``), ``AtenExecutor`` its
original subgraph, as ``executorch_call_delegate`` does eagerly.
"""

from __future__ import annotations

import copy
import operator
import sys
import time
from typing import Any

import torch
import torch.utils._pytree as pytree
from executorch.exir import memory
from executorch.exir.dialects.edge._ops import EdgeOpOverload
from executorch.exir.passes.executorch_prim_ops_registry import _PYTHON_SYM_OPS_TO_EXECUTORCH_SYM_OPS
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from ..errors import UnsupportedNodeError
from ..delegate import is_delegate_call, loaded, reference_module
from ._call import Resolved, call_resolved, empty_like_spec, resolve

__all__ = ["run", "resolve_program"]

STAGES = ("edge", "executorch")


def resolve_program(program, method: str = "forward", stage: str = "edge", config=None) -> ExportedProgram:
    """The ExportedProgram to run: an ExportedProgram as given; of an
    EdgeProgramManager the edge program (``stage="edge"``) or the program right
    before emission (``stage="executorch"``: ``to_executorch(config)``'s, after
    its memory-format, out-variant and memory-planning passes); of an
    ExecutorchProgramManager the program before emission.

    Note that ``EdgeProgramManager.to_executorch()`` rewrites the manager's edge
    programs in place: the edge program of a manager that was lowered already is
    its pre-emission program."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, not {stage!r}")
    if isinstance(program, ExportedProgram):
        return program
    kind = type(program).__name__
    if kind == "EdgeProgramManager":
        if stage == "executorch":
            # to_executorch() rewrites the manager's edge programs in place: lower a copy
            program = copy.deepcopy(program)
            program = program.to_executorch(config) if config is not None else program.to_executorch()
            return program.exported_program(method)
        return program.exported_program(method)
    if kind == "ExecutorchProgramManager":
        return program.exported_program(method)
    raise TypeError(f"etops.edge: expected an EdgeProgramManager, ExecutorchProgramManager or ExportedProgram, got {kind}")


# ---- placeholders -------------------------------------------------------------------


def flat_user_inputs(ep: ExportedProgram, args, kwargs) -> list:
    if isinstance(args, list):
        args = tuple(args)
    elif not isinstance(args, tuple):
        args = (args,)
    kwargs = kwargs or {}
    in_spec = getattr(ep.call_spec, "in_spec", None) if kwargs else None  # call_spec is rebuilt per access
    if in_spec is not None:
        from torch.export._tree_utils import reorder_kwargs

        kwargs = reorder_kwargs(kwargs, in_spec)
    return pytree.tree_leaves((args, kwargs))


def placeholder_values(ep: ExportedProgram, args, kwargs) -> list:
    """The value of every placeholder, in graph order: parameters, buffers and
    constants of the program, then the user's inputs."""
    user = iter(flat_user_inputs(ep, args, kwargs))
    mutated = set(ep.graph_signature.buffers_to_mutate.values())
    values = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            try:
                values.append(next(user))
            except StopIteration:
                raise ValueError(f"etops.edge: the program takes more inputs than were given (missing {spec.arg.name})") from None
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            value = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
            # a run must not change the program's own buffers
            values.append(value.clone() if spec.target in mutated else value)
        elif spec.kind in (InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
            values.append(ep.constants[spec.target])
        else:
            values.append(None)
    rest = list(user)
    if rest:
        raise ValueError(f"etops.edge: {len(rest)} more inputs given than the program takes")
    return values


def user_outputs(ep: ExportedProgram, flat: list):
    kinds = [s.kind for s in ep.graph_signature.output_specs]
    outs = [v for v, k in zip(flat, kinds) if k in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT)] if len(kinds) == len(flat) else flat
    return outs


def unflatten_outputs(ep: ExportedProgram, outs: list):
    out_spec = getattr(ep.call_spec, "out_spec", None)
    if out_spec is not None:
        try:
            return pytree.tree_unflatten(outs, out_spec)
        except Exception:  # noqa: BLE001
            pass
    return tuple(outs)


# ---- executors ----------------------------------------------------------------------


def target_name(target) -> str:
    if isinstance(target, (EdgeOpOverload, torch._ops.OpOverload)):
        schema = target._schema
        overload = schema.overload_name
        name = schema.name if overload in ("", "default") else f"{schema.name}.{overload}"
        return name
    module = getattr(target, "__module__", "") or ""
    return f"{module.replace('_operator', 'operator')}.{getattr(target, '__name__', repr(target))}".lstrip(".")


def _spec_of(val):
    """(shape, dtype, stride) of a node's fake value when its shape is static."""
    if isinstance(val, torch.Tensor):
        if any(not isinstance(s, int) for s in val.shape) or any(not isinstance(s, int) for s in val.stride()):
            return None
        return (tuple(val.shape), val.dtype, tuple(val.stride()))
    return None


def outs_from_meta(resolved: Resolved, node):
    """Outs allocated from the node's tensor specs (what memory planning gives the
    ``.pte``), or None when a shape is symbolic."""
    if resolved.kind != "out" or node is None:
        return None
    val = node.meta.get("val")
    vals = [val] if len(resolved.out_names) == 1 else (list(val) if isinstance(val, (list, tuple)) else None)
    if vals is None or len(vals) != len(resolved.out_names):
        return None
    outs: dict[str, Any] = {}
    for name, v in zip(resolved.out_names, vals):
        if v is None:
            outs[name] = None
            continue
        if isinstance(v, (list, tuple)):
            specs = [_spec_of(x) for x in v]
            if any(s is None for s in specs):
                return None
            outs[name] = [empty_like_spec(*s) for s in specs]
            continue
        spec = _spec_of(v)
        if spec is None:
            return None
        outs[name] = empty_like_spec(*spec)
    return outs


def is_structural(target) -> bool:
    """Nodes that call no kernel: getitem, allocation, views, frees."""
    return target in (operator.getitem, memory.alloc, memory.view, memory.free)


def run_structural(node, target, args, kwargs, fresh: bool = False):
    if target is operator.getitem:
        return args[0][args[1]]
    if target is memory.alloc:
        spec = node.meta.get("spec")
        specs = args[0]

        def one(i, shape_dtype):
            s = spec[i] if isinstance(spec, (list, tuple)) else spec
            stride = getattr(s, "stride", None) if s is not None else None
            return empty_like_spec(shape_dtype[0], shape_dtype[1], stride)

        if isinstance(specs, list):
            return [one(i, sd) for i, sd in enumerate(specs)]
        return one(0, specs)
    if target is memory.view:
        return args[0].view(args[1])
    if target is memory.free:
        return None
    raise AssertionError(target)


def delegate_name(node) -> str:
    """The attribute name of the lowered module a delegate call calls (``lowered_module_0``)."""
    first = node.args[0]
    return str(first.target) if isinstance(first, torch.fx.Node) else getattr(first, "__name__", "lowered_module")


def _as_sequence(result) -> tuple:
    """A delegate call's value: the sequence its getitem nodes index."""
    return tuple(result) if isinstance(result, (list, tuple)) else (result,)


def delegate_outs_from_meta(kernel, node) -> dict | None:
    """Outs of a delegate call allocated from the node's tensor specs (what memory
    planning gives the ``.pte``), keyed by the delegate kernel's out names; None
    when a shape is symbolic or the specs do not line up."""
    val = node.meta.get("val")
    vals = list(val) if isinstance(val, (list, tuple)) else [val]
    outputs = kernel._info.outputs
    if len(vals) != len(outputs):
        return None
    outs = {}
    for spec, v in zip(outputs, vals):
        shape_dtype_stride = _spec_of(v)
        if shape_dtype_stride is None or shape_dtype_stride[1] != spec.dtype:
            return None
        outs[spec.name] = empty_like_spec(*shape_dtype_stride)
    return outs


class AtenExecutor:
    """Runs each node with ATen (what the exported graph computes in PyTorch)."""

    name = "ATen"

    def __call__(self, node, target, args, kwargs):
        if isinstance(target, EdgeOpOverload):
            return target._op(*args, **kwargs)
        return target(*args, **kwargs)

    def delegate(self, node, lowered, inputs) -> tuple:
        """The lowered module's original subgraph on ATen (what
        ``executorch_call_delegate`` runs eagerly)."""
        return _as_sequence(reference_module(lowered)(*inputs))


class ExecuTorchExecutor:
    """Runs each node on the ExecuTorch kernel the ``.pte`` would run."""

    name = "ExecuTorch"

    def __call__(self, node, target, args, kwargs):
        resolved = resolve(target)
        planned = resolved.kind == "direct" and bool(resolved.out_names) and all(
            isinstance(a, torch.fx.Node) and a.target is memory.alloc for n, a in node.kwargs.items() if n in resolved.out_names
        )
        return call_resolved(resolved, args, kwargs, outs_from_meta(resolved, node), planned)

    def delegate(self, node, lowered, inputs) -> tuple:
        """The lowered module's backend on its processed blob (initialised once per
        lowered module), outs preallocated from the node's specs when static."""
        kernel = loaded(lowered, name=delegate_name(node))
        outs = delegate_outs_from_meta(kernel, node)
        return _as_sequence(kernel(*inputs, **outs) if outs else kernel(*inputs))


def is_kernel_target(target) -> bool:
    if isinstance(target, (EdgeOpOverload, torch._ops.OpOverload)):
        return True
    try:
        return target in _PYTHON_SYM_OPS_TO_EXECUTORCH_SYM_OPS
    except TypeError:
        return False


class Progress:
    """A one-line progress bar on stderr (for graphs of more than a few hundred nodes)."""

    def __init__(self, total: int, label: str, enabled: bool | None):
        self.total = total
        self.label = label
        self.enabled = total > 300 if enabled is None else bool(enabled)
        self.done = 0
        self._last = 0.0
        self._start = time.monotonic()

    def step(self, n: int = 1) -> None:
        if not self.enabled:
            return
        self.done += n
        now = time.monotonic()
        if now - self._last >= 0.1 or self.done >= self.total:
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        width = 30
        filled = int(width * min(self.done, self.total) / max(self.total, 1))
        sys.stderr.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} nodes {now - self._start:.1f}s")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.monotonic())  # where it stopped (a failing kernel stops a run early)
            sys.stderr.write("\n")
            sys.stderr.flush()


def interpret(gm: torch.fx.GraphModule, inputs: list, executor, on_node=None, progress=None) -> list:
    """Runs a graph module's nodes with ``executor`` (without autograd); returns
    the flat outputs. ``on_node(node, args, kwargs, value)`` sees every node that
    calls a kernel or a delegate."""
    with torch.no_grad():
        return _interpret(gm, inputs, executor, on_node, progress)


def _interpret(gm, inputs, executor, on_node, progress):
    env: dict = {}
    placeholders = iter(inputs)

    def load(a):
        return env[a]

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(placeholders)
        elif node.op == "get_attr":
            env[node] = getattr(gm, node.target)
        elif node.op == "output":
            return list(torch.fx.node.map_arg(node.args[0], load))
        elif node.op == "call_function":
            target = node.target
            args = torch.fx.node.map_arg(node.args, load)
            kwargs = torch.fx.node.map_arg(node.kwargs, load)
            if is_structural(target):
                env[node] = run_structural(node, target, args, kwargs)
            elif target is torch.ops.higher_order.cond:
                pred, true_gm, false_gm, operands = args
                branch = true_gm if bool(pred) else false_gm
                env[node] = interpret(branch, list(operands), executor, on_node)
            elif is_delegate_call(node):
                env[node] = executor.delegate(node, args[0], args[1:])
                if on_node is not None:
                    on_node(node, args, kwargs, env[node])
            elif not is_kernel_target(target) and getattr(target, "__module__", None) not in ("_operator", "builtins", "math"):
                raise UnsupportedNodeError(f"node {node.name}: etops.edge cannot run {target_name(target)}")
            else:
                env[node] = executor(node, target, args, kwargs)
                if on_node is not None:
                    on_node(node, args, kwargs, env[node])
            if progress is not None:
                progress.step()
        else:
            raise UnsupportedNodeError(f"node {node.name}: unsupported node kind {node.op}")
    raise AssertionError("graph without output")


def run(program, *inputs, method: str = "forward", stage: str = "edge", config=None, kwargs=None, progress=None, flat: bool = False):
    """Runs every node of an edge program on ExecuTorch's kernels, as the ``.pte``
    would, and returns its user outputs (structured as the exported model's,
    or a flat list with ``flat=True``). Delegate calls run their lowered module's
    backend (``etops.delegate.loaded``): a program lowered with a partitioner
    runs its delegated subgraphs as the ``.pte`` does.

    ``program``: an EdgeProgramManager, an ExecutorchProgramManager or an
    ExportedProgram in edge dialect. ``inputs``: the positional inputs (one tuple
    or list of them is also taken, like ``example_inputs``). ``stage="executorch"``
    runs the program right before emission (after ``to_executorch()``'s passes).
    """
    ep = resolve_program(program, method, stage, config)
    if len(inputs) == 1 and isinstance(inputs[0], (tuple, list)):
        inputs = tuple(inputs[0])
    values = placeholder_values(ep, inputs, kwargs)
    gm = ep.graph_module
    bar = Progress(sum(1 for n in gm.graph.nodes if n.op == "call_function"), "etops.edge.run", progress)
    try:
        outs = user_outputs(ep, interpret(gm, values, ExecuTorchExecutor(), progress=bar))
    finally:
        bar.close()
    return outs if flat else unflatten_outputs(ep, outs)
