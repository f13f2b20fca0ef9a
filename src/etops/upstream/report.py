"""``etops report upstream``: each root-cause finding as a failing test in
ExecuTorch's gtest style, verified, with its issue text; a patch appending the
verified tests to their files, and a summary saying which findings became tests
and why the others did not.

Output folder: ``NN_<op>_<Test>/test.cpp`` and ``issue.md`` per verified test,
``upstream.patch``, ``summary.md`` and ``summary.json``. ``apply(report, checkout)``
appends the verified tests to the checkout's files (``git diff`` shows them).

May import: the core and etops.upstream's modules (which import etops.conformance,
etops.gtest, etops.custom, etops.checkout).
"""

from __future__ import annotations

import difflib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .cpp import test_name, test_source
from .issue import issue_text, title
from .literals import NotWritable
from .locate import locate
from .source import Finding, smallest
from .spec import FAILURE, NotTestable, TestSpec, test_spec
from .verify import MARKER, Generated, appended, run_tests

#: the finding categories a test is written for by default (the issue's measure)
DEFAULT_CATEGORIES = ("wrong", "precision loss", "abort", "crash")
_TEST_F = re.compile(r"^\s*TEST_F\(\s*\w+\s*,\s*(\w+)\s*\)", re.M)


@dataclass
class Entry:
    """One finding: its test when one was written (verified or dropped), else why not."""

    finding: Finding
    generated: Generated | None = None
    spec: TestSpec | None = None
    call: tuple | None = None
    why_not: str = ""  #: why no test was written
    folder: str | None = None

    @property
    def verified(self) -> bool:
        return self.generated is not None and self.generated.verdict == "verified"

    @property
    def outcome(self) -> str:
        """"verified", "dropped: <why>" (written, not emitted) or "not written: <why>"."""
        if self.verified:
            return "verified"
        if self.generated is not None:
            return f"dropped: {self.generated.verdict}"
        return f"not written: {self.why_not}"


@dataclass
class UpstreamReport:
    checkout: Path
    entries: list = field(default_factory=list)
    seconds: float = 0.0
    #: seconds finding the findings' smallest calls and writing the tests / building and running them
    seconds_writing: float = 0.0
    seconds_verifying: float = 0.0

    @property
    def verified(self) -> list[Entry]:
        return [e for e in self.entries if e.verified]

    def to_json(self) -> dict:
        return {"checkout": str(self.checkout), "seconds": round(self.seconds, 1),
                "seconds_writing": round(self.seconds_writing, 1), "seconds_verifying": round(self.seconds_verifying, 1),
                "counts": {"findings": len(self.entries), "verified": len(self.verified),
                           "dropped": sum(1 for e in self.entries if e.generated is not None and not e.verified),
                           "not written": sum(1 for e in self.entries if e.generated is None)},
                "versions": next((e.finding.versions for e in self.entries if e.finding.versions), {}),
                "findings": [{"kernel": e.finding.data["kernel"], "category": e.finding.data.get("category"),
                              "kind": e.finding.data.get("kind"), "signature": e.finding.data.get("signature"),
                              "layout": e.finding.data.get("layout"),
                              "summary": e.finding.data.get("summary", ""), "outcome": e.outcome,
                              "test": e.generated.full_name if e.generated else None, "folder": e.folder,
                              "file": str(e.generated.test.relative_to(self.checkout)) if e.generated else None}
                             for e in self.entries]}


def _unique(name: str, taken: set) -> str:
    out, n = name, 2
    while out in taken:
        out, n = f"{name}{n}", n + 1
    taken.add(out)
    return out


def _prepare(finding: Finding, checkout: Path, taken: dict) -> Entry:
    """The finding's test written (not yet run), or the reason it cannot be."""
    if locate(checkout, finding.data["kernel"]) is None:
        return Entry(finding, why_not="no kernel YAML of the checkout registers the operator")
    found = smallest(finding)
    if found is None:
        return Entry(finding, why_not=f"the inputs were not found again ({finding.cluster.shrink})")
    return written_test(finding, found, checkout, taken)


