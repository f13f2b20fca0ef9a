"""Each node of an edge program on its ExecuTorch kernel vs ATen (``etops.edge.compare``).

The graph runs once with ATen (the reference). Every node that calls a kernel also
runs on its ExecuTorch kernel with the very inputs the reference gave that node,
so a faulty kernel shows at its own node and errors do not pile up along the
graph. A delegate call is one row: its backend run on the lowered module's
processed blob vs the lowered module's original subgraph on ATen, with the ops
inside it listed. Tolerances default to torch.testing's per dtype; the signal-to-noise ratio
is ExecuTorch devtools' own comparator (``SNRComparator``, as
``Inspector.calculate_numeric_gap`` computes it).
"""

from __future__ import annotations

import base64
import io
import math
import textwrap
from collections import Counter
from dataclasses import dataclass, field

import torch
import torch.utils._pytree as pytree
from executorch.exir.dialects.edge._ops import EdgeOpOverload

from ..delegate import loaded
from ..errors import EtopsError, KernelNotFoundError
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

__all__ = ["CompareReport", "NodeResult", "OutputDiff", "compare", "tolerances"]

try:  # torch.testing's own table (private name; the same values are copied below)
    from torch.testing._comparison import default_tolerances as _torch_default_tolerances
except ImportError:  # pragma: no cover
    _torch_default_tolerances = None

