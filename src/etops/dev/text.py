"""The words of an ``etops dev`` round: the terminal lines and the pull-request
comment (``--markdown``), both rendered from one outline.Outline, so that they
hold the same verdict, findings (new ones first, then those not gating, then
those the base shares; each with its dtypes, the side that disagrees with the
reference, its reproducer) and upstream test regressions. The markdown names
paths relative to the checkout (or to the report folder's parent), never absolute.

Imports this package's outline only.
"""

from __future__ import annotations

import os
import re

from .outline import FileOutline, GtestOutline, finding_line, outline, short

__all__ = ["file_lines", "finding_line", "markdown", "text"]


def _file_text(o: FileOutline) -> list[str]:
    lines = [o.path]
    if o.checkout:
        lines.append(f"  checkout {o.checkout}; {', '.join(o.yamls) or 'no kernel YAML: the file registers its kernels itself'}")
    if o.error:
        lines.append("  " + o.error.replace("\n", "\n  "))
        return lines
    lines.append(f"  {o.built} (wheel flags {o.flags}); " + "; ".join(o.swapped))
    if o.helpers:
        lines.append(f"  helper sources built with it: {', '.join(o.helpers)}")
    if o.base:
        lines.append(f"  base: {o.base}")
    for r in o.operators:
        base = "" if r.base_cases is None else f" (base {r.base_cases})"
        left = f", {r.left_out} tasks left out (budget)" if r.left_out else ""
        left += f", {r.too_large} cases skipped for size (memory limit)" if r.too_large else ""
        lines.append(f"  {short(r.op)}: {r.cases} cases{base} from {r.sources}{left}" + ("  <- no case" if r.no_case else ""))
    if o.layouts:  # the dim-order axis: cases whose inputs each layout lays out anew
        lines.append(f"  dim-order axis (etops.layout('preserve')): {o.layouts}")
    if o.numerics:  # the numerics axis: the accumulating operators' cases on transformed inputs
        lines.append(f"  numerics axis (inputs transformed): {o.numerics}")
    for title, items in o.groups:
        lines.append(f"  {title} ({len(items)}):")
        for x in items:
            lines.append(f"    {x.line}")
            if x.reproducer:
                lines.append(f"      reproducer: {x.reproducer}")
    if o.fixed:
        lines.append(f"  fixed by the edit ({len(o.fixed)}): " + "; ".join(o.fixed))
    if o.no_finding:
        lines.append("  no finding")
    for t in o.timing:
        lines.append(f"  timing {t.kernel} {t.words}" + (f"  <- {t.mark}" if t.mark else ""))
    lines += _gtest_text(o)
    lines += [f"  {'  ' * depth}{line}" for depth, line in o.python_tests]
    if o.report_dir:
        lines.append(f"  report folder: {o.report_dir}")
    return lines


def _gtest_head(g: GtestOutline) -> str:
    return f"gtest {g.name} on the edit: {g.counts} [{g.kernel_set} set; {g.seconds}, {g.base} and the edit]"


def _gtest_text(o: FileOutline) -> list[str]:
    """The upstream test files' lines: per file run, counts on the edit, each
    regression (a finding), the tests already failing on the base; per file not
    run, why."""
    lines = []
    for g in o.gtests:
        lines += [f"  {_gtest_head(g)}"] + [f"    finding: {r}" for r in g.regressions]
        if g.base_failing:
            lines.append(f"    failing before the edit already: {', '.join(g.base_failing)}")
    return lines + [f"  gtest {name + ' ' if name else ''}not run: {why}" for name, why in o.tests_not_run]


def file_lines(f) -> list[str]:
    """The terminal lines of one kernel file (a report.FileResult)."""
    from .outline import file_outline

    return _file_text(file_outline(f))


def text(result) -> str:
    """The round (a report.DevResult) as the terminal shows it, the verdict last."""
    o = outline(result)
    lines = list(o.notes)
    for f in o.files:
        lines += _file_text(f)
    if o.skipped:
        lines.append(f"skipped (no operator of the YAML): {', '.join(p.rsplit('/', 1)[-1] for p in o.skipped)}")
    lines.append(o.headline)
    return "\n".join(lines)


#: an absolute path left in a message (a build folder, a header outside the checkout)
_ABSOLUTE = re.compile(r"(?<![\w.~/-])/(?:[\w.+-]+/)+([\w.+-]+)")


