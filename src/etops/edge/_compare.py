"""Each node of an edge program on its ExecuTorch kernel vs ATen (``etops.edge.compare``).

The graph runs once with ATen (the reference). Every node that calls a kernel also
runs on its ExecuTorch kernel with the very inputs the reference gave that node,
so a faulty kernel shows at its own node and errors do not pile up along the
graph. A delegate call is one row: its backend run on the lowered module's
processed blob vs the lowered module's original subgraph on ATen, with the ops
inside it listed. Values compare by ``etops.compare`` with the ``torch`` policy
(torch.testing's tolerances per dtype); the signal-to-noise ratio is the formula
of ExecuTorch devtools' ``SNRComparator``.

This module owns the run (``compare`` and the executor that runs each node
twice); the rows and their renderings are ``report``'s, the reproducer scripts
``reproducer``'s. May import torch, etops.compare, etops.layouts, etops.delegate
and the edge modules ``_call``, ``_run`` and ``report``.
"""

from __future__ import annotations

from collections import Counter

import torch
import torch.utils._pytree as pytree

from .. import compare as _comparison
from ..delegate import loaded
from ..errors import EtopsError, KernelNotFoundError
from ..layouts import strides_for
from ..ops import rules_for
from ._call import resolve
from ._run import (
    AtenExecutor,
    ExecuTorchExecutor,
    Progress,
    delegate_name,
    interpret,
    is_structural,
    placeholder_values,
    resolve_program,
    target_name,
    user_outputs,
)
from .report import CompareReport, NodeResult, OutputDiff

__all__ = ["CompareReport", "NodeResult", "OutputDiff", "compare"]


def _first_line(trace: str | None) -> str | None:
    """The model's source line that made the node (last frame of its stack trace)."""
    if not trace:
        return None
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip()]
    frames = [i for i, line in enumerate(lines) if line.startswith("File ")]
    # the user's frame: the last one outside torch itself (nn.ReLU's forward is not news)
    mine = [i for i in frames if "/site-packages/torch/" not in lines[i] and "/torch/nn/" not in lines[i]]
    chosen = (mine or frames)[-1:]
    for i in chosen:
        code = lines[i + 1] if i + 1 < len(lines) and not lines[i + 1].startswith("File ") else ""
        where = lines[i].replace("File ", "", 1)
        return f"{where}: {code}"
    return lines[-1] if lines else None


