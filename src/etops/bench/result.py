"""BenchResult: the rows of a benchmark run, as a table, markdown, JSON or a plot."""

from __future__ import annotations

import json
import math

COLUMNS = ("kernel", "dtype", "size", "etops min / median", "ATen min / median", "ratio (ET/ATen)",
           "kernel time ET / ATen", "kernel ratio", "zero-size call ET / ATen", "agree", "verdict")

#: What the two ratio columns mean, printed under every table that has them.
RATIO_LEGEND = (
    "ratio (ET/ATen): time per call, ExecuTorch's kernel through etops / ATen's out= variant, outs "
    "preallocated on both sides (each side's call overhead included); "
    "kernel ratio: the same with each side's zero-size call subtracted, the kernels alone - "
    "it answers 'which kernel is faster' where the two disagree. Both: median of the per-round "
    "ratios ± half their interquartile range; 'no verdict' when that spread is at least the "
    "distance from 1 or the middle half of the rounds lies on both sides of 1 (the rounds do not "
    "say which side is faster)."
)


def fmt_time(seconds) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    a = abs(seconds)
    if a >= 1:
        return f"{seconds:.2f} s"
    if a >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    if a >= 1e-6:
        return f"{seconds * 1e6:.2f} us"
    return f"{seconds * 1e9:.0f} ns"


def verdict(summary) -> str | None:
    """What a ratio summary (median and quartiles of per-round ratios top / bottom)
    says: "faster" (top is), "slower", or "no verdict" when its rounds spread as far
    as the difference it reports: half the interquartile range at least the
    median's distance from 1, or the middle half of the rounds on both sides of 1.
    None without a summary."""
    if not summary:
        return None
    noise = (summary["q3"] - summary["q1"]) / 2
    if noise >= abs(summary["median"] - 1.0) or summary["q1"] <= 1.0 <= summary["q3"]:
        return "no verdict"
    return "faster" if summary["median"] < 1.0 else "slower"


def fmt_ratio(summary) -> str:
    """'1.23 ±0.04': the median of the per-round ratios, ± half their interquartile
    range; 'no verdict' when that spread covers the difference from 1."""
    if not summary:
        return "-"
    if verdict(summary) == "no verdict":
        return "no verdict"
    noise = (summary["q3"] - summary["q1"]) / 2
    return f"{summary['median']:.2f} ±{noise:.2f}"


def row_verdict(row) -> str:
    """Which side is faster by a row's ratios: the kernel ratio's verdict when it
    was measured (the kernels alone), else the call ratio's (said to be per call);
    a row whose two ratios disagree says which one answers."""
    call, kernel = verdict(row.get("ratio")), verdict(row.get("kernel_ratio"))
    if kernel is None:  # kernel times too close to the call overheads: the calls only
        return {"faster": "ET faster per call", "slower": "ET slower per call"}.get(call or "", call or "-")
    said = {"faster": "ET kernel faster", "slower": "ET kernel slower"}.get(kernel, "no verdict on the kernels")
    if call in (kernel, "no verdict", None):
        return said
    return f"{said} (the kernel ratio answers; the call ratio, overheads included, says {call})"


def _sort_key(row):
    for key in ("kernel_ratio", "ratio"):
        if row.get(key):
            return (0 if key == "kernel_ratio" else 1, -row[key]["median"])
    return (2, 0)