def _relative_paths(o: FileOutline):
    """A function making the text of file `o` name paths as the markdown does:
    relative to the checkout, a report under the report folder's parent (its
    folder name first), any other absolute path by its file name."""
    swaps = []
    if o.checkout:
        swaps.append((o.checkout.rstrip("/") + "/", ""))
    if o.report_dir:
        root = os.path.dirname(o.report_dir.rstrip("/"))
        swaps.append((os.path.dirname(root) + "/", ""))

    def rel(text: str) -> str:
        for prefix, by in swaps:
            text = text.replace(prefix, by)
        return _ABSOLUTE.sub(r"\1", text)

    return rel


def _file_markdown(o: FileOutline) -> list[str]:
    rel = _relative_paths(o)
    out = ["", f"#### `{rel(o.path)}`", ""]
    if o.error:
        return out + ["```", rel(o.error), "```"]
    out.append(f"{o.built.capitalize()}, flags `{o.flags}`; " + "; ".join(f"`{s}`" for s in o.swapped) + ".")
    if o.helpers:
        out.append(f"Helper sources built with it: {', '.join(f'`{rel(h)}`' for h in o.helpers)}.")
    if o.base:
        out.append(f"Base: {rel(o.base)}.")
    if o.operators:
        out += ["", "| operator | cases (edit) | cases (base) | sources | tasks left out (budget) | cases skipped for size |",
                "|---|---:|---:|---|---:|---:|"]
        for r in o.operators:
            base = "-" if r.base_cases is None else r.base_cases
            out.append(f"| `{r.op}` | {r.cases}{' (no case)' if r.no_case else ''} | {base} | {r.sources} | {r.left_out} "
                       f"| {r.too_large} |")
    if o.layouts:
        out += ["", f"Dim-order axis (`etops.layout('preserve')`): {o.layouts}."]
    if o.numerics:
        out += ["", f"Numerics axis (inputs transformed): {o.numerics}."]
    for title, items in o.groups:
        out += ["", f"**{title.capitalize()} ({len(items)})**", ""]
        for x in items:
            out.append(f"- {rel(x.line)}")
            if x.reproducer:
                out.append(f"  reproducer: `{rel(x.reproducer)}`")
    if o.fixed:
        out += ["", f"**Fixed by the edit ({len(o.fixed)})**", ""] + [f"- {rel(s)}" for s in o.fixed]
    if o.no_finding:
        out += ["", "No finding."]
    if o.timing:
        out += ["", "| operator | size | input | edit / base | interval | verdict |", "|---|---|---|---:|---|---|"]
        for t in o.timing:
            r, mark = t.row, (f" **{t.mark}**" if t.mark else "")
            if r.get("error") or "vs_builtin" not in r:
                out.append(f"| `{t.kernel}` | {r.get('label')} | - | - | - | {rel(r.get('error') or 'no base')}{mark} |")
                continue
            out.append(f"| `{t.kernel}` | {r['label']} | {r['dtype']} {r['size']} | {r['vs_builtin']['median']:.2f}x | "
                       f"{t.interval} | {t.verdict}{mark} |")
    for g in o.gtests:
        out += ["", f"**Upstream test**: {rel(_gtest_head(g))}"]
        if g.regressions:
            out += [""] + [f"- finding: {rel(r)}" for r in g.regressions]
        if g.base_failing:
            out += ["", f"Failing before the edit already: {', '.join(g.base_failing)}"]
    if o.python_tests:
        out += ["", "**Upstream Python tests**", ""] + [f"{'  ' * depth}- {rel(line)}" for depth, line in o.python_tests]
    if o.tests_not_run:
        out += ["", "**Upstream tests not run**", ""] + [f"- {'`' + rel(name) + '`: ' if name else ''}{rel(why)}"
                                                         for name, why in o.tests_not_run]
    return out


def markdown(result) -> str:
    """The round (a report.DevResult) as a pull-request comment: the verdict as the
    text gives it, the notes, per file its build, base, operators and cases,
    findings, timing table and upstream test, paths relative to the checkout."""
    o = outline(result)
    rel = _relative_paths(o.files[0]) if o.files else _ABSOLUTE_ONLY
    out = [f"### etops dev {o.headline}", ""]
    out += [f"- {rel(n)}" for n in o.notes]
    for f in o.files:
        out += _file_markdown(f)
    if o.skipped:
        out += ["", f"Skipped (no operator of the YAML): {', '.join(p.rsplit('/', 1)[-1] for p in o.skipped)}"]
    return "\n".join(out) + "\n"


def _ABSOLUTE_ONLY(text: str) -> str:
    return _ABSOLUTE.sub(r"\1", text)
