"""The HTML report of a sweep (``etops check --html report.html``): one
self-contained file (inline CSS and a few lines of script, no network).

It shows the findings (clusters with their summaries), a kernel x dtype matrix
whose cells are coloured by the worst status of their cases (``STATUS_COLOURS``)
and, beside it, the dim-order axis (kernel x layout, coloured by verdict). Each
cell links to a panel listing its cases and the reproducers that go with them
(their source inline); the panel opens on a click, or when the page is loaded with
its id as the fragment (``report.html#d-3-1``). Imports the conformance report
modules only.
"""

from __future__ import annotations

import html
from pathlib import Path

from .values import clip

#: cell colour of a status (worst status of the cell's cases; STATUS_ORDER)
STATUS_COLOURS = {
    "crash": "#6a1b9a",
    "hang": "#4a148c",
    "abort": "#ad1457",
    "mismatch": "#d32f2f",
    "guarded": "#ef6c00",
    "error": "#fbc02d",
    "unsupported": "#90a4ae",
    "pass": "#388e3c",
}
#: worst first
STATUS_ORDER = ("crash", "hang", "abort", "mismatch", "guarded", "error", "unsupported", "pass")
#: cell colour of a dim-order verdict
VERDICT_COLOURS = {
    "silently wrong": "#d32f2f",
    "crashes": "#6a1b9a",
    "refuses": "#90a4ae",
    "other failure": "#fbc02d",
    "honours": "#388e3c",
    "no input to lay out": "#eeeeee",
}

_STYLE = """
body { font: 13px/1.4 sans-serif; margin: 16px; color: #212121; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 24px; }
table { border-collapse: collapse; }
td, th { border: 1px solid #bdbdbd; padding: 2px 6px; }
.matrix td.cell { width: 64px; height: 22px; text-align: center; padding: 0; }
.matrix td.cell a { display: block; padding: 4px 0; color: #ffffff; text-decoration: none; font-size: 11px; }
.matrix td.empty { background: #fafafa; }
.side { display: flex; gap: 32px; align-items: flex-start; }
.detail { display: none; border: 2px solid #424242; padding: 8px; margin: 12px 0; }
.detail.open, .detail:target { display: block; }
pre { background: #f5f5f5; padding: 6px; overflow-x: auto; font-size: 11px; }
.legend span { display: inline-block; padding: 2px 8px; margin-right: 4px; color: #ffffff; }
"""

_SCRIPT = """
function openDetail(id) {
  document.querySelectorAll('.detail.open').forEach(function (e) { e.classList.remove('open'); });
  var d = document.getElementById(id);
  if (d) { d.classList.add('open'); document.body.setAttribute('data-open', id); }
}
document.querySelectorAll('td.cell a').forEach(function (a) {
  a.addEventListener('click', function () { openDetail(a.getAttribute('href').slice(1)); });
});
if (location.hash) { openDetail(location.hash.slice(1)); }
document.querySelectorAll('td.cell').forEach(function (td) {
  var r = td.getBoundingClientRect();
  td.setAttribute('data-rect', [r.left, r.top, r.width, r.height].map(Math.round).join(','));
});
"""


def _e(text) -> str:
    return html.escape(str(text if text is not None else ""), quote=True)


def worst_status(counts: dict) -> str | None:
    """The worst status with a case in `counts` (status -> n), None when empty."""
    for status in STATUS_ORDER:
        if counts.get(status):
            return status
    return None


def _source(path) -> str:
    try:
        return Path(path).read_text()
    except (OSError, TypeError):
        return ""


def _reproducer_block(path, title: str) -> str:
    return (f"<details open><summary>{_e(title)}: <code>{_e(path)}</code></summary>"
            f"<pre class=\"reproducer\">{_e(_source(path))}</pre></details>")


def _finding_blocks(clusters) -> list[str]:
    """Each cluster's summary and its reproducer's source."""
    parts = []
    for c in clusters:
        parts.append(f"<p class=\"finding\"><b>[{_e(c.category)}]</b> {_e(c.summary)}</p>")
        if c.reproducer:
            parts.append(_reproducer_block(c.reproducer, "finding reproducer"))
    return parts


def _cell_detail(detail_id, kernel, dtype, tally, cases, clusters) -> str:
    counts = tally["counts"]
    parts = [f'<section class="detail" id="{detail_id}" data-kernel="{_e(kernel)}" data-dtype="{_e(dtype)}">',
             f"<h3>{_e(kernel)} &middot; {_e(dtype)}</h3>",
             "<p>" + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + "</p>"]
    parts.extend(_finding_blocks(clusters))
    if cases:
        parts.append("<table class=\"cases\"><tr><th>status</th><th>OpInfo</th><th>case</th><th>inputs</th><th>what</th></tr>")
        for case in cases:
            what = case.message + (f" [rule: {case.rule}]" if case.rule else "")
            parts.append(f"<tr><td>{_e(case.status)}</td><td>{_e(case.opinfo)}</td><td>s{case.sample}c{case.call}</td>"
                         f"<td>{_e(case.inputs)}</td><td>{_e(clip(what, 400))}</td></tr>")
        parts.append("</table>")
        for case in cases:
            if case.reproducer:
                parts.append(_reproducer_block(case.reproducer, f"case reproducer s{case.sample}c{case.call}"))
    parts.append("</section>")
    return "\n".join(parts)


