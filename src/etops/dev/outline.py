"""What an ``etops dev`` round says, as one structured value: the verdict, the notes,
and per kernel file its build, base, cases per operator, findings (grouped: new,
not gating, also in base) with their reproducers, timing, and the upstream test's
counts and regressions. The terminal text and the pull-request markdown are both
rendered from it (text.py), so they say the same things.

Imports this package's judge (finding words) and timing (a row's words); reads a
report.DevResult, never changes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .verdict import input_dtype, memory_site
from .timing import describe, interval, verdict_text


def short(name: str) -> str:
    """'add.out' for 'aten::add.out'."""
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


def sources_phrase(f, op: str) -> str:
    """'19 OpInfos, 1 reference, generated cases': what operator `op`'s tasks came from."""
    srcs = f.sources.get(op, [])
    kinds = {"OpInfo": [s for s in srcs if ":" not in s], "reference": [s for s in srcs if s.startswith("ref:")],
             "derived": [s for s in srcs if s.startswith("derived:")]}
    words = [f"{len(v)} {k}{'s' if len(v) != 1 else ''}" for k, v in kinds.items() if v]
    words += ["generated cases"] if any(s.startswith("gen:") for s in srcs) else []
    return ", ".join(words) or "no source"


@dataclass
class OperatorRow:
    """One operator's cases: on the edit, on the base (None: no base ran)."""

    op: str
    cases: int
    base_cases: int | None
    sources: str
    left_out: int
    no_case: bool
    too_large: int = 0  #: cases skipped for size (FileResult.too_large)


@dataclass
class FindingItem:
    line: str  #: finding_line
    reproducer: str  #: its script ('' when none)


@dataclass
class GtestOutline:
    """One upstream test file run on the base and the edit: counts on the edit with
    its kernel set, each regression (a finding), the tests the base fails already."""

    name: str
    counts: str = ""
    kernel_set: str = ""
    seconds: str = ""  #: '3.0 s', or '3.0 s for the 2 files'
    base: str = ""  #: 'the git base', 'the replaced kernel', 'no base (new operators)'
    regressions: list = field(default_factory=list)  #: one line each: name, before, status, message
    base_failing: list = field(default_factory=list)


@dataclass
class TimingItem:
    kernel: str  #: short name
    words: str  #: timing.describe(row)
    mark: str  #: 'slowdown finding', 'finding' or ''
    row: dict
    interval: str = "-"  #: '0.98-1.05': the interval of the median ratio edit / base (timing.interval)
    verdict: str = ""  #: timing.verdict_text(row): 'no difference', 'too noisy: ratio 0.80-14.00x', ...


@dataclass
class FileOutline:
    path: str
    checkout: str = ""
    yamls: list = field(default_factory=list)
    error: str | None = None
    built: str = ""  #: 'built in 3.0 s' / 'cached build in 0.0 s'
    flags: str = ""
    swapped: list = field(default_factory=list)  #: 'add.out overridden' a operator
    helpers: list = field(default_factory=list)  #: helper sources built with the file
    base: str = ""
    operators: list = field(default_factory=list)  #: OperatorRow, when judged
    layouts: str = ""  #: the dim-order axis' cases ('' without it)
    numerics: str = ""  #: the numerics axis' cases ('' without it, or when no operator accumulates)
    groups: list = field(default_factory=list)  #: (title, [FindingItem]): new findings, not gating, also in base
    fixed: list = field(default_factory=list)  #: summaries of base findings the edit no longer shows
    no_finding: bool = False  #: judged, and nothing found
    timing: list = field(default_factory=list)  #: TimingItem
    gtests: list = field(default_factory=list)  #: GtestOutline per upstream test file run
    tests_not_run: list = field(default_factory=list)  #: (file or '', why) per upstream test file not run
    python_tests: list = field(default_factory=list)  #: (depth, line): the upstream Python tests (python_test_lines)
    report_dir: str = ""


@dataclass
class Outline:
    headline: str  #: DevResult.verdict()
    notes: list
    files: list  #: FileOutline
    skipped: list  #: helper sources of a folder that implement no operator


def _axis_cases(cases: dict) -> str:
    """An axis' cases (layout_cases, numerics_cases): per layout or transform, the
    cases of each operator and the tasks left out."""
    return "; ".join(
        f"{name} " + ", ".join(f"{short(op)} {n} cases" for op, n in v["cases"].items())
        + (f", {v['tasks left out']} tasks left out (budget)" if v["tasks left out"] else "")
        for name, v in cases.items())


def gtest_items(g: dict, seconds: float) -> tuple[list, list]:
    """(a GtestOutline per test file run, (file, why) per test file not run) of the
    round's upstream tests (etops.gtest.report.against_base's comparison)."""
    if not g:
        return [], []
    kind = g.get("base") or ""
    base = {"git": "the git base", "none": "no base (new operators)"}.get(kind, "the replaced kernel")
    before = "no base to pass on" if kind == "none" else f"passes on {base}"
    files = g.get("files", ())
    took = f"{seconds:.1f} s" + (f" for the {len(files)} files" if len(files) > 1 else "")
    ran = [GtestOutline(fg["file"], counts=", ".join(f"{n} {s}" for s, n in fg["counts"].items() if n) or "no test",
                        kernel_set=fg.get("kernel_set") or "no", seconds=took, base=base,
                        regressions=[f"{r['name']} {before}, {r['status']} on the edit: "
                                     f"{(r['message'].splitlines() or [''])[0][:200]}" for r in fg["regressions"]],
                        base_failing=list(fg["base_failing"])) for fg in files]
    return ran, [(n["file"] or "", n["why"][:240]) for n in g.get("not_run", ())]


