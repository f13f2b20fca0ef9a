"""What ``etops gtest`` reports: per test file whether it built (and with which
googletest and kernel set), each test's result, and the verdict: exit code 0 when
every test ran passed or skipped, 1 on a failed or crashed test, 2 when a file did
not build. Text for the terminal, JSON for ``--json``."""

from __future__ import annotations

import json
from typing import Any
from dataclasses import dataclass, field

from .build import NO_GOOGLETEST
from .run import CRASHED, FAILED, PASSED, SKIPPED, TestResult

EXIT_OK, EXIT_FAILED, EXIT_BUILD, EXIT_NO_TEST = 0, 1, 2, 3


@dataclass
class FileResult:
    """One test file: built or not (``build_error``), and its tests' results."""

    path: str
    kernel_set: str | None = None
    googletest: str | None = None
    build_error: str | None = None
    problem: str | None = None  #: the binary ended outside any test (a crash at load or exit)
    notes: list[str] = field(default_factory=list)  #: generated functions left out, and why
    tests: list[TestResult] = field(default_factory=list)
    run_seconds: float = 0.0

    @property
    def built(self) -> bool:
        return self.build_error is None

    def count(self, status: str) -> int:
        return sum(1 for t in self.tests if t.status == status)

    @property
    def ok(self) -> bool:
        return self.built and self.problem is None and not any(t.status in (FAILED, CRASHED) for t in self.tests)

    def as_dict(self) -> dict:
        return {
            "path": self.path,
            "kernel_set": self.kernel_set,
            "googletest": self.googletest,
            "built": self.built,
            "build_error": self.build_error,
            "problem": self.problem,
            "notes": self.notes,
            "counts": {s: self.count(s) for s in (PASSED, FAILED, SKIPPED, CRASHED)},
            "run_seconds": round(self.run_seconds, 3),
            "tests": [t.as_dict() for t in self.tests],
        }


@dataclass
class GtestResult:
    """Every file's result; ``exit_code`` is the command's."""

    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0
    build_seconds: float = 0.0  #: the one Ninja run that built every missing object and binary

    @property
    def exit_code(self) -> int:
        if any(not f.built for f in self.files):
            return EXIT_BUILD
        if any(not f.ok for f in self.files):
            return EXIT_FAILED
        ran = sum(f.count(s) for f in self.files for s in (PASSED, FAILED, CRASHED))
        return EXIT_OK if ran > 0 else EXIT_NO_TEST  # no test ran (no file, all filtered or skipped): no evidence, not a pass

    def totals(self) -> dict[str, int]:
        out = {"files": len(self.files), "built": sum(f.built for f in self.files)}
        for s in (PASSED, FAILED, SKIPPED, CRASHED):
            out[s] = sum(f.count(s) for f in self.files)
        return out

    def as_dict(self) -> dict:
        return {"exit_code": self.exit_code, "seconds": round(self.seconds, 3),
                "build_seconds": round(self.build_seconds, 3), "totals": self.totals(),
                "files": [f.as_dict() for f in self.files]}

    def write_json(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.as_dict(), f, indent=1)
            f.write("\n")

    def text(self, verbose: bool = False) -> str:
        """Per file a line of counts; each failed, crashed (and with `verbose`,
        skipped) test with its message; each build error; the totals."""
        lines = []
        for f in self.files:
            if not f.built:
                lines.append(f"{f.path}: NOT BUILT\n{_indent(f.build_error or '')}")
                continue
            counts = ", ".join(f"{f.count(s)} {s}" for s in (PASSED, FAILED, SKIPPED, CRASHED) if f.count(s))
            lines.append(f"{f.path}: {counts or 'no tests'} [{f.kernel_set or 'no kernel set'}; run {f.run_seconds:.1f} s]")
            for t in f.tests:
                if t.status in (FAILED, CRASHED) or (verbose and t.status == SKIPPED):
                    lines.append(f"  {t.status.upper()} {t.name}")
                    if t.message:
                        lines.append(_indent(t.message, "      "))
            if f.problem:
                lines.append(_indent(f.problem, "  "))
            for note in f.notes if verbose else ():
                lines.append(f"  note: {note}")
        n = self.totals()
        lines.append(f"{n['built']}/{n['files']} files built; {n[PASSED]} passed, {n[FAILED]} failed, "
                     f"{n[SKIPPED]} skipped, {n[CRASHED]} crashed ({self.seconds:.1f} s, building {self.build_seconds:.1f} s)")
        return "\n".join(lines)


def _indent(text: str, pad: str = "    ", limit: int = 30) -> str:
    rows = text.rstrip().splitlines()
    if len(rows) > limit:
        rows = rows[:limit] + [f"... ({len(rows) - limit} more lines)"]
    return "\n".join(pad + r for r in rows)


def why_not_run(f: FileResult) -> str | None:
    """Why test file `f` did not run, in one line (None: it was built and ran): no
    googletest, or "does not build" with the compiler's (or the checkout's) first error."""
    if f.built:
        return None
    if f.build_error == NO_GOOGLETEST:
        return "no googletest (apt-get install googletest, or set ETOPS_GOOGLETEST to its source folder)"
    first = (f.build_error or "").strip().splitlines()
    return "does not build: " + (first[0] if first else "(no error given)")


def _one_file(b: FileResult | None, e: FileResult) -> dict[str, Any]:
    """One test file on the base (`b`; None: no base run) and the edit."""
    regressions: list[dict] = []
    base_failing: list[str] = []
    before = {t.name: t for t in b.tests} if b is not None else {}
    for t in e.tests:
        was = before.get(t.name)
        if was is not None and was.status in (FAILED, CRASHED):
            base_failing.append(t.name)
        elif t.status in (FAILED, CRASHED):
            regressions.append({"name": t.name, "status": t.status, "message": t.message, "file": e.path})
    return {"file": e.path, "kernel_set": e.kernel_set, "error": e.build_error, "regressions": regressions,
            "base_failing": base_failing, "counts": {s: e.count(s) for s in (PASSED, FAILED, SKIPPED, CRASHED)}}


def against_base(base: GtestResult | None, edit: GtestResult) -> dict[str, Any]:
    """The upstream test files of a kernel file run on the base kernels and on the
    edit's (``etops dev``), file by file (``files``): the tests the edit turns from
    passed (or skipped) to failed or crashed are ``regressions`` (a finding each);
    those already failing on the base are ``base_failing``, listed apart; a file
    that was not built is in ``not_run`` with why (why_not_run). The top level sums
    the files that ran (``error``: the first build error when none ran). With no
    base (None: operators new with the edit) every failing test is a regression."""
    b_files = {f.path: f for f in base.files} if base is not None else {}
    files = [_one_file(b_files.get(e.path), e) for e in edit.files if e.built]
    not_run = [{"file": e.path, "why": why_not_run(e)} for e in edit.files if not e.built]
    errors = [e.build_error for e in edit.files if not e.built]
    return {"file": edit.files[0].path if edit.files else "", "files": files, "not_run": not_run,
            "error": errors[0] if errors and not files else None,
            "kernel_set": next((e.kernel_set for e in edit.files if e.kernel_set), None),
            "regressions": [r for f in files for r in f["regressions"]],
            "base_failing": [n for f in files for n in f["base_failing"]],
            "counts": {s: sum(f["counts"][s] for f in files) for s in (PASSED, FAILED, SKIPPED, CRASHED)},
            "seconds": round((base.seconds if base is not None else 0.0) + edit.seconds, 3)}