def _matrix(report, clusters) -> tuple[str, list[str]]:
    rows = report.kernel_rows()
    dtypes = sorted({d for r in rows for d in r["dtypes"]})
    head = "<tr><th>kernel</th>" + "".join(f"<th>{_e(d)}</th>" for d in dtypes) + "</tr>"
    body, details = [], []
    for i, row in enumerate(rows):
        cells = [f"<th class=\"kernel\">{_e(row['kernel'])}</th>"]
        for j, dtype in enumerate(dtypes):
            tally = row["by_dtype"].get(dtype)
            status = worst_status(tally["counts"]) if tally else None
            if status is None:
                cells.append('<td class="cell empty" data-status="none"></td>')
                continue
            detail_id = f"d-{i}-{j}"
            n = sum(tally["counts"].values())
            bad = n - tally["counts"].get("pass", 0)
            cells.append(f'<td class="cell" data-status="{status}" data-kernel="{_e(row["kernel"])}" data-dtype="{_e(dtype)}" '
                         f'style="background:{STATUS_COLOURS[status]}"><a href="#{detail_id}" title="{_e(status)}">'
                         f'{bad}/{n}</a></td>')
            cases = [c for c in report.details if c.kernel == row["kernel"] and c.dtype == dtype]
            found = [c for c in clusters if c.kernel == row["kernel"] and dtype in c.dtypes]
            details.append(_cell_detail(detail_id, row["kernel"], dtype, tally, cases, found))
        body.append("<tr>" + "".join(cells) + "</tr>")
    table = f'<table class="matrix" id="matrix">{head}{"".join(body)}</table>'
    return table, details


def _axis_table(axis) -> tuple[str, list[str]]:
    names = list(axis.runs)
    head = "<tr><th>kernel</th>" + "".join(f"<th>{_e(n)}</th>" for n in names) + "</tr>"
    body, details = [], []
    for i, row in enumerate(axis.kernel_rows()):
        cells = [f"<th class=\"kernel\">{_e(row['kernel'])}</th>"]
        for j, name in enumerate(names):
            v = row["layouts"][name]
            detail_id = f"a-{i}-{j}"
            cells.append(f'<td class="cell" data-verdict="{_e(v["verdict"])}" data-kernel="{_e(row["kernel"])}" data-layout="{_e(name)}" '
                         f'style="background:{VERDICT_COLOURS[v["verdict"]]}"><a href="#{detail_id}" title="{_e(v["verdict"])}">'
                         f'{v["findings"]}/{v["cases"]}</a></td>')
            found = [c for c in axis.clusters[name] if c.kernel == row["kernel"]]
            parts = [f'<section class="detail" id="{detail_id}" data-kernel="{_e(row["kernel"])}" data-layout="{_e(name)}">',
                     f"<h3>{_e(row['kernel'])} &middot; {_e(name)}: {_e(v['verdict'])}</h3>",
                     f"<p>{v['cases']} cases laid out {_e(name)}, {v['findings']} dim-order findings</p>"]
            parts.extend(_finding_blocks(found))
            parts.append("</section>")
            details.append("\n".join(parts))
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="matrix" id="axis">{head}{"".join(body)}</table>', details


def _legend(colours: dict) -> str:
    dark = {"#eeeeee", "#fbc02d"}  # light backgrounds get dark text
    return '<p class="legend">' + "".join(f'<span style="background:{c}{";color:#212121" if c in dark else ""}">{_e(s)}</span>'
                                          for s, c in colours.items()) + "</p>"


def render(report, clusters=None, axis=None) -> str:
    """The HTML page of a report (its findings: `clusters`, default the cases
    grouped; `axis`: the dim-order axis when one ran)."""
    from .clusters import group, headline
    from .report import summary_line

    clusters = group(report.details) if clusters is None else clusters
    matrix, details = _matrix(report, clusters)
    side = [f'<div><h2>Kernel &times; dtype</h2>{_legend(STATUS_COLOURS)}{matrix}</div>']
    if axis is not None:
        table, axis_details = _axis_table(axis)
        details += axis_details
        side.append(f'<div><h2>Dim-order axis (etops.layout("preserve"))</h2>{_legend(VERDICT_COLOURS)}{table}</div>')
    findings = "".join(f"<li data-kind=\"{_e(c.category)}\"><b>[{_e(c.category)}]</b> {_e(c.summary)}</li>" for c in clusters)
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>etops conformance report</title>"
            f"<style>{_STYLE}</style></head><body>\n<h1>etops conformance report</h1>\n"
            f"<p id=\"headline\"><b>{_e(headline(report, clusters))}</b></p><p>{_e(summary_line(report))}</p>\n"
            f"<h2>Findings</h2><ol id=\"findings\">{findings}</ol>\n"
            f"<div class=\"side\">{''.join(side)}</div>\n"
            f"<div id=\"details\">{''.join(details)}</div>\n<script>{_SCRIPT}</script></body></html>\n")


def write_html(report, path, clusters=None, axis=None) -> None:
    """Writes ``render(...)`` to `path`."""
    Path(path).write_text(render(report, clusters, axis))