def replay_lines(replayed) -> list:
    """(depth, line) saying how the edit's statuses of the upstream Python tests were
    had (etops.dev.upstream_python's replay of the base's kernel calls); none when
    nothing was recorded."""
    if not replayed:
        return []
    if replayed["outcome"] == "equal":
        return [(1, f"the base's {replayed['calls']} kernel calls replayed on the edit gave back bitwise what they gave "
                    f"the base: the base's statuses [{replayed['seconds']:.1f} s]")]
    if replayed["outcome"] == "differs":
        return [(1, f"replayed on the edit, {replayed['why'][:200]}: the tests ran on the edit")]
    return [(1, f"not replayed ({replayed['why'][:200]}): the tests ran on the edit")]


def python_test_lines(p: dict) -> list:
    """(depth, line) of the round's upstream Python tests (etops.dev.upstream_python.compare):
    per file run, its counts on the edit (depth 0), each regression (a finding) and the
    tests the base fails already (depth 1); per file not run, why."""
    if not p:
        return []
    base = {"git": "the git base", "none": "no base (new operators)"}.get(p.get("base") or "", "the replaced kernel")
    lines = []
    for f in p.get("files", ()):
        counts = {s: sum(t["status"] == s for t in f["tests"]) for s in ("passed", "failed", "skipped")}
        words = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no test"
        lines.append((0, f"python tests {f['file']} on the edit: {words} [{p.get('seconds', 0.0):.1f} s, {base} and the edit]"))
        lines += [(1, f"finding: {r['test']} {'passes on ' + base if r['before'] == 'passed' else 'had no base run'}, "
                      f"{r['status']} on the edit: {r['why'][:200]}") for r in p.get("regressions", ()) if r["file"] == f["file"]]
        failing = [t["test"] for t in f["tests"] if t["status"] == "failed" and t["base"] == "failed"]
        if failing:
            lines.append((1, f"failing before the edit already: {', '.join(failing)}"))
    lines += [(0, f"finding: {r['test'] or 'the edit'}: {r['why'][:200]}") for r in p.get("regressions", ())
              if r["file"] not in {f["file"] for f in p.get("files", ())}]  # the edit's run ended
    lines += replay_lines(p.get("replay"))
    return lines + [(0, f"python tests {n['file'] + ' ' if n['file'] else ''}not run: {n['why'][:240]}")
                    for n in p.get("not_run", ())]


def timing_item(r: dict) -> TimingItem:
    """One timing row's item: its words, its mark, and for a timed row the interval
    and the verdict as they read (timing.verdict_text)."""
    mark = "slowdown finding" if r.get("slowdown_finding") else "finding" if r.get("crashed") else ""
    if r.get("error") or "vs_builtin" not in r:
        return TimingItem(short(r["kernel"]), describe(r), mark, r)
    low, high, _ = interval(r["vs_builtin"])
    return TimingItem(short(r["kernel"]), describe(r), mark, r, f"{low:.2f}-{high:.2f}", verdict_text(r))


def file_outline(f) -> FileOutline:
    """What the round says about one kernel file (a report.FileResult)."""
    out = FileOutline(f.path, f.checkout, list(f.yamls), f.error, helpers=list(f.helpers),
                      report_dir=f.report_dir)
    if f.error:
        return out
    b = f.build
    out.built = f"{'built' if b.get('compiled') else 'cached build'} in {b.get('seconds', 0):.1f} s"
    out.flags = " ".join(b.get("flags", []))
    out.swapped = [f"{short(op)} {'overridden' if op in f.replaced else 'registered (no built-in)'}" for op in f.ops]
    out.base = f.base["describe"] if f.base else ""
    if f.checked:
        out.operators = [OperatorRow(op, f.cases.get(op, 0), f.base_cases.get(op, 0) if f.base_cases else None,
                                     sources_phrase(f, op), f.left_out.get(op, 0), op in f.no_case(),
                                     len(f.too_large.get(op, ()))) for op in f.ops]
        out.layouts = _axis_cases(f.layout_cases) if f.layout_cases else ""
        out.numerics = _axis_cases(f.numerics_cases) if f.numerics_cases else ""
        new = [x for x in f.findings if x.gating]
        other = [x for x in f.findings if not x.gating and not x.in_base]
        shared = [x for x in f.findings if x.in_base]
        out.groups = [(title, [FindingItem(finding_line(x), x.cluster.reproducer or "") for x in group])
                      for title, group in (("new findings", new), ("not gating", other), ("also in base", shared)) if group]
        out.fixed = [c.summary[:120] for c in f.fixed]
        out.no_finding = not f.findings
    out.timing = [timing_item(r) for r in f.timing]
    out.gtests, out.tests_not_run = gtest_items(f.gtest, f.gtest.get("wall_seconds", f.seconds.get("gtest", 0.0))
                                            if f.gtest else 0.0)
    out.python_tests = python_test_lines(f.python_tests)
    return out


def outline(result) -> Outline:
    """The round (a report.DevResult) as one Outline."""
    return Outline(result.verdict(), list(result.notes), [file_outline(f) for f in result.files], list(result.skipped))
