"""Every float64 kernel's effective precision as a markdown table, from the JSON
report of a sweep (``etops check --json``): per kernel the worst error of
ExecuTorch's results and of ATen's, in ulps of float64 at the output's scale,
against the more precise reference (etops.conformance.effective), the cases
measured and how many of them against a longdouble evaluation, which bound of
the verdict the worst error is within, and the kernel's worst finding at that
dtype. Worst first.

    python -m etops.conformance.precision_table build/conformance/report.json > table.md

Imports the standard library and etops.conformance.effective (for its bounds)."""

from __future__ import annotations

import argparse
import json
import sys

from .effective import LOSS_MULTIPLE, LOSS_ULPS


_ORDER = ("wrong", "precision loss", "within ATen's error")


def rows(data: dict, dtype: str = "float64") -> list[dict]:
    """One row per kernel with measured `dtype` cases in a JSON report: kernel,
    worst (ExecuTorch's ulps), aten (ATen's), cases, longdouble (cases measured
    against longdouble), bound (which bound of effective.judge the worst error is
    within) and finding (the worst value finding of the kernel at `dtype`, with
    its reason; "" when none)."""
    findings: dict = {}
    for f in data.get("findings", []):
        if f.get("category") in _ORDER and dtype in f.get("dtypes", []):
            signature = f.get("signature") or ""
            reason = signature.rsplit("(", 1)[1].rstrip(")") if "(computes " in signature else ""
            mine = (_ORDER.index(f["category"]), f["category"] + (f" ({reason})" if reason else ""))
            findings[f["kernel"]] = min(findings.get(f["kernel"], mine), mine)
    out = []
    for kernel in data.get("kernels", []):
        ulps = (kernel.get("by_dtype", {}).get(dtype) or {}).get("ulps")
        if not ulps:
            continue
        worst, aten = ulps["worst"], ulps["aten"]
        if worst <= aten:
            bound = "within ATen's error"
        elif worst <= LOSS_MULTIPLE * aten + LOSS_ULPS:
            bound = "within the loss bound"
        else:
            bound = "beyond"
        mismatched = kernel["by_dtype"][dtype]["counts"].get("mismatch", 0)  # a finding only where a case at dtype mismatched
        out.append({"kernel": kernel["kernel"], "worst": worst, "aten": aten, "cases": ulps["cases"],
                    "longdouble": ulps["longdouble"], "bound": bound,
                    "finding": findings.get(kernel["kernel"], (0, ""))[1] if mismatched else ""})
    out.sort(key=lambda r: (-r["worst"], r["kernel"]))
    return out


def _ulps(x: float) -> str:
    if x == float("inf"):
        return "inf"
    return "0" if x == 0 else f"{x:.3g}"


def markdown(data: dict, dtype: str = "float64") -> str:
    table = rows(data, dtype)
    lines = [f"| kernel | ExecuTorch's worst error (ulps of {dtype}) | ATen's | cases (against longdouble) | bound | finding |",
             "|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| `{r['kernel']}` | {_ulps(r['worst'])} | {_ulps(r['aten'])} | {r['cases']} ({r['longdouble']}) | "
                     f"{r['bound']} | {r['finding'] or 'none'} |")
    counts: dict = {}
    for r in table:
        counts[r["bound"]] = counts.get(r["bound"], 0) + 1
    lines += ["", f"{len(table)} kernels with {dtype} cases: " + ", ".join(f"{n} {v}" for v, n in counts.items())
              + f" (within ATen's error: <= ATen's; the loss bound: {LOSS_MULTIPLE} x ATen's + {LOSS_ULPS} ulps; "
              "ATen's error is 0 where no case had a longdouble evaluation: its own float64 result was the reference)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m etops.conformance.precision_table", description=__doc__.split("\n\n")[0])
    parser.add_argument("report", help="a JSON report of etops check (--json)")
    parser.add_argument("--dtype", default="float64", help="the dtype whose effective precision to list (float64)")
    args = parser.parse_args(argv)
    with open(args.report) as f:
        sys.stdout.write(markdown(json.load(f), args.dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main())
