"""The report of ``etops.edge.compare``: one ``NodeResult`` per kernel node or
delegate call, one ``OutputDiff`` per user output end to end, and the
``CompareReport`` that holds them with its renderings (plain-text table,
markdown, matplotlib plot).

May import torch, matplotlib (lazily, in ``plot``) and ``reproducer`` (the
scripts of diverging rows); not the executor (``_compare``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import reproducer as _scripts

__all__ = ["CompareReport", "NodeResult", "OutputDiff"]


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
            return _scripts.delegate_script(self)
        return _scripts.node_script(self)

    def write_reproducer(self, path) -> str:
        with open(path, "w") as f:
            f.write(self.reproducer())
        return str(path)


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
