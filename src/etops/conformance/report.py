"""The report of a sweep as JSON, markdown and a terminal table."""

from __future__ import annotations

import datetime
import json

import torch

from .case import STATUSES
from .values import clip
from .sweep import Report

SCHEMA = "etops.conformance.report/1"

#: What a JSON report holds (checked by the tests): key -> type.
JSON_SCHEMA = {
    "schema": str,
    "headline": str,
    "findings": list,
    "logged_errors": list,
    "created": str,
    "versions": dict,
    "options": dict,
    "seconds": float,
    "totals": dict,
    "coverage": dict,
    "kernels": list,
    "mismatches": list,
    "crashes": list,
    "hangs": list,
    "unsupported": list,
    "guarded": list,
    "errors": list,
    "task_errors": list,
    "namespaces": list,
}
KERNEL_KEYS = ("kernel", "cases", *STATUSES, "dtypes", "dtypes_passing", "opinfos", "max_abs_error", "max_rel_error", "by_dtype")
CASE_KEYS = ("kernel", "aten_op", "opinfo", "dtype", "sample", "call", "status", "message", "inputs", "max_abs_error",
             "max_rel_error", "atol", "rtol", "reproducer", "rule", "verdict", "reference_error", "aten_reference_error",
             "ulps", "aten_ulps", "reference", "reason", "base_ulps", "outcome", "limit_seconds", "logged")


def _versions() -> dict:
    import etops

    try:
        from importlib.metadata import version

        et = version("executorch")
    except Exception:  # noqa: BLE001
        et = None
    return {"etops": etops.__version__, "torch": torch.__version__, "executorch": et}


def _clusters(report: Report, clusters):
    """The clusters given, else the report's cases grouped (no kernel runs)."""
    if clusters is not None:
        return clusters
    from .clusters import group

    return group(report.details)


def to_json(report: Report, clusters=None, axis=None, numerics=None) -> dict:
    """The report as JSON, the findings (clusters) first; `axis`: a dim-order
    axis (etops.conformance.dim_orders.Axis) when one ran."""
    clusters = _clusters(report, clusters)
    from .clusters import headline

    return {
        "schema": SCHEMA,
        "headline": headline(report, clusters),
        "findings": [c.to_json() for c in clusters],
        "logged_errors": [c.to_json() for c in getattr(report, "logged", {}).values()],
        **({"dim_order_axis": axis.to_json()} if axis is not None else {}),
        **({"numerics_axis": numerics.to_json()} if numerics is not None else {}),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": _versions(),
        "options": {"kernels": report.selected, "dtypes": report.dtypes, "isolated": report.isolated, "jobs": report.jobs,
                    "report_dir": report.report_dir},
        "seconds": round(report.seconds, 2),
        "discovery_seconds": round(report.discovery_seconds, 2),
        "tasks": report.tasks,
        "samples": report.samples,
        "samples_failed": report.samples_failed,
        "totals": report.totals(),
        "coverage": report.coverage(),
        **({"generated_coverage": report.generated} if report.generated is not None else {}),
        "kernels": report.kernel_rows(),
        "mismatches": [c.to_json() for c in report.cases("mismatch")],
        "crashes": [c.to_json() for c in report.cases("crash")],
        "hangs": [c.to_json() for c in report.cases("hang")],
        "unsupported": [c.to_json() for c in report.cases("unsupported")],
        "guarded": [c.to_json() for c in report.cases("guarded")],
        "errors": [c.to_json() for c in report.cases("error")],
        "task_errors": report.task_errors,
        "namespaces": report.namespaces(),
    }


def write_json(report: Report, path, clusters=None, axis=None, numerics=None) -> None:
    with open(path, "w") as f:
        json.dump(to_json(report, clusters, axis, numerics), f, indent=1)


def _fmt(x) -> str:
    if x is None:
        return ""
    if x == float("inf"):
        return "inf"
    return f"{x:.3g}"


