"""Conformance hooks of ``etops check --dim-orders MODE``: which kernels honour the
dim order of their inputs. The same sweep, with every dense input laid out anew
(same values):

- ``channels-last``: rank-4 inputs channels-last, rank-5 ones channels-last-3d, the
  one non-contiguous order an exported program gives a kernel (where the model asks
  for that memory format); etops passes them zero-copy, as a program does. A
  mismatch or crash here is a kernel bug a program can hit.
- ``reversed``: rank >= 2 inputs in the reversed dim order (``[1, 0]``,
  ``[3, 2, 1, 0]``), passed with their true dim order (``etops.layout("preserve")``):
  no program produces these; a mismatch is a kernel that ignores dim orders.

In the report a **mismatch** is a kernel that reads memory as if contiguous,
**unsupported** one that refuses the order (a KernelError: the right answer) and
**pass** one that handles it.

``etops check --dim-order-axis`` (``run_axis``) makes dim orders a dimension of one
sweep: every case runs also in each dense layout of ``AXIS_LAYOUTS`` that differs
from contiguous for its inputs (``channels-last`` for rank 4 and 5, ``transposed``:
the last two dims swapped, rank >= 2), always under ``etops.layout("preserve")``;
cases with no input to lay out anew are left out of that layout. A case that
passes contiguous and fails laid out is a dim-order finding; per kernel and layout
the ``Axis`` says: silently wrong (a mismatch), crashes, refuses (KernelError),
honours, or no input to lay out. Imports the core and the conformance sweep.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from ..layouts import layout


def _relaid(value, lay):
    if isinstance(value, (list, tuple)):
        return type(value)(_relaid(v, lay) for v in value)
    if not isinstance(value, torch.Tensor) or not value.is_contiguous() or value.numel() < 2:
        return value
    return lay(value)


def _reversed(t: torch.Tensor) -> torch.Tensor:
    if t.dim() < 2:
        return t
    flipped = tuple(range(t.dim() - 1, -1, -1))
    return t.permute(flipped).contiguous().permute(flipped)


def _channels_last(t: torch.Tensor) -> torch.Tensor:
    if t.dim() == 4:
        return t.contiguous(memory_format=torch.channels_last)
    if t.dim() == 5:
        return t.contiguous(memory_format=torch.channels_last_3d)
    return t


def _transposed(t: torch.Tensor) -> torch.Tensor:
    if t.dim() < 2:
        return t
    order = list(range(t.dim() - 2)) + [t.dim() - 1, t.dim() - 2]
    return t.permute(order).contiguous().permute(order)


#: (layout, shape) -> whether the layout lays a contiguous tensor of that shape out
#: anew (it depends on the shape alone; asked for every case of the axis)
_CHANGES: dict = {}


def _changes(lay, shape) -> bool:
    key = (lay, shape)
    found = _CHANGES.get(key)
    if found is None:
        if len(_CHANGES) >= 1 << 14:
            _CHANGES.clear()
        found = _CHANGES[key] = not lay(torch.empty(shape, dtype=torch.uint8)).is_contiguous()
    return found


def _relaid_any(value, lay) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_relaid_any(v, lay) for v in value)
    return (isinstance(value, torch.Tensor) and value.is_contiguous() and value.numel() >= 2
            and _changes(lay, tuple(value.shape)))


class _Mode:
    """The hooks of one mode (see the module doc); `only_relaid`: cases whose
    inputs this layout leaves as they are are not checked (the axis)."""

    def __init__(self, lay, preserve: bool, only_relaid: bool = False):
        self._lay, self._preserve = lay, preserve
        if only_relaid:
            self.applies = self._applies

    def _applies(self, case, args, kwargs) -> bool:
        return _relaid_any(list(args) + list(kwargs.values()), self._lay)

    def inputs(self, case, args, kwargs):
        return [_relaid(a, self._lay) for a in args], {k: _relaid(v, self._lay) for k, v in kwargs.items()}

    def calling(self, case):
        return layout("preserve") if self._preserve else nullcontext()


reversed_orders = _Mode(_reversed, preserve=True)
channels_last = _Mode(_channels_last, preserve=False)

#: --dim-orders value -> hooks spec
MODES = {"reversed": f"{__name__}:reversed_orders", "channels-last": f"{__name__}:channels_last"}

#: the dim-order axis: layout name -> hooks (every one under etops.layout("preserve"))
axis_channels_last = _Mode(_channels_last, preserve=True, only_relaid=True)
axis_transposed = _Mode(_transposed, preserve=True, only_relaid=True)
AXIS_LAYOUTS = {"channels-last": f"{__name__}:axis_channels_last", "transposed": f"{__name__}:axis_transposed"}

#: the axis' layout -> the rules table's name for it (etops.ops.WRONG_LAYOUTS)
TABLE_LAYOUT = {"channels-last": "channels-last", "transposed": "permuted"}

#: per-kernel verdicts of the axis, worst first
VERDICTS = ("silently wrong", "crashes", "refuses", "other failure", "honours", "no input to lay out")
_VERDICT_OF = {"mismatch": "silently wrong", "crash": "crashes", "abort": "aborts", "unsupported": "refuses", "guarded": "other failure", "error": "other failure"}
#: cases recorded per kernel, OpInfo, dtype and status while the axis runs (the
#: contiguous run's records tell a dim-order finding from a failure of the case itself)
AXIS_MAX_DETAILS = 50


def _cases_of(report, kernel: str) -> int:
    """Cases of `kernel` a sweep checked (every status)."""
    return sum(sum(t.counts.values()) for (k, _), t in report.tallies.items() if k == kernel)


class Axis:
    """What the dim-order axis found: per layout, the layout's sweep and its
    dim-order findings (cases failing laid out that do not fail contiguous), the
    clusters of those, and a verdict per kernel."""

    def __init__(self, base, runs: dict):
        self.base = base
        self.runs = runs  # layout -> Report
        failing = {case: outcome[0] for case, outcome in base.failing.items()}  # every one, not only those recorded
        self.findings = {name: [c for c in r.details if c.status != "pass" and failing.get(c.id) != c.status]
                         for name, r in runs.items()}
        self.clusters: dict = {name: [] for name in runs}

    def verdict(self, layout: str, kernel: str) -> str:
        found = [c for c in self.findings[layout] if c.kernel == kernel]
        if found:
            return min((_VERDICT_OF[c.status] for c in found), key=VERDICTS.index)
        return "honours" if _cases_of(self.runs[layout], kernel) else "no input to lay out"

    def kernel_rows(self) -> list[dict]:
        """One row per kernel of the contiguous sweep: its verdict, cases checked and
        first reproducer per layout; the worst kernels first."""
        rows = []
        for kernel in self.base.reached():
            row = {"kernel": kernel, "layouts": {}}
            for name, report in self.runs.items():
                repro = next((c.reproducer for c in self.clusters[name] if c.kernel == kernel and c.reproducer), None)
                row["layouts"][name] = {
                    "verdict": self.verdict(name, kernel),
                    "cases": _cases_of(report, kernel),
                    "findings": sum(1 for c in self.findings[name] if c.kernel == kernel),
                    "reproducer": repro,
                }
            rows.append(row)
        rows.sort(key=lambda r: (min(VERDICTS.index(v["verdict"]) for v in r["layouts"].values()), r["kernel"]))
        return rows

    def to_json(self) -> dict:
        return {"layouts": list(self.runs), "kernels": self.kernel_rows(),
                "findings": {name: [c.to_json() for c in cl] for name, cl in self.clusters.items()},
                "not_in_rules_table": [list(p) for p in self.unrecorded()]}

    def counts(self) -> dict:
        """layout -> verdict -> kernels."""
        out = {}
        for name in self.runs:
            tally = dict.fromkeys(VERDICTS, 0)
            for kernel in self.base.reached():
                tally[self.verdict(name, kernel)] += 1
            out[name] = tally
        return out

    def unrecorded(self) -> list[tuple[str, str]]:
        """(kernel, layout) pairs this axis finds silently wrong that the rules
        table's wrong_layouts do not record (the table is kept current from these)."""
        from ..ops import rules_for

        out = []
        for kernel in self.base.reached():
            for name in self.runs:
                if self.verdict(name, kernel) == "silently wrong" and rules_for(kernel).judging.wrong_on(TABLE_LAYOUT[name]) is None:
                    out.append((kernel, TABLE_LAYOUT[name]))
        return out

    def terminal_lines(self) -> list[str]:
        lines = ["dim-order axis (under etops.layout('preserve')):"]
        for name, tally in self.counts().items():
            lines.append(f"  {name}: " + ", ".join(f"{n} {v}" for v, n in tally.items() if n))
        missing = self.unrecorded()
        if missing:
            lines.append("  silently wrong, not yet in the rules table's wrong_layouts (etops/ops/aten.py): "
                         + ", ".join(f"{k} [{layout}]" for k, layout in missing))
        for row in self.kernel_rows():
            bad = {n: v for n, v in row["layouts"].items() if v["verdict"] in ("silently wrong", "crashes", "refuses")}
            for name, v in bad.items():
                lines.append(f"  {row['kernel']} [{name}]: {v['verdict']}" + (f" - {v['reproducer']}" if v["reproducer"] else ""))
        return lines

    def markdown_lines(self) -> list[str]:
        names = list(self.runs)
        out = ["## Dim-order axis", "",
               "Each case also ran with its tensors laid out anew under `etops.layout(\"preserve\")`: "
               + ", ".join(f"*{n}*" for n in names) + ". Kernels that go silently wrong first.", "",
               "| kernel | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        for row in self.kernel_rows():
            cells = []
            for name in names:
                v = row["layouts"][name]
                repro = f" (`findings/{v['reproducer'].rsplit('/', 1)[-1]}`)" if v["reproducer"] else ""
                cells.append(f"{v['verdict']}, {v['cases']} cases{repro}")
            out.append(f"| `{row['kernel']}` | " + " | ".join(cells) + " |")
        return out


def run_axis(kernels, base, *, report_dir=None, shrink: bool = True, **run_options) -> Axis:
    """The dim-order axis of a sweep: `base` (the contiguous sweep, run with
    max_details=AXIS_MAX_DETAILS) and one sweep per layout of AXIS_LAYOUTS with
    the same options; its findings clustered (shrunk, with reproducers written to
    REPORT_DIR/findings/)."""
    from .clusters import build
    from .sweep import run

    run_options = {**run_options, "max_details": max(run_options.get("max_details") or 0, AXIS_MAX_DETAILS)}
    runs = {name: run(kernels, hooks=hooks, report_dir=None, **run_options) for name, hooks in AXIS_LAYOUTS.items()}
    axis = Axis(base, runs)
    for name, hooks in AXIS_LAYOUTS.items():
        axis.clusters[name] = build(runs[name], report_dir=report_dir, hooks=hooks, layout=name, preserve=True,
                                    shrink=shrink, cases=axis.findings[name])
    return axis
