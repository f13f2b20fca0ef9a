"""Delegates side by side: each lowered module of a program (XNNPACK, say) timed as
the backend runs it, against the same subgraph on ExecuTorch's kernels and on ATen.

Per delegate call, three calls on the same inputs:

* ``delegate``: the backend's execute through ``etops.delegate.loaded(lowered)``,
  outs passed (as a Method's memory plan gives them);
* ``executorch``: the delegate's original subgraph (``lowered.original_module``,
  an edge-dialect ExportedProgram) node by node on ExecuTorch's kernels with
  ``etops.edge``'s interpreter (what ``etops.edge.run`` does, the placeholder
  values bound once), outs allocated per node. A subgraph with an op ExecuTorch has
  no kernel for (the partitioner keeps ``aten.max_pool2d`` whole, ExecuTorch only
  has ``max_pool2d_with_indices``) is re-exported with ``to_edge``'s
  decompositions, what the program would run without the delegate; the row says so;
* ``aten``: the original subgraph on ATen: its graph module called with the
  parameters and inputs (the code ``original_module.module()`` wraps), without
  autograd.

They are timed by the harness's loop (``core.time_calls``): interleaved, the
order rotated every round, ``warmup`` rounds thrown away. The ratios are taken
within each round and summarised by their median and interquartile range. The
outputs of the delegate and of the ExecuTorch kernels are compared with ATen's.

The inputs of each delegate call come from running the whole program once on its
example inputs (an fx Interpreter over the program's graph, on ATen: a delegate call
runs its original subgraph eagerly), or, for a lowered module given alone without
inputs, random tensors of the dtypes and shapes of its input specs.
"""

from __future__ import annotations

import contextlib

import torch

from ..compare import BENCH, diff
from . import core
from .delegate_result import COLUMNS, RATIOS, SIDE_NAMES, SIDES, DelegateBenchResult, describe_ops  # noqa: F401 - delegates' API too

# ---- programs and their delegate calls -------------------------------------------------


def _is_lowered(obj) -> bool:
    return hasattr(obj, "processed_bytes") and hasattr(obj, "backend_id")


def lower(model: torch.nn.Module, example_inputs, partitioner=None):
    """``to_edge_transform_and_lower(torch.export.export(model, example_inputs),
    partitioner=[partitioner or XnnpackPartitioner()])``: the EdgeProgramManager."""
    from executorch.exir import to_edge_transform_and_lower

    if partitioner is None:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioner = XnnpackPartitioner()
    inputs = _as_tuple(example_inputs)
    with _quiet():
        exported = torch.export.export(model, inputs)
        return to_edge_transform_and_lower(exported, partitioner=partitioner if isinstance(partitioner, list) else [partitioner])


def _as_tuple(inputs) -> tuple:
    if inputs is None:
        return ()
    if isinstance(inputs, (list, tuple)):
        return tuple(inputs)
    return (inputs,)


@contextlib.contextmanager
def _quiet():
    from .inputs import quiet

    with quiet():
        yield


def _exported(program, method: str):
    """The ExportedProgram of `program` (None for a bare GraphModule)."""
    if isinstance(program, torch.export.ExportedProgram):
        return program
    if isinstance(program, torch.fx.GraphModule):
        return None
    exported = getattr(program, "exported_program", None)
    if callable(exported):
        return exported(method)
    raise TypeError(
        "bench_delegate takes an EdgeProgramManager, ExportedProgram, GraphModule, a LoweredBackendModule, "
        f"or an nn.Module with its example inputs; not {type(program).__name__}"
    )