def written_test(finding: Finding, call: tuple, checkout, taken: dict | None = None) -> Entry:
    """The test of `finding` from its smallest failing call (ATen's overload, args,
    kwargs) for `checkout`'s test file of the operator, named apart from the tests
    of that file and those in `taken` (file -> names, updated); the Entry says why
    when none can be written."""
    checkout = Path(checkout)
    entry = Entry(finding, call=call)
    loc = locate(checkout, finding.data["kernel"])
    if loc is None:
        entry.why_not = "no kernel YAML of the checkout registers the operator"
        return entry
    if loc.test is None or loc.fixture is None:
        entry.why_not = f"no upstream test file with an OperatorTest fixture for {loc.where(checkout)}"
        return entry
    func, args, kwargs = call
    case = finding.cluster.example or finding.cluster.cases[0]
    text = loc.test.read_text(errors="replace")
    taken = {} if taken is None else taken
    try:
        spec = test_spec(finding.data, case, func, args, kwargs)
        names = taken.setdefault(loc.test, set(_TEST_F.findall(text)))
        name = _unique(test_name(spec), names)
        source, ranges = test_source(spec, loc.fixture, name, text,
                                     f"{title(spec, name)}: {loc.where(checkout)} (etops report upstream)")
    except (NotTestable, NotWritable) as exc:
        entry.why_not = str(exc)
        return entry
    entry.spec = spec
    entry.generated = Generated(finding.data["kernel"], loc.test, loc.fixture, name, source, ranges, spec.shipped,
                                where=loc.where(checkout))
    return entry


def _computed(entry: Entry) -> str | None:
    """What the shipped kernel returns on the smallest input (value findings only:
    the others end or fail the call)."""
    if entry.spec is None or entry.spec.shipped != "value" or entry.call is None:
        return None
    import etops
    from ..conformance.values import exact_clone, leaves

    func, args, kwargs = entry.call
    try:
        result = etops.as_program(entry.finding.data["kernel"])(*exact_clone(list(args)), **exact_clone(dict(kwargs)))
    except Exception as exc:  # noqa: BLE001 - shown as it is
        return f"{type(exc).__name__}: {exc}"
    parts = [t for t in leaves(result) if isinstance(t, torch.Tensor)]
    return "; ".join(f"{list(t.shape)} {t.reshape(-1)[:16].tolist()}" for t in parts)


def _literal(value) -> str:
    from ..conformance.reproducer import tensor_literal

    if isinstance(value, torch.Tensor):
        return tensor_literal(value)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_literal(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner},)"
    return repr(value)  # inf and nan: the one-liner imports them


def _reproducer(entry: Entry, checkout: Path) -> str:
    """Two lines: the kernel called through etops on the smallest input (Python), and
    the test through etops gtest once applied."""
    g = entry.generated
    assert g is not None
    rel = g.test.relative_to(checkout)
    lines = []
    if entry.call is not None:
        _func, args, kwargs = entry.call
        call = ", ".join([*(_literal(a) for a in args), *(f"{k}={_literal(v)}" for k, v in kwargs.items())])
        lines.append(f"python -c \"import torch, etops; from math import inf, nan; "
                     f"print(etops.as_program('{g.kernel}')({call}))\"")
    lines.append(f"etops gtest {rel} --filter '{g.full_name}'   # once the test is in the file (--apply)")
    return "\n".join(lines)


def build_report(findings: list[Finding], checkout, out_dir, *, categories=DEFAULT_CATEGORIES, verify: bool = True,
                 reference: bool = True, jobs=None, progress=None) -> UpstreamReport:
    """Writes the tests of `findings` (those of `categories`) for `checkout`, runs
    them (`verify`; `reference`: against ATen too) and writes the output folder."""
    started = time.monotonic()
    checkout, out_dir = Path(checkout).resolve(), Path(out_dir)
    if not (checkout / "kernels").is_dir():
        raise ValueError(f"argument 'checkout': {checkout} has no kernels/ folder (not an ExecuTorch checkout)")
    out_dir.mkdir(parents=True, exist_ok=True)
    report = UpstreamReport(checkout)
    taken: dict = {}
    for i, f in enumerate(findings):
        if f.data.get("category") not in categories:
            continue
        if progress:
            progress(i + 1, len(findings), f.data["kernel"])
        report.entries.append(_prepare(f, checkout, taken))
    written = [e.generated for e in report.entries if e.generated is not None]
    report.seconds_writing = time.monotonic() - started
    if verify and written:
        run_tests(written, checkout, out_dir, reference=reference, jobs=jobs)
        report.seconds_verifying = time.monotonic() - started - report.seconds_writing
    elif written:
        for g in written:
            g.verdict = "not verified (--no-verify)"
    report.seconds = time.monotonic() - started
    _write(report, out_dir)
    (out_dir / "summary.json").write_text(json.dumps(report.to_json(), indent=1))
    return report


