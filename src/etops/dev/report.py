"""What one ``etops dev`` round found: per kernel file, the build, the operators
swapped in, their conformance against ATen and the built-in, the A/B timing; the
text shown, the JSON written and the exit code."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..bench.ab import describe_ratio

EXIT_OK, EXIT_FINDING, EXIT_ERROR = 0, 1, 2


@dataclass
class FileResult:
    """One kernel file: ``error`` is set when it could not be located or built
    (the BuildError's text: diagnostics on the file's own lines)."""

    path: str
    ops: list = field(default_factory=list)  #: operator names it implements
    replaced: list = field(default_factory=list)  #: of those, the ones whose kernel it replaced
    checkout: str = ""
    yamls: list = field(default_factory=list)
    build: dict = field(default_factory=dict)  #: seconds, compiled (False: cache hit), build_dir
    error: str | None = None
    no_operators: bool = False  #: the error is that the file implements none of the YAML's operators
    conformance: list = field(default_factory=list)  #: dev.check.Conformance per operator
    timing: list = field(default_factory=list)  #: bench.ab rows
    seconds: dict = field(default_factory=dict)  #: per phase: locate, build, gtest, swap, check, time
    gtest: dict = field(default_factory=dict)  #: the upstream test file on the base and the edit (etops.gtest.report.against_base)
    installed: object = field(default=None, repr=False)

    def timing_findings(self) -> list[str]:
        """Timing inputs on which the new kernel's result disagrees."""
        out = []
        for row in self.timing:
            for key, other in (("agree_aten", "ATen"), ("agree_builtin", "the built-in")):
                if row.get(key) is False:
                    out.append(f"{row['kernel']}: differs from {other} on the timing input {row['shapes']}")
        return out

    @property
    def findings(self) -> int:
        return sum(c.findings for c in self.conformance) + len(self.timing_findings()) + len(self.gtest.get("regressions", ()))

    def to_dict(self) -> dict:
        return {"path": self.path, "ops": self.ops, "replaced": self.replaced, "checkout": self.checkout, "yamls": self.yamls,
                "build": self.build, "error": self.error, "conformance": [c.to_dict() for c in self.conformance],
                "timing": self.timing, "gtest": self.gtest, "seconds": self.seconds, "findings": self.findings}


@dataclass
class DevResult:
    files: list
    seconds: float = 0.0  #: edit to verdict: locate, build, swap, check and time, every file
    skipped: list = field(default_factory=list)  #: files of a folder that implement no operator (helpers)

    @property
    def exit_code(self) -> int:
        """0: every operator agrees; 1: a finding stands; 2: a file did not build (or
        no file implements an operator)."""
        if not self.files or any(f.error for f in self.files):
            return EXIT_ERROR
        return EXIT_FINDING if any(f.findings for f in self.files) else EXIT_OK

    def restore(self) -> None:
        """Puts back every kernel these files replaced, removes those they added."""
        for f in self.files:
            if f.installed is not None:
                f.installed.restore()
                f.installed = None

    def to_dict(self) -> dict:
        return {"files": [f.to_dict() for f in self.files], "skipped": self.skipped, "seconds": self.seconds,
                "exit_code": self.exit_code}

    def write_json(self, path: str) -> None:
        with open(path, "w") as fh:
            json.dump(self.to_dict(), fh, indent=1, default=str)

    def text(self) -> str:
        lines = []
        for f in self.files:
            lines += _file_lines(f)
        if self.skipped:
            lines.append(f"skipped (no operator of the YAML): {', '.join(p.rsplit('/', 1)[-1] for p in self.skipped)}")
        lines.append(self.verdict())
        return "\n".join(lines)

    def verdict(self) -> str:
        code = self.exit_code
        if not self.files:
            what = "no file implements an operator of its YAML"
        elif code == EXIT_ERROR:
            what = "a file did not build"
        elif code == EXIT_FINDING:
            n = sum(f.findings for f in self.files)
            what = (f"{n} finding{'s' if n != 1 else ''} (mismatches, errors or aborts against ATen or the built-in, "
                    "upstream tests the edit breaks)")
        else:
            what = "every operator agrees with ATen and with the kernel it replaced"
        return f"verdict: {what} [{self.seconds:.1f} s]"

    __str__ = text


def _counts(counts: dict) -> str:
    shown = [f"{n} {s}" for s, n in counts.items() if n]
    return ", ".join(shown) or "no case"


def _file_lines(f: FileResult) -> list[str]:
    lines = [f"{f.path}"]
    if f.checkout:
        lines.append(f"  checkout {f.checkout}; {', '.join(f.yamls)}")
    if f.error:
        lines.append("  " + f.error.replace("\n", "\n  "))
        return lines
    b = f.build
    lines.append(f"  {'built' if b.get('compiled') else 'cached build'} in {b.get('seconds', 0):.1f} s; "
                 + "; ".join(f"{op} {'overridden' if op in f.replaced else 'registered (no built-in)'}" for op in f.ops))
    for c in f.conformance:
        lines.append(f"  {c.name}")
        lines.append(f"    vs ATen:     {_counts(c.vs_aten)}")
        if c.name in f.replaced:
            lines.append(f"    vs built-in: {_counts(c.vs_builtin)}")
        if c.note:
            lines.append(f"    note: {c.note}")
        for label, details in (("ATen", c.details_aten), ("built-in", c.details_builtin)):
            for d in details:
                if d.status == "pass":
                    continue
                lines.append(f"    {d.status} vs {label}: {d.opinfo} {d.dtype} sample {d.sample}: {d.message[:160]}")
                lines.append(f"      inputs: {d.inputs[:200]}")
    for row in f.timing:
        if row.get("error"):
            lines.append(f"  timing {row['kernel']}: {row['error']}")
            continue
        us = {k: row[k]["median"] * 1e6 for k in ("new", "builtin", "aten") if k in row}
        sides = ", ".join(f"{k} {v:.2f} us" for k, v in us.items())
        lines.append(f"  timing {row['kernel']} ({row['dtype']} {row['shapes'].replace(' ', ', ')}, {row['threads']} thread"
                     f"{'s' if row['threads'] != 1 else ''}, {row['repeats']} interleaved rounds): {sides}")
        if "vs_builtin" in row:
            lines.append("    " + describe_ratio(row["vs_builtin"], row["verdict_builtin"], "built-in"))
        elif row.get("builtin_error"):
            lines.append(f"    built-in: {row['builtin_error']}")
        lines.append("    " + describe_ratio(row["vs_aten"], row["verdict_aten"], "ATen"))
    for text in f.timing_findings():
        lines.append(f"  finding: {text}")
    lines += _gtest_lines(f.gtest, f.seconds.get("gtest", 0.0))
    return lines


def _gtest_lines(g: dict, seconds: float) -> list[str]:
    """The upstream test file's lines: counts on the edit, each regression (a
    finding), the tests the base already fails."""
    if not g:
        return []
    name = g["file"].rsplit("/", 1)[-1]
    if g.get("error"):
        return [f"  gtest {name}: not built ({g['error'].splitlines()[0][:200]})"]
    lines = [f"  gtest {name} on the edit: {_counts(g['counts'])} [{seconds:.1f} s, base and edit]"]
    for r in g["regressions"]:
        first = (r["message"].splitlines() or [""])[0][:200]
        lines.append(f"    finding: {r['name']} passes on the base, {r['status']} on the edit: {first}")
    if g["base_failing"]:
        lines.append(f"    failing on the base already: {', '.join(g['base_failing'])}")
    return lines