def capture_inputs(program, inputs, method: str = "forward") -> dict:
    """{delegate call node: the tuple of inputs it got} when `program` runs on
    `inputs` (its user inputs), on ATen: an fx Interpreter over its graph, whose
    delegate calls run their original subgraphs eagerly."""
    from ..delegate import graph_module_of, is_delegate_call

    ep = _exported(program, method)
    gm = graph_module_of(program, method)
    if ep is not None:
        from ..edge import placeholder_values

        values = placeholder_values(ep, _as_tuple(inputs), None)
    else:
        values = list(_as_tuple(inputs))
    seen: dict = {}

    class Capture(torch.fx.Interpreter):
        def run_node(self, n):
            if is_delegate_call(n):
                args, _ = self.fetch_args_kwargs_from_env(n)
                seen[n] = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args[1:])
            return super().run_node(n)

    with torch.no_grad(), _quiet():
        Capture(gm).run(*values)
    return seen


def spec_inputs(info, generator: torch.Generator | None = None) -> tuple:
    """Random inputs of the dtypes, shapes and dim orders of a delegate's input
    specs (``run._info``). Raises ValueError for a dynamic shape or a non-tensor input."""
    out = []
    for spec in info.inputs:
        if spec.kind != "Tensor":
            raise ValueError(f"{info.name}: input '{spec.name}' is a {spec.kind}: pass the delegate's inputs")
        if not spec.static:
            raise ValueError(f"{info.name}: input {spec.describe()} has a dynamic shape: pass the delegate's inputs")
        order = spec.dim_order or tuple(range(len(spec.shape)))
        physical = tuple(spec.shape[d] for d in order)
        if spec.dtype.is_floating_point or spec.dtype.is_complex:
            t = torch.randn(physical, generator=generator).to(spec.dtype)
        elif spec.dtype == torch.bool:
            t = torch.rand(physical, generator=generator) > 0.5
        else:
            t = torch.randint(0, 8, physical, generator=generator).to(spec.dtype)
        inverse = [order.index(d) for d in range(len(order))]
        out.append(t.permute(inverse) if inverse != sorted(inverse) else t)
    return tuple(out)


# ---- one delegate call, ready to time --------------------------------------------------


def _flat(value) -> list:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    return [value]


def _max_diff(got: list, expected: list):
    return diff(got, expected, BENCH).max_abs


def _agree(got: list, expected: list) -> bool:
    return len(got) == len(expected) and core._agree(got, expected)


def _op_names(info) -> list[str]:
    names = []
    for op in info.ops:
        if op in ("getitem", "operator.getitem"):
            continue
        name = op[len("aten."):] if op.startswith("aten.") else op
        name = name.rsplit(".", 1)[0] if name.endswith(".default") else name
        names.append(name)
    return names