def summary_line(report: Report) -> str:
    t = report.totals()
    cov = report.coverage()
    return (f"{t['cases']} cases: {t['pass']} pass, {t['mismatch']} mismatch, {t['unsupported']} unsupported, "
            f"{t['guarded']} guarded, {t['error']} error, {t['crash']} crash, {t['hang']} hang, {t['abort']} abort; kernels reached {cov['reached']}/{cov['registered']} "
            f"({100 * cov['fraction']:.0f}%); {report.tasks} tasks, {report.samples} samples in {report.seconds:.0f}s")


def namespace_lines(report: Report, markdown_table: bool = False) -> list[str]:
    """Coverage per namespace: kernels registered / reached / passing (every case
    passed), as a plain-text or markdown table."""
    rows = report.namespaces()
    if markdown_table:
        out = ["| namespace | registered | reached | passing | not reached |", "|---|---|---|---|---|"]
        out += [f"| `{r['namespace']}` | {r['registered']} | {r['reached']} | {r['passing']} | "
                f"{', '.join(f'`{k}`' for k in r['unreached'])} |" for r in rows]
        return out
    width = max([len("namespace")] + [len(r["namespace"]) for r in rows])
    out = [f"{'namespace'.ljust(width)}  registered  reached  passing"]
    out += [f"{r['namespace'].ljust(width)}  {r['registered']:>10}  {r['reached']:>7}  {r['passing']:>7}" for r in rows]
    return out


def table_rows(report: Report) -> list[list[str]]:
    rows = []
    for r in report.kernel_rows():
        rows.append([r["kernel"], str(r["cases"]), *(str(r[s]) for s in STATUSES), _fmt(r["max_abs_error"]), _fmt(r["max_rel_error"]),
                     " ".join(r["dtypes"])])
    return rows


HEADER = ["kernel", "cases", *STATUSES, "max abs err", "max rel err", "dtypes"]


def case_count(cluster, report: Report | None = None) -> str:
    """The cases of a finding: those recorded, and how many cases of its kind the
    kernel had in all when the report counted more ("56 recorded of 724")."""
    total = None
    if report is not None:
        total = sum(t.counts.get(cluster.kind, 0) for (k, _), t in report.tallies.items() if k == cluster.kernel)
    n = len(cluster.cases)
    return f"{n} recorded of the kernel's {total} {cluster.kind} cases" if total and total > n else f"{n} cases"


def finding_lines(clusters, limit: int | None = None, report: Report | None = None) -> list[str]:
    """One line per cluster (its summary), with its reproducer beneath."""
    lines = []
    for c in clusters[:limit]:
        lines.append(f"  [{c.category}] {c.summary}" + (f" ({case_count(c, report)})" if len(c.cases) > 1 or report is not None else ""))
        if c.reproducer:
            lines.append(f"      reproducer: {c.reproducer}")
    if limit is not None and len(clusters) > limit:
        lines.append(f"  ... {len(clusters) - limit} more in the markdown/JSON report")
    return lines


def logged_lines(report: Report, shown: int = 10) -> list[str]:
    """The passing cases whose kernel logged an error (etops._logs), a line each
    (the first `shown`): a pass, but not a silent one."""
    cases = list(getattr(report, "logged", {}).values())
    lines = [f"  [logged an error] {c.kernel} [{c.opinfo}, {c.dtype}, s{c.sample}c{c.call}] passed but logged: {c.logged}"
             for c in cases[:shown]]
    return lines + ([f"  ... and {len(cases) - shown} more passing cases that logged an error"] if len(cases) > shown else [])