_PRECISIONS = {
    torch.float16: (0.001, 1e-5),
    torch.bfloat16: (0.016, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex32: (0.001, 1e-5),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}


def tolerances(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) torch.testing.assert_close uses by default for ``dtype``
    (0, 0 for integers and bool)."""
    if _torch_default_tolerances is not None:
        try:
            return _torch_default_tolerances(dtype)
        except Exception:  # noqa: BLE001
            pass
    return _PRECISIONS.get(dtype, (0.0, 0.0))


def _snr(expected: torch.Tensor, actual: torch.Tensor) -> float:
    """Signal-to-noise ratio in dB (inf when equal), by ExecuTorch devtools'
    SNRComparator when it imports."""
    if expected.numel() == 0:
        return math.inf
    e = expected.detach().to(torch.float64)
    a = actual.detach().to(torch.float64)
    if torch.equal(e, a):
        return math.inf
    try:
        from executorch.devtools.inspector.numerical_comparator.snr_numerical_comparator import SNRComparator

        return float(SNRComparator().element_compare(e, a))
    except Exception:  # noqa: BLE001
        power = e.pow(2).mean()
        noise = (e - a).pow(2).mean()
        return float(10 * torch.log10(power / noise))


@dataclass
class Diff:
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatched: int = 0
    numel: int = 0
    snr: float = math.inf
    problem: str | None = None  # shape / dtype / type differences

    @property
    def ok(self) -> bool:
        return self.problem is None and self.mismatched == 0

    def merge(self, other: "Diff") -> "Diff":
        return Diff(
            max(self.max_abs, other.max_abs),
            max(self.max_rel, other.max_rel),
            self.mismatched + other.mismatched,
            self.numel + other.numel,
            min(self.snr, other.snr),
            self.problem or other.problem,
        )


def diff(actual, expected, rtol: float | None = None, atol: float | None = None) -> Diff:
    """How far ``actual`` is from ``expected`` (tensors, scalars or nests of them)."""
    a_leaves, a_spec = pytree.tree_flatten(actual)
    e_leaves, e_spec = pytree.tree_flatten(expected)
    if len(a_leaves) != len(e_leaves):
        return Diff(problem=f"{len(a_leaves)} values vs {len(e_leaves)} expected")
    total = Diff()
    for a, e in zip(a_leaves, e_leaves):
        total = total.merge(_diff_one(a, e, rtol, atol))
    return total


def _diff_one(a, e, rtol, atol) -> Diff:
    if isinstance(e, torch.Tensor) or isinstance(a, torch.Tensor):
        if not (isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor)):
            return Diff(problem=f"{type(a).__name__} vs {type(e).__name__}")
        if a.shape != e.shape:
            return Diff(numel=e.numel(), problem=f"shape {list(a.shape)} vs {list(e.shape)}")
        if a.dtype != e.dtype:
            return Diff(numel=e.numel(), problem=f"dtype {a.dtype} vs {e.dtype}")
        if e.numel() == 0:
            return Diff()
        d_rtol, d_atol = tolerances(e.dtype)
        rtol = d_rtol if rtol is None else rtol
        atol = d_atol if atol is None else atol
        if e.is_complex():
            a, e = torch.view_as_real(a), torch.view_as_real(e)
        a64, e64 = a.detach().to(torch.float64), e.detach().to(torch.float64)
        nan_a, nan_e = torch.isnan(a64), torch.isnan(e64)
        err = (a64 - e64).abs()
        same = (a64 == e64) | (nan_a & nan_e)  # equal infinities and NaN where ATen has NaN
        err = torch.where(same, torch.zeros_like(err), err)
        err = torch.where((nan_a ^ nan_e), torch.full_like(err, math.inf), err)
        allowed = atol + rtol * e64.abs()
        bad = err > allowed
        rel = torch.where(err == 0, torch.zeros_like(err), err / e64.abs())
        return Diff(
            max_abs=float(err.max()),
            max_rel=float(rel.max()),
            mismatched=int(bad.sum()),
            numel=e.numel(),
            snr=_snr(e.to(torch.float64) if e.dtype == torch.bool else e, a.to(torch.float64) if a.dtype == torch.bool else a)
            if e.dtype.is_floating_point or e.is_complex()
            else (math.inf if int(bad.sum()) == 0 else -math.inf),
        )
    if isinstance(e, (int, float, bool)) and isinstance(a, (int, float, bool)):
        err = abs(float(a) - float(e))
        return Diff(max_abs=err, max_rel=err / abs(float(e)) if e else (0.0 if err == 0 else math.inf), mismatched=int(a != e), numel=1)
    if a is None and e is None:
        return Diff()
    return Diff(mismatched=int(a != e), numel=1)


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


@dataclass
class NodeResult:
    """One node's ExecuTorch kernel vs ATen, on the same (reference) inputs; or one
    delegate call's backend vs its original subgraph on ATen."""

    index: int  #: position among the nodes that call a kernel or a delegate
    node: str  #: the fx node's name
    op: str  #: the graph's target (``aten::convolution``); for a delegate call
    #: ``delegate (XnnpackBackend): aten.linear.default, aten.relu.default``
    kernel: str | None  #: the ExecuTorch kernel run (``aten::convolution.out``), or the
    #: delegate (``XnnpackBackend::lowered_module_0``)
    dtype: str
    shape: tuple
    status: str  #: "ok", "mismatch", "error" (the kernel failed), "no kernel"
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatched: int = 0
    numel: int = 0
    snr: float = math.inf  #: dB; inf when bit-exact
    rtol: float = 0.0
    atol: float = 0.0
    message: str | None = None
    source: str | None = None  #: the model's source line of the node
    target: object = field(default=None, repr=False)
    inputs: tuple | None = field(default=None, repr=False)  #: (args, kwargs) kept for diverging nodes
    out_names: tuple = field(default=(), repr=False)
    backend: str | None = None  #: a delegate call's backend (``XnnpackBackend``); None for a kernel node
    ops: tuple = ()  #: the ops inside a delegate call's subgraph, in graph order
    lowered: object = field(default=None, repr=False)  #: a delegate call's LoweredBackendModule

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def is_delegate(self) -> bool:
        return self.backend is not None

    def reproducer(self) -> str:
        """A self-contained Python script (inputs embedded) that runs this node's
        op with ATen and on its ExecuTorch kernel and compares them. For a delegate
        call, the script embeds the lowered module (its original subgraph, processed
        blob, compile specs and named data), loads it with ``etops.delegate.load``
        and compares it with its original subgraph on ATen."""
        if self.inputs is None:
            raise ValueError(f"node {self.node}: inputs were not kept (only diverging nodes keep theirs)")
        if self.is_delegate:
            return self._delegate_reproducer()
        buffer = io.BytesIO()
        torch.save(self.inputs, buffer)
        data = base64.b64encode(buffer.getvalue()).decode()
        data = "\n".join(textwrap.wrap(data, 100))
        expr, imports = _target_expr(self.target)
        return f'''\
"""etops.edge.compare: node {self.node} ({self.op}) diverges on ExecuTorch kernel {self.kernel}:
{self.status}{': ' + self.message if self.message else ''}
{self._measured()}{'source: ' + self.source if self.source else ''}
"""
import base64, io
{imports}
import torch
import etops, etops.edge

DATA = """
{data}
"""
args, kwargs = torch.load(io.BytesIO(base64.b64decode(DATA)), weights_only=False)
OUTS = {tuple(self.out_names)!r}


def fresh(kw):
    return {{k: (torch.empty_like(v) if k in OUTS else v) for k, v in kw.items()}}


op = {expr}
expected = op(*args, **fresh(kwargs))                    # ATen
actual = etops.edge.call(op, *args, **fresh(kwargs))     # ExecuTorch kernel {self.kernel}
print("expected:", expected)
print("actual:  ", actual)
torch.testing.assert_close(actual, expected, rtol={self.rtol!r}, atol={self.atol!r})
'''

    def _delegate_reproducer(self) -> str:
        args = tuple(self.inputs[0])
        header = f'''\
"""etops.edge.compare: delegate call {self.node} ({self.kernel}) diverges from its original subgraph on ATen:
{self.status}{': ' + self.message if self.message else ''}
{self._measured()}ops inside: {', '.join(self.ops)}
{'source: ' + self.source + chr(10) if self.source else ''}"""
'''
        try:
            payload = _lowered_payload(self.lowered, self.kernel.split("::", 1)[-1])
            buffer = io.BytesIO()
            torch.save({"inputs": args, "lowered": payload}, buffer)
        except Exception as exc:  # noqa: BLE001 - a subgraph exir cannot serialize
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            return header + f'''
# This delegate call cannot be reproduced standalone: its lowered module did not
# serialize ({reason!r}).
# With the program at hand:
#     lowered = dict((name, m) for name, m, _ in etops.delegate.delegate_calls(program.exported_program().graph_module))["{self.kernel.split("::", 1)[-1]}"]
#     run = etops.delegate.load(lowered); run(*inputs) vs run._info.reference(*inputs)
raise SystemExit("etops.edge.compare: delegate call {self.node} ({self.kernel}) cannot be reproduced standalone")
'''
        data = "\n".join(textwrap.wrap(base64.b64encode(buffer.getvalue()).decode(), 100))
        return header + f'''import base64, io
import torch
import etops, etops.delegate
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.lowered_backend_module import LoweredBackendModule
from executorch.exir.serde.serialize import load as load_program

DATA = """
{data}
"""
data = torch.load(io.BytesIO(base64.b64decode(DATA)), weights_only=False)
args, spec = data["inputs"], data["lowered"]
store = NamedDataStore()
for key, blob, alignment in spec["named_data"]:
    store.add_named_data(key, blob, alignment)
lowered = LoweredBackendModule(
    load_program(io.BytesIO(spec["program"])),  # the original subgraph (edge dialect)
    spec["backend"],
    spec["processed"],
    [CompileSpec(key, value) for key, value in spec["compile_specs"]],
    store.get_named_data_store_output(),
)
run = etops.delegate.load(lowered, name=spec["name"])   # {self.kernel}
with torch.no_grad():
    expected = run._info.reference(*args)              # the original subgraph on ATen
actual = run(*args)                                     # the backend on its processed blob
actual = list(actual) if isinstance(actual, tuple) else [actual]
print("expected:", expected)
print("actual:  ", actual)
torch.testing.assert_close(actual, expected, rtol={self.rtol!r}, atol={self.atol!r})
'''

    def _measured(self) -> str:
        if self.status != "mismatch":
            return ""
        return f"max abs error {self.max_abs:.3g}, max rel error {self.max_rel:.3g}, {self.mismatched}/{self.numel} elements beyond rtol={self.rtol:g} atol={self.atol:g}\n"

    def write_reproducer(self, path) -> str:
        with open(path, "w") as f:
            f.write(self.reproducer())
        return str(path)


def _lowered_payload(lowered, name: str) -> dict:
    """What a reproducer needs to rebuild a LoweredBackendModule: its original
    subgraph serialized by exir's serde (edge ops included) and its backend's bytes."""
    from executorch.exir.serde.serialize import save as save_program

    from ..delegate.lowered import compile_specs, named_data

    program = io.BytesIO()
    save_program(lowered.original_module, program)
    return {
        "name": name,
        "backend": lowered.backend_id,
        "program": program.getvalue(),
        "processed": bytes(lowered.processed_bytes),
        "compile_specs": compile_specs(lowered),
        "named_data": [(key, bytes(blob), alignment) for key, blob, alignment in named_data(lowered)],
    }


def _target_expr(target) -> tuple[str, str]:
    if isinstance(target, EdgeOpOverload):
        aten = target._op
        dialect = "backend" if type(target).__name__ == "BackendOpOverload" else "edge"
        op = aten._schema.name.split("::")[1]
        return f"exir_ops.{dialect}.{aten.namespace}.{op}.{aten._overloadname}", "from executorch.exir.dialects._ops import ops as exir_ops"
    if isinstance(target, torch._ops.OpOverload):
        op = target._schema.name.split("::")[1]
        return f"torch.ops.{target.namespace}.{op}.{target._overloadname}", "import executorch.exir  # registers ExecuTorch's own ops with torch"
    module = getattr(target, "__module__", "") or ""
    module = {"_operator": "operator", "builtins": "builtins"}.get(module, module)
    return f"{module}.{target.__name__}", f"import {module.split('.')[0]}"


@dataclass
class OutputDiff:
    """One user output: the graph fully on ExecuTorch kernels vs eager PyTorch."""

    index: int
    dtype: str
    shape: tuple
    max_abs: float
    max_rel: float
    mismatched: int
    numel: int
    snr: float
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None and self.mismatched == 0


def _fmt(x: float) -> str:
    if x == 0:
        return "0"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        return "nan"
    return f"{x:.2e}"


def _fmt_snr(x: float) -> str:
    return "exact" if math.isinf(x) and x > 0 else _fmt(x) if not math.isinf(x) else "-inf"


class CompareReport:
    """The per-node comparison. ``str(report)`` is a plain-text table,
    ``report.to_markdown()`` markdown, ``report.plot(path)`` a PNG.
    ``report.first_divergence`` is the first node beyond tolerance (or whose
    kernel failed), with ``.reproducer()``."""

    COLUMNS = ("#", "node", "op", "kernel", "dtype", "shape", "max abs err", "max rel err", "mismatched", "SNR dB", "status")

    def __init__(self, results: list[NodeResult], end_to_end: list[OutputDiff], end_to_end_error: str | None, reference: str, stage: str, method: str):
        self.results = results
        self.end_to_end = end_to_end
        self.end_to_end_error = end_to_end_error
        self.reference = reference  #: what the end-to-end comparison is against
        self.stage = stage
        self.method = method

    # ---- queries -----------------------------------------------------------------

    @property
    def divergences(self) -> list[NodeResult]:
        return [r for r in self.results if not r.ok]

    @property
    def first_divergence(self) -> NodeResult | None:
        bad = self.divergences
        return bad[0] if bad else None

    @property
    def ok(self) -> bool:
        return not self.divergences

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self):
        return iter(self.results)

    @property
    def delegates(self) -> list[NodeResult]:
        """The rows of delegate calls."""
        return [r for r in self.results if r.is_delegate]

    def __getitem__(self, key):
        """A row by position, node name, or a delegate's name
        (``"XnnpackBackend::lowered_module_0"``)."""
        if isinstance(key, str):
            for r in self.results:
                if r.node == key or (r.is_delegate and r.kernel == key):
                    return r
            raise KeyError(key)
        return self.results[key]

    def _counted(self) -> str:
        delegates = len(self.delegates)
        kernels = len(self.results) - delegates
        counted = f"{kernels} kernel node{'s' if kernels != 1 else ''}"
        return f"{counted} and {delegates} delegate call{'s' if delegates != 1 else ''}" if delegates else counted

    # ---- rendering -----------------------------------------------------------------

    def _rows(self, rows: list[NodeResult]):
        for r in rows:
            measured = r.status in ("ok", "mismatch")
            yield (
                str(r.index),
                r.node,
                r.op,
                r.kernel or "-",
                r.dtype,
                "x".join(str(s) for s in r.shape) if r.shape else "()",
                _fmt(r.max_abs) if measured else "-",
                _fmt(r.max_rel) if measured else "-",
                f"{r.mismatched}/{r.numel}" if measured else "-",
                _fmt_snr(r.snr) if measured else "-",
                r.status if r.ok else r.status.upper(),
            )

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for r in self.results:
            counts[r.status] = counts.get(r.status, 0) + 1
        parts = [f"{n} {s}" for s, n in sorted(counts.items())]
        lines = [f"etops.edge.compare ({self.stage} program, method {self.method}): {self._counted()}: {', '.join(parts) or 'none'}"]
        first = self.first_divergence
        if first is not None:
            what = f"{first.kernel}, {first.op}" if first.is_delegate else f"{first.op} on {first.kernel or 'no kernel'}"
            lines.append(f"first divergence: #{first.index} {first.node} ({what}): {first.status}" + (f": {first.message}" if first.message else f", max abs err {_fmt(first.max_abs)}"))
            if first.source:
                lines.append(f"  from {first.source}")
        lines.append(self._end_to_end_line())
        return "\n".join(lines)

    def _end_to_end_line(self) -> str:
        on = "ExecuTorch kernels and delegates" if self.delegates else "ExecuTorch kernels"
        if self.end_to_end_error:
            return f"end to end (all nodes on {on} vs {self.reference}): not run: {self.end_to_end_error}"
        parts = []
        for o in self.end_to_end:
            if o.problem:
                parts.append(f"output {o.index}: {o.problem}")
            else:
                parts.append(f"output {o.index} {o.dtype} {list(o.shape)}: max abs {_fmt(o.max_abs)}, max rel {_fmt(o.max_rel)}, {o.mismatched}/{o.numel} beyond tolerance, SNR {_fmt_snr(o.snr)}")
        return f"end to end (all nodes on {on} vs {self.reference}): " + ("; ".join(parts) or "no outputs")

    def table(self, rows: list[NodeResult] | None = None, max_width: int = 48) -> str:
        """Plain-text table of ``rows`` (default: every node on graphs of up to
        200 kernel nodes, else the diverging ones)."""
        if rows is None:
            rows = self.results if len(self.results) <= 200 else self.divergences
        body = [tuple(c if len(c) <= max_width else c[: max_width - 1] + "…" for c in row) for row in self._rows(rows)]
        widths = [max([len(h)] + [len(row[i]) for row in body]) for i, h in enumerate(self.COLUMNS)]
        numeric = {0, 6, 7, 8, 9}

        def line(cells):
            return "  ".join(c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

        out = [line(self.COLUMNS), "  ".join("-" * w for w in widths)]
        out.extend(line(row) for row in body)
        if len(rows) < len(self.results):
            out.append(f"({len(self.results) - len(rows)} matching nodes not shown: report.table(report.results) shows all)")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.summary() + "\n\n" + self.table()

    def __repr__(self) -> str:
        return f"<CompareReport: {self._counted()}, {len(self.divergences)} diverging>"

    def to_markdown(self, rows: list[NodeResult] | None = None) -> str:
        """The summary and table as GitHub markdown."""
        if rows is None:
            rows = self.results if len(self.results) <= 200 else self.divergences

        def esc(s: str) -> str:
            return s.replace("|", "\\|")

        lines = [esc(line) + "  " for line in self.summary().splitlines()]
        lines.append("")
        lines.append("| " + " | ".join(self.COLUMNS) + " |")
        lines.append("|" + "|".join("---:" if i in (0, 6, 7, 8, 9) else "---" for i in range(len(self.COLUMNS))) + "|")
        for row, r in zip(self._rows(rows), rows):
            cells = [esc(c) for c in row]
            cells[1], cells[2], cells[3] = f"`{cells[1]}`", f"`{cells[2]}`", f"`{cells[3]}`"
            if not r.ok:
                cells[-1] = f"**{cells[-1]}**"
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def plot(self, path=None, title: str | None = None):
        """Error per node along the graph (max abs error, log scale; the allowed
        error at the worst element as a line; failures marked). Returns the
        matplotlib Figure; with ``path`` also writes it as PNG. Uses the Agg
        canvas directly (the global backend is left alone)."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(max(8.0, min(24.0, 0.08 * len(self.results) + 6)), 4.5), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        floor = 1e-12
        values = [max(r.max_abs, floor) if r.status in ("ok", "mismatch") and not math.isinf(r.max_abs) else None for r in self.results]
        ys = [v for v in values if v is not None]
        top = max(ys + [1.0]) * 10
        xs_ok = [r.index for r, v in zip(self.results, values) if v is not None and r.ok and not r.is_delegate]
        ax.scatter(xs_ok, [v for r, v in zip(self.results, values) if v is not None and r.ok and not r.is_delegate], s=12, color="tab:blue", label="within tolerance", zorder=3)
        delegated = [(r.index, v) for r, v in zip(self.results, values) if v is not None and r.ok and r.is_delegate]
        if delegated:
            ax.scatter([x for x, _ in delegated], [v for _, v in delegated], s=30, color="tab:purple", marker="s", label="delegate call within tolerance", zorder=3)
        xs_bad = [r.index for r, v in zip(self.results, values) if v is not None and not r.ok]
        ax.scatter(xs_bad, [v for r, v in zip(self.results, values) if v is not None and not r.ok], s=40, color="tab:red", marker="x", label="beyond tolerance", zorder=4)
        failed = [r for r in self.results if r.status not in ("ok", "mismatch") or math.isinf(r.max_abs)]
        if failed:
            ax.scatter([r.index for r in failed], [top] * len(failed), s=50, color="black", marker="v", label="kernel failed / missing / inf", zorder=4)
        ax.plot([r.index for r in self.results], [max(r.atol, floor) for r in self.results], color="tab:green", linewidth=0.8, drawstyle="steps-mid", label="atol (torch.testing default)")
        first = self.first_divergence
        if first is not None:
            y = top if first in failed else max(first.max_abs, floor)
            right = first.index > (len(self.results) - 1) / 2
            ax.annotate(f"{first.node}\n{first.kernel or first.op}", (first.index, y), textcoords="offset points", xytext=(-8 if right else 8, -24), ha="right" if right else "left", fontsize=8, color="tab:red")
        ax.set_yscale("log")
        ax.set_ylim(floor / 2, top * 3)
        ax.set_xlabel("kernel node / delegate call along the graph" if self.delegates else "kernel node along the graph")
        ax.set_ylabel("max abs error vs ATen (0 drawn at 1e-12)")
        what = "ExecuTorch kernels and delegates" if self.delegates else "ExecuTorch kernels"
        ax.set_title(title or f"{what} vs ATen, node by node ({len(self.results)} nodes, {len(self.divergences)} diverging)")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, format="png")
        return fig


class _CompareExecutor:
    """Runs a node with ATen (the value the graph goes on with) and, on the same
    inputs, with its ExecuTorch kernel; records the difference."""

    def __init__(self, rtol, atol, keep: int, progress: Progress):
        self.aten = AtenExecutor()
        self.executorch = ExecuTorchExecutor()
        self.rtol = rtol
        self.atol = atol
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
        rtol, atol = tolerances(tensor.dtype) if tensor is not None else (0.0, 0.0)
        rtol = rtol if self.rtol is None else self.rtol
        atol = atol if self.atol is None else self.atol
        d = Diff()
        if status == "ok":
            d = diff(actual, expected, self.rtol, self.atol)
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
    stride = [0] * len(shape)
    step = 1
    for d in reversed(spec.dim_order):
        stride[d] = step
        step *= max(shape[d], 1)
    if tuple(value.stride()) == tuple(stride):
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
    executor = _CompareExecutor(rtol, atol, keep_inputs, bar)
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
                        d = diff(a, e, rtol, atol)
                        t = e if isinstance(e, torch.Tensor) else None
                        e2e.append(OutputDiff(i, str(t.dtype).replace("torch.", "") if t is not None else type(e).__name__, tuple(t.shape) if t is not None else (), d.max_abs, d.max_rel, d.mismatched, d.numel, d.snr, d.problem))
    finally:
        bar.close()
    pre_emission = stage == "executorch" or type(program).__name__ == "ExecutorchProgramManager"
    return CompareReport(executor.results, e2e, e2e_error, reference, "pre-emission" if pre_emission else "edge", method)