class DelegateCase:
    """The three calls of one delegate on one input (``calls``), checked against each
    other; what went wrong per side in ``errors``. ``inputs=None``: random inputs
    from the delegate's specs.

    The delegate is initialised here (``etops.delegate.load``, not the cache of
    ``loaded``): XNNPACK's runtime keeps the ExecuTorch threadpool it was created
    with, and a thread count set for the benchmark replaces that pool."""

    def __init__(self, lowered, inputs: tuple | None, name: str, source: str, generator: torch.Generator | None = None):
        from .. import delegate as _delegate

        self.name = name
        self.source = source
        self.kernel = _delegate.load(lowered, name=name)
        self.info = self.kernel._info
        self.inputs = tuple(inputs) if inputs is not None else spec_inputs(self.info, generator)
        self.calls: dict = {}
        self.errors: dict = {}
        self.agree: dict = {}
        self.max_abs_diff: dict = {}
        self.executorch_program = "original subgraph"
        self.executorch_fallback = None
        ep = self.info.original_module
        from ..edge import placeholder_values, user_outputs

        try:
            values = tuple(placeholder_values(ep, self.inputs, None))
            with torch.no_grad(), _quiet():
                expected = list(user_outputs(ep, _flat(ep.graph_module(*values))))
        except Exception as exc:  # noqa: BLE001
            raise RuntimeError(f"ATen: {core._one_line(exc)}") from exc
        try:
            got = self.kernel(*self.inputs)
        except Exception as exc:  # noqa: BLE001
            raise RuntimeError(f"delegate: {core._one_line(exc)}") from exc
        got = list(got) if isinstance(got, tuple) else [got]
        outs = {spec.name: t for spec, t in zip(self.info.outputs, got)}
        self.calls["delegate"] = (self.kernel, self.inputs, outs)
        self.agree["delegate"] = _agree(got, expected)
        self.max_abs_diff["delegate"] = _max_diff(got, expected)

        call, result = self._on_executorch(ep)
        if call is None:
            self.errors["executorch"] = result
        else:
            self.calls["executorch"] = call
            self.agree["executorch"] = _agree(result, expected)
            self.max_abs_diff["executorch"] = _max_diff(result, expected)
        # the lifted graph, parameters passed: eager PyTorch's cost (ep.module()'s
        # wrapper adds tens of microseconds of input checks and pytree work per call)
        self.calls["aten"] = (ep.graph_module, values, {})

    def _executorch_call(self, program):
        """The call running `program`'s graph on ExecuTorch's kernels (etops.edge's
        interpreter, the placeholder values bound once), and its user outputs."""
        from ..edge import ExecuTorchExecutor, interpret, placeholder_values, user_outputs

        call = (interpret, (program.graph_module, placeholder_values(program, self.inputs, None), ExecuTorchExecutor()), {})
        return call, list(user_outputs(program, interpret(*call[1])))

    def _on_executorch(self, ep):
        """(call, its outputs) or (None, why not)."""
        try:
            return self._executorch_call(ep)
        except Exception as exc:  # noqa: BLE001 - an op without kernel: try the decomposed subgraph
            first = core._one_line(exc)
        try:
            from executorch.exir import to_edge

            with _quiet():
                program = to_edge(torch.export.export(ep.module(), self.inputs)).exported_program()
            call, outs = self._executorch_call(program)
        except Exception as exc:  # noqa: BLE001
            return None, f"ExecuTorch: {first}; re-exported with to_edge: {core._one_line(exc)}"
        self.executorch_fallback = first
        reason = first.split(": ", 1)[-1].split(": ", 1)[0]  # "aten::max_pool2d has no ExecuTorch kernel"
        self.executorch_program = f"original subgraph re-exported with to_edge ({reason})"
        return call, outs

    def row(self, model: str) -> dict:
        return {
            "model": model,
            "name": self.name,
            "backend": self.info.backend,
            "ops": _op_names(self.info),
            "inputs": [spec.describe() for spec in self.info.inputs],
            "outputs": [spec.describe() for spec in self.info.outputs],
            "shapes": " ".join("x".join(map(str, t.shape)) or "()" for t in self.inputs if isinstance(t, torch.Tensor)),
            "input": self.source,
            "executorch_program": self.executorch_program,
            "executorch_fallback": self.executorch_fallback,
            "error": None,
            "side_errors": dict(self.errors),
            "agree": dict(self.agree),
            "max_abs_diff": dict(self.max_abs_diff),
        }


def measure(case: DelegateCase, repeats: int = 11, warmup: int = 2, target: float = 0.005) -> dict:
    """Times the case's sides with the harness's loop; the figures (seconds per call)."""
    with torch.no_grad():
        samples, counts = core.time_calls(case.calls, repeats=repeats, warmup=warmup, target=target)
    out: dict = {side: core._summary(s) for side, s in samples.items()}
    out["ratios"] = {f"{a}/{b}": core.paired_ratio(samples[a], samples[b]) if a in samples and b in samples else None for a, b in RATIOS}
    out["calls_per_loop"] = counts
    return out


# ---- the API ---------------------------------------------------------------------------


