"""What differs between two builds of the same kernels: two `etops check --json`
reports of the same kernels on two platforms (make test-aarch64 writes x86_64's and
aarch64's into build/aarch64/), compared case by case. Prints markdown: per kernel
and dtype the cases and passes on each platform, then every case whose outcome
differs (kernel, dtype, case, what each platform gave, which agrees with the
reference: a passing case agrees, by definition of the check). A measurement, not a
test: it exits 0 whatever differs (docs/aarch64.md holds the lane's table).

    python benchmarks/compare_platforms.py X86_64.json AARCH64.json [--names x86_64 aarch64]
"""

from __future__ import annotations

import argparse
import json

#: the per-case lists of a report (etops.conformance.report), each a non-passing status
CASE_LISTS = ("mismatches", "crashes", "hangs", "unsupported", "guarded", "errors")


def case_key(case: dict) -> tuple:
    """A case's identity across platforms: the same kernel, dtype, OpInfo and sample."""
    return (case["kernel"], case["dtype"], case.get("opinfo"), case.get("sample"), case.get("call"))


def non_passing(report: dict) -> dict:
    """case key -> the case, for every case that did not pass."""
    return {case_key(c): c for name in CASE_LISTS for c in report.get(name, [])}


def outcome(case: dict | None) -> str:
    """What a platform gave for a case: 'pass', or its status and what it computed."""
    if case is None:
        return "pass"
    detail = case.get("max_abs_error")
    text = case["status"] + (f" (max abs error {detail:.3g})" if isinstance(detail, (int, float)) else "")
    message = (case.get("message") or "").splitlines()[0][:100] if case.get("message") else ""
    return f"{text}: {message}" if message else text


def per_dtype(report: dict) -> dict:
    """(kernel, dtype) -> (cases, passes)."""
    rows = {}
    for row in report["kernels"]:
        for dtype, tally in (row.get("by_dtype") or {}).items():
            counts = tally["counts"]
            rows[(row["kernel"], dtype)] = (sum(counts.values()), counts.get("pass", 0))
    return rows


def compare(first: dict, second: dict, names: tuple[str, str]) -> str:
    """The markdown comparison of two reports."""
    a, b = names
    lines = [f"# {a} vs {b}: the same `etops check`", "",
             f"{a}: {first['totals']['cases']} cases in {first['seconds']} s; "
             f"{b}: {second['totals']['cases']} cases in {second['seconds']} s.", "",
             f"| kernel | dtype | cases {a} | passed {a} | cases {b} | passed {b} |", "|---|---|---|---|---|---|"]
    rows_a, rows_b = per_dtype(first), per_dtype(second)
    for key in sorted(rows_a.keys() | rows_b.keys()):
        ca, pa = rows_a.get(key, (0, 0))
        cb, pb = rows_b.get(key, (0, 0))
        mark = "" if (ca, pa) == (cb, pb) else " **differs**"
        lines.append(f"| {key[0]} | {key[1]} | {ca} | {pa} | {cb} | {pb}{mark} |")
    both = {r["kernel"] for r in first["kernels"]} & {r["kernel"] for r in second["kernels"]}  # judged on both only
    cases_a = {k: c for k, c in non_passing(first).items() if k[0] in both}
    cases_b = {k: c for k, c in non_passing(second).items() if k[0] in both}
    differing = sorted(k for k in cases_a.keys() | cases_b.keys()
                       if (cases_a.get(k) or {}).get("status") != (cases_b.get(k) or {}).get("status"))
    lines += ["", f"## Cases whose outcome differs ({len(differing)})", ""]
    if differing:
        lines += [f"| kernel | dtype | case | {a} | {b} | agrees with the reference |", "|---|---|---|---|---|---|"]
        for key in differing:
            ca, cb = cases_a.get(key), cases_b.get(key)
            agrees = a if ca is None else b if cb is None else "neither"
            case = f"{key[2]} #{key[3]}"
            lines.append(f"| {key[0]} | {key[1]} | {case} | {outcome(ca)} | {outcome(cb)} | {agrees} |")
    else:
        lines.append("None: every case passes or fails the same way on both platforms.")
    same = sorted(k for k in cases_a.keys() & cases_b.keys() if cases_a[k]["status"] == cases_b[k]["status"])
    lines += ["", f"Cases failing the same way on both: {len(same)}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--names", nargs=2, default=("x86_64", "aarch64"))
    args = parser.parse_args()
    with open(args.first) as f:
        first = json.load(f)
    with open(args.second) as f:
        second = json.load(f)
    print(compare(first, second, tuple(args.names)), end="")


if __name__ == "__main__":
    main()