def terminal(report: Report, width: int | None = None, clusters=None, axis=None, numerics=None) -> str:
    """The findings (clusters, worst kind first), the dim-order axis when one ran,
    a plain-text table (one row per kernel reached) and the summary."""
    from .clusters import headline

    clusters = _clusters(report, clusters)
    lines = [headline(report, clusters)]
    lines.extend(finding_lines(clusters, 40, report))
    lines.extend(logged_lines(report))
    for extra in (axis, numerics):
        if extra is not None:
            lines.append("")
            lines.extend(extra.terminal_lines())
    lines.append("")
    rows = table_rows(report)
    widths = [max(len(HEADER[i]), *(len(r[i]) for r in rows)) if rows else len(HEADER[i]) for i in range(len(HEADER) - 1)]
    fmt_row = lambda r: "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r[:-1])) + "  " + r[-1]  # noqa: E731
    lines.append(fmt_row(HEADER))
    lines.append("-" * min(sum(widths) + 2 * len(widths) + 6, width or 200))
    for r in rows:
        lines.append(fmt_row(r))
    cov = report.coverage()
    lines.append("")
    lines.extend(namespace_lines(report))
    if cov["unreached"]:
        lines.append("")
        lines.append(f"not reached by any sample ({len(cov['unreached'])}): " + ", ".join(cov["unreached"]))
    mism = report.cases("mismatch")
    for word, status in (("crashes", "crash"), ("hangs (no return within the case's limit)", "hang")):
        crashes = report.cases(status)
        if not crashes:
            continue
        lines.append("")
        lines.append(f"{word} ({len(crashes)}):")
        for c in crashes:
            lines.append(f"  {c.kernel} via {c.aten_op} [{c.opinfo}, {c.dtype}, s{c.sample}c{c.call}]: {clip(c.message, 120)}" + (f"\n    reproducer: {c.reproducer}" if c.reproducer else ""))
    if mism:
        lines.append("")
        lines.append(f"mismatches (first {min(len(mism), 20)} of {len(mism)} recorded; all in the markdown/JSON report):")
        for c in mism[:20]:
            lines.append(f"  {c.kernel} [{c.opinfo}, {c.dtype}, s{c.sample}c{c.call}] abs {_fmt(c.max_abs_error)} rel {_fmt(c.max_rel_error)}: {clip(c.message, 100)}")
    lines.append("")
    lines.append(summary_line(report))
    return "\n".join(lines)


