"""``etops report upstream SOURCE... --checkout DIR``: each root-cause finding of an
``etops check`` / ``etops dev`` JSON (or of a check of the kernels named) as a
failing TEST_F of upstream's ``kernels/test/op_<name>_test.cpp``, built and run
against the wheel's kernel (it must fail, for the finding's reason) and against
ATen's (it must pass), with its issue text; ``--apply CHECKOUT`` appends the
verified tests to the checkout's files. Exit 0 when every finding became a
verified test, 1 when some did not (the summary says why), 2 on an error, 3 when
there was no finding of the categories asked for (no evidence is not a pass)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .usage import UsageError, run_command


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see 'etops report upstream --help')")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="etops report upstream", description="Findings as failing tests in ExecuTorch's gtest style, "
                "verified against the wheel's kernels and ATen's, with the issue text beside each.")
    p.add_argument("sources", nargs="+", metavar="SOURCE",
                   help="an etops check / etops dev JSON report, or kernel names (aten::sum.IntList_out) to check first")
    p.add_argument("--checkout", required=True, metavar="DIR", help="the ExecuTorch checkout whose kernels/test/ the tests are for")
    p.add_argument("--out", default="upstream-report", metavar="DIR", help="the output folder (default ./upstream-report)")
    p.add_argument("--apply", metavar="CHECKOUT", help="append the verified tests to their files in CHECKOUT (git diff shows them)")
    p.add_argument("--category", action="append", metavar="NAME",
                   help="finding categories to write tests for (repeatable; default: wrong, precision loss, abort, crash)")
    p.add_argument("--no-verify", action="store_true", help="write the tests without building and running them (none is emitted as verified)")
    p.add_argument("--no-reference", action="store_true", help="do not run the tests against ATen's kernel")
    p.add_argument("--against", metavar="SUMMARY.json", help="another version's report (its summary.json): what was "
                   "fixed since, what is new, what stays, appended to summary.md")
    p.add_argument("--jobs", "-j", type=int, metavar="N", help="parallel compiles")
    p.add_argument("--load", action="append", metavar="SPEC",
                   help="load kernels first (FILE.cpp of a checkout, LIB.so, FILE.py:FUNCTION; repeatable): the tests must "
                        "fail on them (an etops dev report's edit: --load the edited file)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def main(argv: list[str]) -> int:
    return run_command(build_parser(), _run, argv)


def _run(args) -> int:
    if not os.path.isdir(args.checkout):
        raise UsageError(f"--checkout: no folder {args.checkout}")
    if args.against and not os.path.isfile(args.against):
        raise UsageError(f"--against: no file {args.against}")
    if args.apply and not os.path.isdir(args.apply):
        raise UsageError(f"--apply: no folder {args.apply}")
    from ..bench.inputs import quiet

    with quiet():
        from ..upstream.report import DEFAULT_CATEGORIES, apply, build_report
        from ..upstream.source import check_kernels, read_report

    if args.load:
        from ..checkout.load import load_all

        load_all(args.load)
    reports = [s for s in args.sources if s.endswith(".json") or os.path.isfile(s)]
    kernels = [s for s in args.sources if s not in reports]
    findings = [f for r in reports for f in read_report(r)]
    if kernels:
        print(f"checking {', '.join(kernels)} (etops check) ...", file=sys.stderr)
        findings += read_report(check_kernels(kernels, Path(args.out) / "check"))
    categories = tuple(args.category) if args.category else DEFAULT_CATEGORIES
    with quiet():
        report = build_report(findings, args.checkout, args.out, categories=categories, verify=not args.no_verify,
                              reference=not args.no_reference, jobs=args.jobs)
    for e in report.entries:
        print(f"{e.finding.data['kernel']} [{e.finding.data.get('category')}]: {e.outcome}"
              + (f" -> {e.generated.full_name}" if e.verified else ""))
    counts = report.to_json()["counts"]
    print(f"{counts['findings']} findings: {counts['verified']} verified failing tests, {counts['dropped']} dropped, "
          f"{counts['not written']} not written ({report.seconds:.0f} s); {Path(args.out) / 'summary.md'}")
    if args.against:
        from ..upstream import versions

        old = versions.read_summary(args.against)
        new = report.to_json()
        table = versions.markdown(versions.compare(old, new), old.get("versions", {}).get("executorch", "before"),
                                  new.get("versions", {}).get("executorch", "now"))
        summary = Path(args.out) / "summary.md"
        summary.write_text(summary.read_text() + "\n## Against " + str(args.against) + "\n\n" + table)
        print(table.splitlines()[0])
    if args.apply:
        changed = apply(report, args.apply)
        print(f"appended to {len(changed)} file(s) in {args.apply}: " + ", ".join(str(c) for c in changed))
    if not report.entries:
        return 3
    return 0 if len(report.verified) == len(report.entries) else 1