def _write(report: UpstreamReport, out_dir: Path) -> None:
    for n, e in enumerate(report.verified):
        g, spec = e.generated, e.spec
        assert g is not None and spec is not None
        op = e.finding.data["kernel"].split("::", 1)[-1].split(".", 1)[0].strip("_")
        folder = out_dir / f"{n:02d}_{op}_{g.name}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "test.cpp").write_text(g.text)
        versions = dict(e.finding.versions)
        text = issue_text(spec, g.name, g.text, where=g.where, test_file=str(g.test.relative_to(report.checkout)),
                          versions=versions, computed=_computed(e), reproducer=_reproducer(e, report.checkout),
                          summary=e.finding.data.get("summary", ""))
        (folder / "issue.md").write_text(text)
        e.folder = folder.name
    (out_dir / "upstream.patch").write_text(patch(report))
    (out_dir / "summary.md").write_text(summary_markdown(report))


def _files(report: UpstreamReport) -> dict:
    by_file: dict[Path, list[Generated]] = {}
    for e in report.verified:
        if e.generated is not None:
            by_file.setdefault(e.generated.test, []).append(e.generated)
    return by_file


def patch(report: UpstreamReport) -> str:
    """A git-style patch appending every verified test to its file."""
    out = []
    for path, tests in sorted(_files(report).items()):
        rel = path.relative_to(report.checkout)
        before = path.read_text()
        after, _ = appended(before, tests)
        out.append(f"diff --git a/{rel} b/{rel}\n")
        out += difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{rel}", f"b/{rel}")
    return "".join(out)


def apply(report: UpstreamReport, checkout) -> list[Path]:
    """Appends the verified tests to their files in `checkout` (a checkout of the
    same files: its ``kernels/test/...``); the files changed. A file that already
    has the generated block is left as it is."""
    checkout = Path(checkout)
    changed = []
    for path, tests in sorted(_files(report).items()):
        target = checkout / path.relative_to(report.checkout)
        if not target.is_file():
            raise ValueError(f"argument 'apply': {checkout} has no {path.relative_to(report.checkout)}")
        text = target.read_text()
        if MARKER in text:
            continue
        target.write_text(appended(text, tests)[0])
        changed.append(target)
    return changed


def summary_markdown(report: UpstreamReport) -> str:
    counts = report.to_json()["counts"]
    lines = ["# Findings as upstream tests", "",
             f"{counts['findings']} findings: **{counts['verified']} verified failing tests**, {counts['dropped']} "
             f"written and dropped, {counts['not written']} not written ({report.seconds:.0f} s: {report.seconds_writing:.0f} s "
             f"finding the smallest inputs and writing, {report.seconds_verifying:.0f} s building and running).", "",
             "| kernel | category | outcome | test |", "|---|---|---|---|"]
    for e in report.entries:
        test = f"`{e.generated.full_name}`" if e.generated else ""
        lines.append(f"| `{e.finding.data['kernel']}` | {e.finding.data.get('category')} | {e.outcome} | {test} |")
    for e in report.verified:
        if e.spec is not None and e.generated is not None:
            lines += ["", f"## {title(e.spec, e.generated.name)}", "", f"`{e.folder}/issue.md`, `{e.folder}/test.cpp`"]
    return "\n".join(lines) + "\n"


__all__ = ["build_report", "apply", "patch", "UpstreamReport", "Entry", "FAILURE"]