def md_escape(text: str) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def markdown(report: Report, clusters=None, axis=None, numerics=None) -> str:
    """The markdown report: the findings first (one row per cluster), the
    dim-order axis when one ran, then the counts and the cases."""
    from .clusters import headline

    clusters = _clusters(report, clusters)
    t = report.totals()
    cov = report.coverage()
    out = ["# etops conformance report", ""]
    v = _versions()
    out.append(f"ExecuTorch kernels against ATen on PyTorch's OpInfo samples. etops {v['etops']}, torch {v['torch']}, "
               f"executorch {v['executorch']}; {'isolated, ' if report.isolated else ''}{report.jobs} job(s); "
               f"dtypes: {', '.join(report.dtypes) if report.dtypes else 'every dtype OpInfo lists for CPU'}.")
    out.append("")
    out.append("## Findings")
    out.append("")
    out.append(f"**{headline(report, clusters)}.** One finding per root cause: cases grouped by kernel, kind and "
               "signature (for a mismatch what differs and its verdict against a float64/complex128 reference: *wrong*, "
               "*precision loss* within the dtype's tolerance, or *within ATen's error*; the guard; or the message with "
               "numbers and dtype names taken out), whatever their dtypes; each shrunk to its smallest failing input.")
    if clusters:
        out.append("")
        out.append("| kind | kernel | dtypes | cases | summary | reproducer |")
        out.append("|---|---|---|---|---|---|")
        for c in clusters:
            repro = f"`findings/{c.reproducer.rsplit('/', 1)[-1]}`" if c.reproducer else ""
            out.append(f"| {c.category} | `{c.kernel}` | {' '.join(c.dtypes)} | {case_count(c, report)} | {md_escape(c.summary)} | {repro} |")
    for extra in (axis, numerics):
        if extra is not None:
            out.append("")
            out.extend(extra.markdown_lines())
    out.append("")
    out.append("## Summary")
    out.append("")
    out.append("| cases | " + " | ".join(STATUSES) + " | kernels reached | time |")
    out.append("|---" * (len(STATUSES) + 3) + "|")
    out.append(f"| {t['cases']} | " + " | ".join(str(t[s]) for s in STATUSES) + " | "
               f"{cov['reached']} / {cov['registered']} ({100 * cov['fraction']:.0f}%) | {report.seconds:.0f} s |")
    out.append("")
    out.append(f"{report.tasks} tasks (OpInfo x dtype), {report.samples} samples ({report.samples_failed} refused by ATen itself). "
               "Statuses: *mismatch* values beyond OpInfo's tolerance, or another dtype/shape; *unsupported* the kernel "
               "failed where ATen accepted (ExecuTorch restricts dtypes on purpose); *guarded* etops' own pre-call "
               "guard refused the call (the kernel is known to abort or corrupt memory on it); *error* etops could not make the "
               "call (an etops bug); *crash* the worker died in the kernel.")
    out.append("")
    out.append("## Per kernel")
    out.append("")
    out.append("| kernel | cases | " + " | ".join(STATUSES) + " | max abs err | max rel err | dtypes (all passing in bold) |")
    out.append("|---" * (len(STATUSES) + 5) + "|")
    for r in report.kernel_rows():
        dts = " ".join(f"**{d}**" if d in r["dtypes_passing"] else d for d in r["dtypes"])
        out.append(f"| `{r['kernel']}` | {r['cases']} | " + " | ".join(str(r[s]) for s in STATUSES) + " | "
                   f"{_fmt(r['max_abs_error'])} | {_fmt(r['max_rel_error'])} | {dts} |")
    out.append("")
    out.append("## Coverage")
    out.append("")
    out.append(f"{cov['reached']} of {cov['registered']} kernels reached ({100 * cov['fraction']:.1f}%).")
    out.append("")
    out.extend(namespace_lines(report, markdown_table=True))
    if cov["unreached"]:
        out.append("")
        out.append("Not reached by any OpInfo sample: " + ", ".join(f"`{k}`" for k in cov["unreached"]) + ".")
    for title, status in (("Crashes", "crash"), ("Hangs (the kernel did not return within the case's time limit)", "hang"),
                          ("Aborts (ExecuTorch aborted inside the kernel, as it would abort a program)", "abort"),
                          ("Guarded (etops' pre-call guard refused: the kernel corrupts memory on these)", "guarded"),
                          ("Mismatches", "mismatch"), ("Errors (etops could not call the kernel)", "error")):
        cases = report.cases(status)
        if not cases:
            continue
        out.append("")
        out.append(f"## {title}")
        out.append("")
        if status == "mismatch":
            out.append("Recorded cases (at most a few per kernel, OpInfo and dtype; the counts above are complete).")
            out.append("")
        out.append("| kernel | via | OpInfo | dtype | case | max abs err | max rel err | inputs | what | reproducer |")
        out.append("|---|---|---|---|---|---|---|---|---|---|")
        for c in cases:
            repro = f"`{c.reproducer.rsplit('/', 2)[-2]}/{c.reproducer.rsplit('/', 1)[-1]}`" if c.reproducer else ""
            out.append(f"| `{c.kernel}` | `{c.aten_op}` | {c.opinfo} | {c.dtype} | s{c.sample}c{c.call} | {_fmt(c.max_abs_error)} | "
                       f"{_fmt(c.max_rel_error)} | {md_escape(clip(c.inputs, 120))} | {md_escape(clip(c.message + (f' [rule: {c.rule}]' if c.rule else ''), 300))} | {repro} |")
    unsupported = report.cases("unsupported")
    if unsupported:
        out.append("")
        out.append("## Unsupported (kernel refused what ATen accepts)")
        out.append("")
        out.append("First recorded message per kernel and dtype:")
        out.append("")
        out.append("| kernel | dtype | cases | message |")
        out.append("|---|---|---|---|")
        seen = set()
        for c in unsupported:
            if (c.kernel, c.dtype) in seen:
                continue
            seen.add((c.kernel, c.dtype))
            n = report.tallies[(c.kernel, c.dtype)].counts.get("unsupported", 0)
            out.append(f"| `{c.kernel}` | {c.dtype} | {n} | {md_escape(clip(c.message, 200))} |")
    if report.task_errors:
        out.append("")
        out.append("## Tasks that could not run fully")
        out.append("")
        for e in report.task_errors:
            out.append(f"- {e['opinfo']} [{e['dtype']}]: {md_escape(clip(e['error'], 200))}")
    out.append("")
    return "\n".join(out)


def write_markdown(report: Report, path, clusters=None, axis=None, numerics=None) -> None:
    with open(path, "w") as f:
        f.write(markdown(report, clusters, axis, numerics))