def _subjects(program, inputs, method: str):
    """[(name, lowered, inputs or None, source)] for every delegate call to time."""
    from ..delegate import delegate_calls, graph_module_of

    if _is_lowered(program):
        given = _as_tuple(inputs)
        return [("lowered_module", program, given or None, "given" if given else "random, from the delegate's input specs")]
    calls = delegate_calls(graph_module_of(program, method))
    if not calls:
        raise ValueError("the program has no delegate calls: lower it with a partitioner first (to_edge_transform_and_lower)")
    captured, why = {}, None
    if inputs is not None:
        try:
            captured = capture_inputs(program, inputs, method)
        except Exception as exc:  # noqa: BLE001
            why = core._one_line(exc)
    out = []
    for attr, lowered, node in calls:
        if node in captured:
            out.append((attr, lowered, captured[node], "captured from the program run on its example inputs"))
        else:
            note = f" (capture failed: {why})" if why else (" (the program's example inputs were not given)" if inputs is None else " (not reached by the program run)")
            out.append((attr, lowered, None, "random, from the delegate's input specs" + note))
    return out


def bench_delegate(program, inputs=None, *, method: str = "forward", label: str | None = None, partitioner=None,
                   repeats: int = 11, warmup: int = 2, target: float = 0.005, threads: int | None = None, seed: int = 0,
                   progress=None) -> "DelegateBenchResult":
    """Times every delegate of ``program`` three ways, interleaved: the delegate
    (its backend, through ``etops.delegate``), the same subgraph on ExecuTorch's
    kernels (``etops.edge``) and on ATen.

    ``program``: an EdgeProgramManager / ExportedProgram / GraphModule with delegate
    calls, and ``inputs`` its example inputs (each delegate's inputs are captured by
    running it once); or one LoweredBackendModule with its own inputs (or none:
    random ones from its input specs); or an ``nn.Module`` with example inputs,
    exported and lowered first (``lower``: XNNPACK unless ``partitioner`` is given).
    ``label`` names the model in the table. ``repeats``, ``warmup``, ``target``,
    ``threads`` (torch's and ExecuTorch's pool, which XNNPACK uses too) and
    ``progress(done, total, text)`` are ``etops.bench``'s.

    Returns a DelegateBenchResult (one row per delegate call)."""
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be at least 1 and warmup at least 0")
    if isinstance(program, torch.nn.Module) and not isinstance(program, torch.fx.GraphModule) and not _is_lowered(program):
        if inputs is None:
            raise ValueError("bench_delegate(model, inputs): a model needs its example inputs to be exported")
        label = label or type(program).__name__
        if progress:
            progress(0, 1, f"{label}: export and lower")
        program = lower(program, inputs, partitioner)
    label = label or ("lowered module" if _is_lowered(program) else "program")
    subjects = _subjects(program, inputs, method)
    generator = torch.Generator().manual_seed(seed)
    rows = []
    with core.thread_counts(threads) as used:
        for i, (name, lowered, args, source) in enumerate(subjects):
            if progress:
                progress(i, len(subjects), f"{label} {name}")
            row = {"model": label, "name": name, "backend": getattr(lowered, "backend_id", "?"), "input": source}
            try:
                case = DelegateCase(lowered, args, name, source, generator)
            except Exception as exc:  # noqa: BLE001
                row["error"] = str(exc) if isinstance(exc, (RuntimeError, ValueError)) else core._one_line(exc)
                rows.append(row)
                continue
            row = case.row(label)
            row.update(measure(case, repeats=repeats, warmup=warmup, target=target))
            rows.append(row)
            del case  # the delegate's handle goes while the threadpool it uses is the one in place
        if progress:
            progress(len(subjects), len(subjects), "done")
    from .host import machine

    return DelegateBenchResult(rows, dict(used), machine(), {"repeats": repeats, "warmup": warmup, "target": target})


# ---- models named on the command line -------------------------------------------------