class _CompareExecutor:
    """Runs a node with ATen (the value the graph goes on with) and, on the same
    inputs, with its ExecuTorch kernel; records the difference."""

    def __init__(self, tolerance: _comparison.Tolerance, keep: int, progress: Progress):
        self.aten = AtenExecutor()
        self.executorch = ExecuTorchExecutor()
        self.tolerance = tolerance
        self.keep = keep
        self.results: list[NodeResult] = []
        self.progress = progress

    def __call__(self, node, target, args, kwargs):
        name = target_name(target)
        kernel_name, out_names, failure, status = None, (), None, "ok"
        try:
            resolved = resolve(target)
            kernel_name, out_names = resolved.kernel_name, resolved.out_names if resolved.kind == "direct" else ()
        except KernelNotFoundError as exc:
            resolved, failure, status = None, str(exc), "no kernel"
        et_args, et_kwargs = args, kwargs
        if resolved is not None:
            et_args, et_kwargs = _separate(target, args, kwargs, out_names)
        actual = None
        if resolved is not None:
            try:
                actual = self.executorch(node, target, et_args, et_kwargs)
            except (EtopsError, ValueError, TypeError, RuntimeError) as exc:
                failure, status = f"{type(exc).__name__}: {exc}", "error"
        inputs = None
        if status != "ok" and self._keeping():
            inputs = _snapshot(args, kwargs)
        expected = self.aten(node, target, args, kwargs)
        self._record(node, name, kernel_name, status, failure, actual, expected, (args, kwargs), inputs, target=target, out_names=tuple(out_names))
        return expected

    def delegate(self, node, lowered, inputs):
        """A delegate call: its backend on the inputs the reference gave it vs its
        original subgraph on ATen; one row."""
        name = delegate_name(node)
        label = f"{lowered.backend_id}::{name}"
        status, failure, actual = "ok", None, None
        try:
            kernel = loaded(lowered, name=name)
            # ATen's reference values may be laid out differently from what the
            # .pte's would be: give the backend the dim order it was compiled for
            et_inputs = [_in_dim_order(v, spec) for v, spec in zip(inputs, kernel._info.inputs)] if len(inputs) == len(kernel._info.inputs) else list(inputs)
            actual = self.executorch.delegate(node, lowered, et_inputs)
        except (EtopsError, ValueError, TypeError, RuntimeError) as exc:
            failure, status = f"{type(exc).__name__}: {exc}", "error"
        kept = _snapshot(inputs, {}) if status != "ok" and self._keeping() else None
        expected = self.aten.delegate(node, lowered, inputs)
        ops = _delegate_ops(lowered)
        self._record(
            node,
            f"delegate ({lowered.backend_id}): " + ", ".join(f"{op} x{n}" if n > 1 else op for op, n in Counter(ops).items()),
            label,
            status,
            failure,
            actual,
            expected,
            (inputs, {}),
            kept,
            target=node.target,
            source=_delegate_source(node, lowered),
            backend=lowered.backend_id,
            ops=ops,
            lowered=lowered,
        )
        return expected

    def _record(self, node, name, kernel_name, status, failure, actual, expected, args_kwargs, inputs, *, source=None, **extra):
        first = pytree.tree_leaves(expected)
        tensor = next((t for t in first if isinstance(t, torch.Tensor)), None)
        tolerance = rules_for(kernel_name).judging.tolerance_of(self.tolerance) if kernel_name else self.tolerance
        rtol, atol = tolerance.pair(tensor.dtype if tensor is not None else torch.int64)
        d = _comparison.Diff()
        if status == "ok":
            d = _comparison.diff(actual, expected, tolerance)
            if not d.ok:
                status = "mismatch"
                failure = d.problem
                if self._keeping():
                    inputs = _snapshot(*args_kwargs)
        self.results.append(
            NodeResult(
                index=len(self.results),
                node=node.name,
                op=name,
                kernel=kernel_name,
                dtype=str(tensor.dtype).replace("torch.", "") if tensor is not None else type(first[0]).__name__ if first else "-",
                shape=tuple(tensor.shape) if tensor is not None else (),
                status=status,
                max_abs=d.max_abs,
                max_rel=d.max_rel,
                mismatched=d.mismatched if status != "error" else 0,
                numel=d.numel if status == "ok" or status == "mismatch" else (tensor.numel() if tensor is not None else 1),
                snr=d.snr,
                rtol=rtol,
                atol=atol,
                message=failure,
                source=source if source is not None else _first_line(node.meta.get("stack_trace")),
                inputs=inputs,
                **extra,
            )
        )

    def _keeping(self) -> bool:
        kept = sum(1 for r in self.results if r.inputs is not None)
        return kept < self.keep


def _delegate_ops(lowered) -> tuple:
    """The ops inside a lowered module's original subgraph (``aten.linear.default``), in graph order."""
    return tuple(
        str(getattr(n.target, "__name__", n.target))
        for n in lowered.original_module.graph.nodes
        if n.op == "call_function" and not is_structural(n.target)
    )


def _delegate_source(node, lowered) -> str | None:
    """The model's source line of a delegate call: the call's own, else that of the
    first op inside its subgraph that has one."""
    line = _first_line(node.meta.get("stack_trace"))
    if line:
        return line
    for n in lowered.original_module.graph.nodes:
        if n.op == "call_function" and n.meta.get("stack_trace"):
            return _first_line(n.meta["stack_trace"])
    return None


def _in_dim_order(value, spec):
    """`value` as a dense tensor in the dim order of the delegate's input `spec`
    (a copy only when its strides differ)."""
    if not isinstance(value, torch.Tensor) or spec.kind != "Tensor" or value.dim() != len(spec.dim_order) or value.dim() < 2:
        return value
    shape = tuple(value.shape)
    stride = strides_for(shape, spec.dim_order)
    if tuple(value.stride()) == stride:
        return value
    return torch.empty_strided(shape, stride, dtype=value.dtype).copy_(value)


