"""The words of an ``etops dev`` round: the terminal lines of each file and the
pull-request comment (``--markdown``). Every finding is listed (new ones first,
then those the base shares), with its dtypes, the side that disagrees with the
reference, its reproducer; each operator with the cases it got."""

from __future__ import annotations

from .judge import input_dtype, memory_site
from .timing import describe


def _short(name: str) -> str:
    return name.split("::", 1)[-1]


def _phrase(dtypes) -> str:
    """'float16/float32', or the dtype classes when there are more than four."""
    from ..conformance.clusters import dtype_class

    dtypes = sorted(dtypes)
    return "/".join(dtypes) if len(dtypes) <= 4 else "/".join(sorted({dtype_class(d) for d in dtypes}))


def finding_line(f) -> str:
    """One finding: its category, check's summary with its inputs labelled by their
    own dtypes (not the OpInfo task's), the cases recorded and the side that disagrees."""
    c = f.cluster
    summary = c.summary.replace(f" on {_phrase(c.dtypes)} inputs", f" on {_phrase({input_dtype(x) for x in c.cases})} inputs", 1)
    site = memory_site(c)
    what = f"{f.category}" + (f" ({site})" if site else "")
    return f"{what}: {summary} [{len(c.cases)} recorded case{'s' if len(c.cases) != 1 else ''}; {f.side()}]"


def _sources(f, op: str) -> str:
    srcs = f.sources.get(op, [])
    kinds = {"OpInfo": [s for s in srcs if ":" not in s], "reference": [s for s in srcs if s.startswith("ref:")],
             "derived": [s for s in srcs if s.startswith("derived:")]}
    return ", ".join(f"{len(v)} {k}{'s' if len(v) != 1 else ''}" for k, v in kinds.items() if v) or "no source"


def _axis_line(title: str, cases: dict) -> str:
    """An axis' line: per layout or transform, the cases of each operator and the tasks left out."""
    return f"  {title}: " + "; ".join(
        f"{name} " + ", ".join(f"{_short(op)} {n} cases" for op, n in v["cases"].items())
        + (f", {v['tasks left out']} tasks left out (budget)" if v["tasks left out"] else "")
        for name, v in cases.items())


def file_lines(f) -> list[str]:
    lines = [f"{f.path}"]
    if f.checkout:
        lines.append(f"  checkout {f.checkout}; {', '.join(f.yamls)}")
    if f.error:
        lines.append("  " + f.error.replace("\n", "\n  "))
        return lines
    b = f.build
    lines.append(f"  {'built' if b.get('compiled') else 'cached build'} in {b.get('seconds', 0):.1f} s "
                 f"(wheel flags {' '.join(b.get('flags', []))}); "
                 + "; ".join(f"{_short(op)} {'overridden' if op in f.replaced else 'registered (no built-in)'}" for op in f.ops))
    if f.base:
        lines.append(f"  base: {f.base['describe']}")
    if f.checked:
        for op in f.ops:
            base = f" (base {f.base_cases.get(op, 0)})" if f.base_cases else ""
            left = f", {f.left_out[op]} tasks left out (budget)" if f.left_out.get(op) else ""
            lines.append(f"  {_short(op)}: {f.cases.get(op, 0)} cases{base} from {_sources(f, op)}{left}"
                         + ("  <- no case" if op in f.no_case() else ""))
        if f.layout_cases:  # the dim-order axis: cases whose inputs each layout lays out anew
            lines.append(_axis_line("dim-order axis (etops.layout('preserve'))", f.layout_cases))
        if f.numerics_cases:  # the numerics axis: the accumulating operators' cases on transformed inputs
            lines.append(_axis_line("numerics axis (inputs transformed)", f.numerics_cases))
        new = [x for x in f.findings if x.gating]
        other = [x for x in f.findings if not x.gating and not x.in_base]
        shared = [x for x in f.findings if x.in_base]
        for title, group in (("new findings", new), ("not gating", other), ("also in base", shared)):
            if group:
                lines.append(f"  {title} ({len(group)}):")
                for x in group:
                    lines.append(f"    {finding_line(x)}")
                    if x.cluster.reproducer:
                        lines.append(f"      reproducer: {x.cluster.reproducer}")
        if f.fixed:
            lines.append(f"  fixed by the edit ({len(f.fixed)}): " + "; ".join(c.summary[:120] for c in f.fixed))
        if not f.findings:
            lines.append("  no finding")
    for row in f.timing:
        mark = "  <- slowdown finding" if row.get("slowdown_finding") else "  <- finding" if row.get("crashed") else ""
        lines.append(f"  timing {_short(row['kernel'])} {describe(row)}{mark}")
    lines += _gtest_lines(f.gtest, f.gtest.get("wall_seconds", f.seconds.get("gtest", 0.0)) if f.gtest else 0.0)
    if f.report_dir:
        lines.append(f"  report folder: {f.report_dir}")
    return lines


