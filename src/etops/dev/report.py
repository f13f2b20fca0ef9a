"""What one ``etops dev`` round found: per kernel file, the build (and the base's),
the operators swapped in, how many cases each got, the findings of check's judge
(new ones apart from those the base shares), the timing against the base; the
text shown, the JSON and pull-request markdown written, and the exit code."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

EXIT_OK, EXIT_FINDING, EXIT_ERROR, EXIT_NO_CASE = 0, 1, 2, 3


@dataclass
class FileResult:
    """One kernel file: ``error`` is set when it could not be located or built
    (the BuildError's text: diagnostics on the file's own lines)."""

    path: str
    ops: list = field(default_factory=list)  #: operator names it implements
    replaced: list = field(default_factory=list)  #: of those, the ones whose kernel it replaced
    checkout: str = ""
    yamls: list = field(default_factory=list)
    build: dict = field(default_factory=dict)  #: seconds, compiled (False: cache hit), build_dir, flags
    base: dict = field(default_factory=dict)  #: kind ("git" / "built-in"), rev, commit, describe, headers, build
    error: str | None = None
    no_operators: bool = False  #: the error is that the file implements none of the YAML's operators
    checked: bool = False
    cases: dict = field(default_factory=dict)  #: operator -> cases the edit ran
    base_cases: dict = field(default_factory=dict)  #: operator -> cases the base ran
    sources: dict = field(default_factory=dict)  #: operator -> the OpInfos / references / derived tasks planned
    left_out: dict = field(default_factory=dict)  #: operator -> tasks not run (budget)
    #: operator -> the cases skipped for size, each {"pass", "case", "why"} (its task process passed its memory
    #: limit in it: etops.dev.task_processes); never run again, never a pass
    too_large: dict = field(default_factory=dict)
    layout_cases: dict = field(default_factory=dict)  #: dim-order axis: layout -> {"cases": operator -> cases the edit ran, "tasks left out": n}
    numerics_cases: dict = field(default_factory=dict)  #: numerics axis: transform -> {"cases": operator -> cases the edit ran, "tasks left out": n}
    findings: list = field(default_factory=list)  #: verdict.Finding, the edit's (also-in-base marked)
    fixed: list = field(default_factory=list)  #: check clusters of the base the edit no longer shows
    timing: list = field(default_factory=list)  #: timing.time_edit rows
    seconds: dict = field(default_factory=dict)  #: per phase
    report_dir: str = ""
    gtest: dict = field(default_factory=dict)  #: the upstream test file on the kernels replaced and the edit (etops.gtest.report.against_base)
    #: the upstream Python tests next to an LLM kernel file on the base and the edit (etops.dev.upstream_python.compare)
    python_tests: dict = field(default_factory=dict)
    helpers: list = field(default_factory=list)  #: helper sources of the checkout built with the file (--changed)
    installed: object = field(default=None, repr=False)
    #: what this process read from etops' disk store and what it worked out again, per
    #: kind (etops.dev.learned.counts: recordings, plan, base results, base gtest)
    learned: dict = field(default_factory=dict)

    def set_judged(self, plan: dict, judged: dict) -> None:
        self.checked = True
        self.cases = dict(judged["edit"].cases)
        self.base_cases = dict(judged["base"].cases) if judged["base"] is not None else {}
        self.sources = {op: sorted({t["opinfo"] for t in tasks}) for op, tasks in plan.items()}
        self.left_out = {op: n for op, n in judged["left_out"].items() if n}
        self.too_large = {}
        for (op, side, case), why in sorted(judged.get("too_large", {}).items()):
            self.too_large.setdefault(op, []).append({"pass": side, "case": case, "why": why})
        self.layout_cases = judged.get("layout_cases", {})
        self.numerics_cases = judged.get("axes_cases", {}).get("numerics", {})
        self.findings, self.fixed = judged["findings"], judged["fixed"]

    @property
    def new_findings(self) -> list:
        return [f for f in self.findings if f.gating]

    def gtest_regressions(self) -> list:
        """Upstream tests the edit turns from pass to fail (a finding each)."""
        return list(self.gtest.get("regressions", ()))

    def python_test_regressions(self) -> list:
        """Upstream Python tests the edit turns from pass to fail (a finding each)."""
        return list(self.python_tests.get("regressions", ()))

    def slowdowns(self) -> list:
        """Timing rows that are findings: a slowdown beyond --max-slowdown, or a
        timing process the kernels ended (``crashed``)."""
        return [r for r in self.timing if r.get("slowdown_finding") or r.get("crashed")]

    def no_case(self) -> list:
        """Operators that got no case (nothing judged them)."""
        return [op for op in self.ops if self.checked and not self.cases.get(op)]

    @property
    def exit_code(self) -> int:
        if self.error:
            return EXIT_ERROR
        if self.new_findings or self.slowdowns() or self.gtest_regressions() or self.python_test_regressions():
            return EXIT_FINDING
        return EXIT_NO_CASE if self.no_case() else EXIT_OK

    def to_dict(self) -> dict:
        return {"path": self.path, "helpers": self.helpers, "ops": self.ops, "replaced": self.replaced, "checkout": self.checkout, "yamls": self.yamls,
                "build": self.build, "base": self.base, "error": self.error, "cases": self.cases, "base_cases": self.base_cases,
                "sources": self.sources, "left_out": self.left_out, "too_large": self.too_large, "no_case": self.no_case(),
                "layout_cases": self.layout_cases, "numerics_cases": self.numerics_cases,
                "findings": [f.to_json() for f in self.findings], "fixed": [c.to_json() for c in self.fixed],
                "new_findings": len(self.new_findings), "timing": self.timing, "seconds": self.seconds,
                "learned": self.learned, "gtest": self.gtest, "python_tests": self.python_tests, "report_dir": self.report_dir, "exit_code": self.exit_code}


@dataclass
class DevResult:
    files: list
    seconds: float = 0.0  #: edit to verdict: every phase, every file
    skipped: list = field(default_factory=list)  #: files of a folder that implement no operator (helpers)
    notes: list = field(default_factory=list)  #: --changed: what the change touched
    changed: str | None = None  #: --changed's revision

    @property
    def exit_code(self) -> int:
        """0: the edit introduces no finding; 1: it introduces one (or a slowdown
        beyond --max-slowdown); 2: a file did not build (or none implements an
        operator, or --changed's change touches none); 3: an operator of a file got no case."""
        if not self.files:
            return EXIT_ERROR
        codes = {f.exit_code for f in self.files}
        for code in (EXIT_ERROR, EXIT_FINDING, EXIT_NO_CASE):
            if code in codes:
                return code
        return EXIT_OK

    def restore(self) -> None:
        """Puts back every kernel these files replaced, removes those they added."""
        for f in self.files:
            if f.installed is not None:
                f.installed.restore()
                f.installed = None

    def to_dict(self) -> dict:
        return {"files": [f.to_dict() for f in self.files], "skipped": self.skipped, "notes": self.notes,
                "seconds": self.seconds, "exit_code": self.exit_code, "verdict": self.verdict()}

    def write_json(self, path: str) -> None:
        with open(path, "w") as fh:
            json.dump(self.to_dict(), fh, indent=1, default=str)

    def text(self) -> str:
        """The terminal lines (text.text: rendered from the same outline as the markdown)."""
        from .text import text

        return text(self)

    def markdown(self) -> str:
        from .text import markdown

        return markdown(self)

    def write_markdown(self, path: str) -> None:
        with open(path, "w") as fh:
            fh.write(self.markdown())

    def verdict(self) -> str:
        code = self.exit_code
        if not self.files and self.changed is not None:
            what = f"the change since {self.changed} touches no kernel file"
        elif not self.files:
            what = "no file implements an operator of its YAML"
        elif code == EXIT_ERROR:
            what = "a file did not build"
        elif code == EXIT_FINDING:
            n = sum(len(f.new_findings) + len(f.slowdowns()) + len(f.gtest_regressions()) + len(f.python_test_regressions())
                    for f in self.files)
            what = f"the edit introduces {n} finding{'s' if n != 1 else ''}"
        elif code == EXIT_NO_CASE:
            what = "no case for " + ", ".join(op for f in self.files for op in f.no_case())
        else:
            shared = sum(len(f.findings) - len(f.new_findings) for f in self.files)
            what = "the edit introduces no finding" + (f" ({shared} not gating or also in base)" if shared else "")
        return f"verdict: {what} [exit {code}, {self.seconds:.1f} s]"

    __str__ = text