def _snapshot(args, kwargs):
    return pytree.tree_map(lambda v: v.detach().clone() if isinstance(v, torch.Tensor) else v, (tuple(args), dict(kwargs)))


def _separate(target, args, kwargs, out_names):
    """Inputs for the ExecuTorch run that do not touch the reference's tensors:
    fresh outs for out variants, copies of what in-place ops write."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return args, kwargs
    written = {a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write}
    if not written:
        return args, kwargs

    def fresh(v):
        if isinstance(v, torch.Tensor):
            return torch.empty_like(v)
        if isinstance(v, list):
            return [fresh(x) for x in v]
        return v

    def copy(v):
        return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, v)

    args = list(args)
    for i, a in enumerate(schema.arguments):
        if a.name not in written:
            continue
        handle = fresh if a.name in out_names else copy
        if a.name in kwargs:
            kwargs = {**kwargs, a.name: handle(kwargs[a.name])}
        elif i < len(args) and not a.kwarg_only:
            args[i] = handle(args[i])
    return tuple(args), kwargs


def compare(
    program,
    *inputs,
    method: str = "forward",
    stage: str = "edge",
    config=None,
    kwargs=None,
    model=None,
    rtol: float | None = None,
    atol: float | None = None,
    progress: bool | None = None,
    keep_inputs: int = 8,
    end_to_end: bool = True,
) -> CompareReport:
    """Runs each node of an edge program twice on the same inputs (the values of
    the ATen reference run): once with ATen, once on its ExecuTorch kernel.

    ``rtol``/``atol`` override torch.testing's per-dtype defaults. ``model``: the
    eager module for the end-to-end comparison (default: the exported graph on
    ATen). ``keep_inputs``: how many diverging nodes keep their inputs for a
    reproducer. A progress bar shows on graphs of more than 300 nodes
    (``progress=True/False`` forces it)."""
    ep = resolve_program(program, method, stage, config)
    if len(inputs) == 1 and isinstance(inputs[0], (tuple, list)):
        inputs = tuple(inputs[0])
    gm = ep.graph_module
    count = sum(1 for n in gm.graph.nodes if n.op == "call_function")
    bar = Progress(count * (2 if end_to_end else 1), "etops.edge.compare", progress)
    tolerance = _comparison.TORCH.override(rtol=rtol, atol=atol)
    executor = _CompareExecutor(tolerance, keep_inputs, bar)
    try:
        reference_flat = interpret(gm, placeholder_values(ep, inputs, kwargs), executor, progress=bar)
        reference_outs = user_outputs(ep, reference_flat)
        e2e, e2e_error, reference = [], None, "the exported graph on ATen"
        if end_to_end:
            if model is not None:
                with torch.no_grad():
                    eager = model(*inputs, **(kwargs or {}))
                eager_outs, reference = pytree.tree_leaves(eager), "eager PyTorch"
            else:
                eager_outs = reference_outs
            try:
                et_outs = user_outputs(ep, interpret(gm, placeholder_values(ep, inputs, kwargs), ExecuTorchExecutor(), progress=bar))
            except (EtopsError, ValueError, TypeError, RuntimeError) as exc:
                e2e_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            else:
                if len(et_outs) != len(eager_outs):
                    e2e_error = f"{len(et_outs)} outputs vs {len(eager_outs)} from {reference}"
                else:
                    for i, (a, e) in enumerate(zip(et_outs, eager_outs)):
                        d = _comparison.diff(a, e, tolerance)
                        t = e if isinstance(e, torch.Tensor) else None
                        e2e.append(OutputDiff(i, str(t.dtype).replace("torch.", "") if t is not None else type(e).__name__, tuple(t.shape) if t is not None else (), d.max_abs, d.max_rel, d.mismatched, d.numel, d.snr, d.problem))
    finally:
        bar.close()
    pre_emission = stage == "executorch" or type(program).__name__ == "ExecutorchProgramManager"
    return CompareReport(executor.results, e2e, e2e_error, reference, "pre-emission" if pre_emission else "edge", method)