def _gtest_lines(g: dict, seconds: float) -> list[str]:
    """The upstream test file's lines: counts on the edit, each regression (a
    finding), the tests already failing on the base (the git base's kernel, or
    the one the edit replaces)."""
    if not g:
        return []
    name = g["file"].rsplit("/", 1)[-1]
    if g.get("error"):
        return [f"  gtest {name}: not built ({g['error'].splitlines()[0][:200]})"]
    shown = ", ".join(f"{n} {s}" for s, n in g["counts"].items() if n) or "no test"
    kind = g.get("base") or ""
    base = {"git": "the git base", "none": "no base (new operators)"}.get(kind, "the replaced kernel")
    lines = [f"  gtest {name} on the edit: {shown} [{seconds:.1f} s, {base} and the edit]"]
    for r in g["regressions"]:
        first = (r["message"].splitlines() or [""])[0][:200]
        before = "no base to pass on" if kind == "none" else f"passes on {base}"
        lines.append(f"    finding: {r['name']} {before}, {r['status']} on the edit: {first}")
    if g["base_failing"]:
        lines.append(f"    failing before the edit already: {', '.join(g['base_failing'])}")
    return lines


def markdown(result) -> str:
    """The round as a pull-request comment: verdict, per file a table of operators
    and cases, the findings (new, also in base), the timing table."""
    out = [f"### etops dev: {result.verdict().removeprefix('verdict: ')}", ""]
    out += [f"- {n}" for n in result.notes]
    for f in result.files:
        out += ["", f"#### `{f.path}`", ""]
        if f.error:
            out += ["```", f.error, "```"]
            continue
        if f.base:
            out.append(f"Base: {f.base['describe']}. Flags: `{' '.join(f.build.get('flags', []))}`.")
        if f.checked:
            out += ["", "| operator | cases (edit) | cases (base) | sources |", "|---|---:|---:|---|"]
            for op in f.ops:
                out.append(f"| `{op}` | {f.cases.get(op, 0)} | {f.base_cases.get(op, '-')} | {_sources(f, op)} |")
            for title, group in (("New findings", [x for x in f.findings if x.gating]),
                                 ("Also in base", [x for x in f.findings if x.in_base]),
                                 ("Not gating", [x for x in f.findings if not x.gating and not x.in_base])):
                if group:
                    out += ["", f"**{title}**", ""] + [f"- {finding_line(x)}" for x in group]
        if f.timing:
            out += ["", "| operator | size | input | edit / base | IQR | verdict |", "|---|---|---|---:|---|---|"]
            for r in f.timing:
                if r.get("error") or "vs_builtin" not in r:
                    out.append(f"| `{_short(r['kernel'])}` | {r.get('label')} | - | - | - | {r.get('error') or 'no base'} |")
                    continue
                q = r["vs_builtin"]
                out.append(f"| `{_short(r['kernel'])}` | {r['label']} | {r['dtype']} {r['size']} | {q['median']:.2f}x | "
                           f"{q['q1']:.2f}-{q['q3']:.2f} | {r['verdict']} |")
    return "\n".join(out) + "\n"