def models_from_spec(spec: str) -> list[tuple[str, object]]:
    """[(name, factory)] for ``FILE.py:FUNCTION`` or ``package.module:FUNCTION``
    (several: ``:f,g``; none: every entry of the module's ``MODELS`` dict). A factory
    takes no arguments and returns ``(model, example_inputs)``. Raises ValueError
    saying what is missing."""
    import importlib
    import importlib.util
    import os
    import sys

    where, _, names = spec.rpartition(":") if ":" in spec else (spec, "", "")
    if not where:
        raise ValueError(f"--delegate {spec!r}: expected FILE.py:FUNCTION or package.module:FUNCTION")
    if where.endswith(".py") or os.sep in where or os.path.exists(where):
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise ValueError(f"--delegate {spec!r}: no file {where}")
        name = "_etops_models_" + "".join(c if c.isalnum() else "_" for c in os.path.splitext(os.path.basename(path))[0])
        module = sys.modules.get(name)
        if module is None or getattr(module, "__file__", None) != path:
            found = importlib.util.spec_from_file_location(name, path)
            if found is None or found.loader is None:
                raise ValueError(f"--delegate {spec!r}: {where} cannot be imported as a module")
            module = importlib.util.module_from_spec(found)
            sys.modules[name] = module
            try:
                found.loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)
                raise
    else:
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as exc:
            raise ValueError(f"--delegate {spec!r}: no module {where} ({exc})") from exc
    functions = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_") and not isinstance(v, type)
                       and getattr(v, "__module__", None) == module.__name__)
    if not names:
        table = getattr(module, "MODELS", None)
        if not isinstance(table, dict) or not table:
            raise ValueError(f"--delegate {spec!r}: name a function ({where}:FUNCTION; {where} has no MODELS dict; functions: {', '.join(functions) or 'none'})")
        return [(str(k), v) for k, v in table.items()]
    out = []
    for name in (n.strip() for n in names.split(",") if n.strip()):
        factory = getattr(module, name, None)
        if not callable(factory):
            raise ValueError(f"--delegate {spec!r}: {where} has no function {name!r} (functions: {', '.join(functions) or 'none'})")
        out.append((name, factory))
    return out


def build(name: str, factory) -> tuple:
    """(program with delegates, example inputs) from a factory's ``(model, inputs)``:
    an nn.Module is exported and lowered to XNNPACK (``lower``); an
    EdgeProgramManager or ExportedProgram is taken as it is."""
    made = factory()
    if not (isinstance(made, tuple) and len(made) == 2):
        raise ValueError(f"{name}() returned {type(made).__name__}; a model factory returns (model, example_inputs)")
    model, inputs = made
    inputs = _as_tuple(inputs)
    if isinstance(model, torch.nn.Module) and not isinstance(model, torch.fx.GraphModule) and not _is_lowered(model):
        return lower(model, inputs), inputs
    return model, inputs


def bench_models(models, *, repeats: int = 11, warmup: int = 2, target: float = 0.005, threads: int | None = None,
                 progress=None) -> "DelegateBenchResult":
    """``bench_delegate`` for each ``(name, factory)`` (see ``build``), the rows in
    one result. A model that fails to build or lower gives one error row."""
    rows, used, settings = [], None, {"repeats": repeats, "warmup": warmup, "target": target}
    for i, (name, factory) in enumerate(models):
        def step(done, total, text, i=i):
            if progress:
                progress(i, len(models), text)

        step(0, 1, f"{name}: export and lower")
        try:
            program, inputs = build(name, factory)
        except Exception as exc:  # noqa: BLE001
            rows.append({"model": name, "name": "-", "error": f"export and lower: {core._one_line(exc)}"})
            continue
        result = bench_delegate(program, inputs, label=name, repeats=repeats, warmup=warmup, target=target, threads=threads, progress=step)
        rows.extend(result.rows)
        used = result.threads
    if progress:
        progress(len(models), len(models), "done")
    if used is None:
        n = threads or core.DEFAULT_THREADS
        used = {"torch": n, "executorch": n}
    from .host import machine

    return DelegateBenchResult(rows, used, machine(), settings)