class BenchResult:
    """What ``etops.bench(...)`` returns: ``rows`` (one dict per kernel, dtype and
    size; times in seconds per call), ``threads`` (the counts used), ``machine``.

    ``table()`` is a rich Table, ``text()`` plain text, ``markdown()``,
    ``to_json()``, ``plot(path)`` a PNG; ``ranked()`` the rows slowest ratio first.

    A subclass renders other rows with the same code by giving ``columns`` (the
    first ``key_columns`` name the row; an error row puts its message in the next
    one), ``_cells(row)``, and ``_extra(row)`` for markdown's last column."""

    columns: tuple[str, ...] = COLUMNS
    key_columns = 3
    left_columns: tuple[str, ...] = ("kernel", "dtype", "agree")
    extra_column = "input"

    def __init__(self, rows: list[dict], threads: dict, machine: dict, settings: dict | None = None) -> None:
        self.rows = rows
        self.threads = threads
        self.machine = machine
        self.settings = settings or {}

    # ---- accessors -------------------------------------------------------------------

    def ranked(self) -> list[dict]:
        """Rows with a kernel-time ratio first, largest (ExecuTorch slowest) first;
        then rows with only a call ratio; then rows that could not be measured."""
        return sorted(self.rows, key=_sort_key)

    def ratios(self) -> dict:
        """(kernel, dtype, size) -> median ExecuTorch / ATen ratio per call."""
        return {(r["kernel"], r["dtype"], r["size"]): r["ratio"]["median"] for r in self.rows if r.get("ratio")}

    def summary(self) -> str:
        """'210 kernels: 150 measured, 3 failed, 40 without an OpInfo sample, 17 skipped (budget)'."""
        measured = sum(1 for r in self.rows if r.get("etops"))
        skipped = sum(1 for r in self.rows if r.get("skipped"))
        nosample = sum(1 for r in self.rows if "OpInfo sample" in (r.get("error") or ""))
        failed = len(self.rows) - measured - skipped - nosample
        text = f"{len(self.rows)} rows: {measured} measured, {failed} failed, {nosample} without an OpInfo sample, {skipped} skipped (time budget)"
        if "elapsed" in self.settings:
            text += f"; {self.settings['elapsed']} s in all"
        return text

    def _error_cells(self, keys: list[str], row) -> list[str]:
        return keys + [row.get("error") or row.get("skipped") or "-"] + [""] * (len(self.columns) - len(keys) - 1)

    def _extra(self, row) -> str:
        return row.get("shapes", "") + (f" ({row['input']})" if row.get("input") else "")

    def _cells(self, row) -> list[str]:
        if row.get("error") or not row.get("etops"):
            return self._error_cells([row["kernel"], row.get("dtype", "-"), row.get("size_label", "-")], row)
        e, a = row["etops"], row["aten"]
        ez, az = row.get("etops_zero"), row.get("aten_zero")
        return [
            row["kernel"], row["dtype"], row["size_label"],
            f"{fmt_time(e['min'])} / {fmt_time(e['median'])}",
            f"{fmt_time(a['min'])} / {fmt_time(a['median'])}",
            fmt_ratio(row["ratio"]),
            f"{fmt_time(row.get('etops_kernel'))} / {fmt_time(row.get('aten_kernel'))}" if ez else "-",
            fmt_ratio(row.get("kernel_ratio")),
            f"{fmt_time(ez['median'])} / {fmt_time(az['median'])}" if ez else "-",
            {True: "yes", False: "NO"}.get(row.get("agree"), "-"),
            row_verdict(row),
        ]

    #: What the ratio columns mean (RATIO_LEGEND), under the table; a subclass with
    #: other columns gives its own or None.
    legend: str | None = RATIO_LEGEND

    def header(self) -> str:
        t = self.threads
        m = self.machine
        s = self.settings
        return (f"threads: torch {t.get('torch')}, ExecuTorch {t.get('executorch')}"
                f"{' (one each by default; threads=N / --threads N sets both)' if t.get('torch') == t.get('executorch') == 1 else ''}; "
                f"{s.get('warmup', '?')} warm-up + {s.get('repeats', '?')} repeats, interleaved; "
                f"{m.get('cpu', '?')} ({m.get('cores', '?')} cores), torch {m.get('torch', '?')}, executorch {m.get('executorch', '?')}")

    # ---- renderings ------------------------------------------------------------------

    def table(self, title: str | None = None, rows: list[dict] | None = None):
        """A rich Table (print it with rich, or str(result) for plain text)."""
        from rich.table import Table

        table = Table(title=title, caption=self.header() + (f"\n{self.legend}" if self.legend else ""), show_lines=False)
        k = self.key_columns
        for col in self.columns:
            table.add_column(col, justify="left" if col in self.left_columns else "right", overflow="fold")
        for row in rows if rows is not None else self.rows:
            cells = self._cells(row)
            if cells[k + 1] == "" and cells[k]:
                table.add_row(*[_escape(c) for c in cells[:k]], "[red]" + _escape(cells[k]) + "[/red]" if row.get("error") else _escape(cells[k]), *cells[k + 1:])
            else:
                table.add_row(*[_escape(c) for c in cells])
        return table

    def text(self, rows: list[dict] | None = None) -> str:
        rows = rows if rows is not None else self.rows
        k = self.key_columns
        cells = [list(self.columns)] + [self._cells(r) for r in rows]
        widths = [max(len(c[i]) for c in cells if not (c is not cells[0] and c[k + 1] == "" and i == k)) for i in range(len(self.columns))]
        lines = []
        for c in cells:
            if c is not cells[0] and c[k + 1] == "" and c[k]:
                lines.append("  ".join(x.ljust(w) for x, w in zip(c[:k], widths[:k])) + "  " + c[k])
            else:
                lines.append("  ".join(x.ljust(w) if i < k else x.rjust(w) for i, (x, w) in enumerate(zip(c, widths))).rstrip())
        lines.append(self.header())
        if self.legend:
            lines.append(self.legend)
        return "\n".join(lines)

    def markdown(self, title: str | None = None, rows: list[dict] | None = None) -> str:
        rows = rows if rows is not None else self.rows
        out = []
        if title:
            out += [f"## {title}", ""]
        out += [self.header(), ""]
        if self.legend:
            out += [self.legend, ""]
        if "budget" in self.settings:
            out += [self.summary() + ".", ""]
        out.append("| " + " | ".join(self.columns) + f" | {self.extra_column} |")
        out.append("|" + "|".join("---" if i < self.key_columns or col in self.left_columns else "---:" for i, col in enumerate(self.columns)) + "|---|")
        for r in rows:
            cells = [c.replace("|", "\\|") for c in self._cells(r)]
            cells = [f"`{cells[0]}`"] + cells[1:]
            out.append("| " + " | ".join(cells) + " | " + self._extra(r).replace("|", "\\|") + " |")
        return "\n".join(out) + "\n"

    def to_dict(self, rows: list[dict] | None = None) -> dict:
        return {"threads": self.threads, "machine": self.machine, "settings": self.settings, "rows": self.rows if rows is None else rows}

    def to_json(self, path: str | None = None, rows: list[dict] | None = None) -> str:
        text = json.dumps(self.to_dict(rows), indent=1, default=str)
        if path:
            with open(path, "w") as f:
                f.write(text + "\n")
        return text

    def plot(self, path: str, title: str | None = None) -> str:
        """Writes a PNG: time per call against size (log-log, both sides, and the
        kernel time when measured), and the ExecuTorch / ATen ratio against size."""
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt

        fig, (ax_t, ax_r) = plt.subplots(1, 2, figsize=(12, 4.8))
        groups: dict = {}
        for r in self.rows:
            if r.get("etops") and r.get("ratio"):
                groups.setdefault((r["kernel"], r["dtype"]), []).append(r)
        many = len({k for k, _ in groups}) > 1
        for (kernel, dtype), rows in groups.items():
            rows = sorted(rows, key=lambda r: r["size"])
            x = [max(r["size"], 1) for r in rows]
            label = f"{kernel} {dtype}" if many else dtype
            for side, style in (("etops", "-o"), ("aten", "--s")):
                med = [r[side]["median"] for r in rows]
                lo = [r[side]["median"] - r[side]["q1"] for r in rows]
                hi = [r[side]["q3"] - r[side]["median"] for r in rows]
                ax_t.errorbar(x, med, yerr=[lo, hi], fmt=style, capsize=3, label=f"{'ExecuTorch' if side == 'etops' else 'ATen'} {label}")
            rat = [r["ratio"]["median"] for r in rows]
            drawn = ax_r.errorbar(x, rat, yerr=[[r["ratio"]["median"] - r["ratio"]["q1"] for r in rows], [r["ratio"]["q3"] - r["ratio"]["median"] for r in rows]],
                                  fmt="-o", capsize=3, label=f"per call {label}")
            kr = [(xx, r["kernel_ratio"]["median"]) for xx, r in zip(x, rows) if r.get("kernel_ratio")]
            if kr:
                ax_r.plot([a for a, _ in kr], [b for _, b in kr], ":^", color=drawn[0].get_color(), label=f"kernel time only {label}")
        ax_t.set_xscale("log")
        ax_t.set_yscale("log")
        ax_t.set_xlabel("elements (largest input)")
        ax_t.set_ylabel("seconds per call (median, IQR bars)")
        ax_t.set_title("time per call")
        ax_t.grid(True, which="both", alpha=0.3)
        ax_t.legend(fontsize=8)
        ax_r.set_xscale("log")
        ax_r.set_yscale("log")
        ax_r.axhline(1.0, color="grey", lw=1)
        ax_r.set_xlabel("elements (largest input)")
        ax_r.set_ylabel("ExecuTorch / ATen (median of paired rounds)")
        ax_r.set_title("ratio (below 1: ExecuTorch faster)")
        ax_r.grid(True, which="both", alpha=0.3)
        ax_r.legend(fontsize=8)
        kernels = sorted({k for k, _ in groups})
        fig.suptitle(title or (", ".join(kernels) + f"  -  threads: torch {self.threads.get('torch')}, ExecuTorch {self.threads.get('executorch')}"), fontsize=10)
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=110)
        plt.close(fig)
        return path

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<BenchResult: {len(self.rows)} rows; threads torch {self.threads.get('torch')}, ExecuTorch {self.threads.get('executorch')}>\n{self.text()}"

    def __rich__(self):
        return self.table()


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
