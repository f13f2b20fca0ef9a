"""The result of timing delegates side by side (etops.bench.delegates): the three
sides and the ratios reported, one row per delegate call as a table, text, JSON
and a plot (``DelegateBenchResult``). Imports this package's result module only."""

from __future__ import annotations

import collections

from .result import BenchResult, fmt_ratio, fmt_time

#: The three sides, in the order of the table, and how the table names them.
SIDES = ("delegate", "executorch", "aten")
SIDE_NAMES = {"delegate": "delegate", "executorch": "ExecuTorch kernels", "aten": "ATen"}
#: The ratios reported (numerator side, denominator side).
RATIOS = (("delegate", "aten"), ("executorch", "aten"), ("delegate", "executorch"))

COLUMNS = ("model", "delegate", "ops", "delegate min / median", "ET kernels min / median", "ATen min / median",
           "delegate / ATen", "ET kernels / ATen", "delegate / ET kernels", "agree")


def describe_ops(ops: list[str], width: int = 4) -> str:
    """'4: linear x2, relu x2': how many ops, then each distinct one."""
    counts = collections.Counter(ops)
    parts = [f"{name} x{n}" if n > 1 else name for name, n in counts.items()]
    shown = ", ".join(parts[:width]) + (", ..." if len(parts) > width else "")
    return f"{len(ops)}: {shown}" if ops else "0"


# ---- the result ------------------------------------------------------------------------


class DelegateBenchResult(BenchResult):
    """What ``etops.bench_delegate`` returns: one row per delegate call (``model``,
    ``name``: the lowered module's attribute, ``backend``, ``ops``) with the figures
    of each side (``row[side]`` for side in ``SIDES``: seconds per call, min, median,
    quartiles, samples), ``row["ratios"]``
    (``"delegate/aten"``, ``"executorch/aten"``, ``"delegate/executorch"``: per-round
    ratios summarised), ``agree`` and ``max_abs_diff`` against ATen per side.
    Renders as BenchResult does: ``text()``, ``table()``, ``markdown()``,
    ``to_json()``, ``plot(path)``."""

    columns = COLUMNS
    key_columns = 3
    left_columns: tuple[str, ...] = ("model", "delegate", "ops", "agree")
    legend = ("ratios: median of the per-round ratios ± half their interquartile range; 'no verdict' when "
              "that spread is at least the distance from 1 or the middle half of the rounds lies on both "
              "sides of 1 (the rounds do not say which side is faster).")
    extra_column = "inputs"

    def ranked(self) -> list[dict]:
        """Rows with a delegate / ATen ratio, largest (the delegate slowest) first."""
        def key(row):
            r = (row.get("ratios") or {}).get("delegate/aten")
            return (0, -r["median"]) if r else (1, 0)

        return sorted(self.rows, key=key)

    def ratios(self) -> dict:
        """(model, delegate name) -> {"delegate/aten": median, ...}."""
        return {(r["model"], r["name"]): {k: v["median"] for k, v in r["ratios"].items() if v}
                for r in self.rows if r.get("ratios")}

    def summary(self) -> str:
        measured = sum(1 for r in self.rows if r.get("aten") and isinstance(r.get("aten"), dict))
        partial = sum(1 for r in self.rows if r.get("side_errors"))
        text = f"{len(self.rows)} delegate calls: {measured} measured, {len(self.rows) - measured} failed"
        return text + (f", {partial} without every side" if partial else "")

    def _cells(self, row) -> list[str]:
        keys = [row.get("model", "-"), row.get("name", "-"), describe_ops(row.get("ops", []))]
        if row.get("error") or not isinstance(row.get("aten"), dict):
            return self._error_cells(keys, row)

        def side(name):
            s = row.get(name)
            if not isinstance(s, dict):
                return (row.get("side_errors") or {}).get(name, "-")
            return f"{fmt_time(s['min'])} / {fmt_time(s['median'])}"

        ratios = row.get("ratios") or {}
        agree = row.get("agree") or {}
        flags = [f"{SIDE_NAMES[k]} NO" for k in ("delegate", "executorch") if agree.get(k) is False]
        agreed = "NO: " + ", ".join(flags) if flags else ("yes" if agree else "-")
        return keys + [side("delegate"), side("executorch"), side("aten")] + [fmt_ratio(ratios.get(f"{a}/{b}")) for a, b in RATIOS] + [agreed]

    def _extra(self, row) -> str:
        text = row.get("shapes", "")
        notes = [row.get("input")] if row.get("input") else []
        if row.get("executorch_program") and row["executorch_program"] != "original subgraph":
            notes.append("ExecuTorch kernels: " + row["executorch_program"])
        return text + (f" ({'; '.join(notes)})" if notes else "")

    def plot(self, path: str, title: str | None = None) -> str:
        """Writes a PNG: per delegate call, the median time of each side (IQR bars, log scale)."""
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt

        rows = [r for r in self.rows if isinstance(r.get("aten"), dict)]
        fig, ax = plt.subplots(figsize=(10, 1.2 + 0.7 * max(1, len(rows))))
        height = 0.8 / len(SIDES)
        for j, name in enumerate(SIDES):
            ys, med, lo, hi = [], [], [], []
            for i, r in enumerate(rows):
                s = r.get(name)
                if isinstance(s, dict):
                    ys.append(i + (j - 1) * height)
                    med.append(s["median"])
                    lo.append(s["median"] - s["q1"])
                    hi.append(s["q3"] - s["median"])
            ax.barh(ys, med, height=height, xerr=[lo, hi], capsize=2, label=SIDE_NAMES[name])
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([f"{r['model']} {r['name']}\n{describe_ops(r.get('ops', []), 2)}" for r in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("seconds per call (median, IQR bars)")
        ax.grid(True, axis="x", which="both", alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title(title or f"delegate vs ExecuTorch kernels vs ATen  -  threads: torch {self.threads.get('torch')}, ExecuTorch {self.threads.get('executorch')}", fontsize=10)
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=110)
        plt.close(fig)
        return path

    def __repr__(self) -> str:
        return f"<DelegateBenchResult: {len(self.rows)} delegate calls; threads torch {self.threads.get('torch')}, ExecuTorch {self.threads.get('executorch')}>\n{self.text()}"
