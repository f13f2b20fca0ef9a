"""``etops gtest PATH...``: upstream ExecuTorch's kernel tests (a checkout's
``kernels/test/op_<name>_test.cpp``, or a folder of them) built against the
installed wheel and run against this process's kernels (``--load`` adds or
overrides some first). Exit 0 when every test that ran passed (skips allowed), 1 on
a failed or crashed test, 2 when a file did not build (or on a usage error), 3 when
no test ran (no evidence is not a pass)."""

from __future__ import annotations

import argparse
import os
import sys

from .usage import UsageError, run_command


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not usage + message
        raise UsageError(f"{message} (see 'etops gtest --help')")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="etops gtest", description="Build upstream ExecuTorch kernel tests (kernels/test/op_*_test.cpp of a "
                "checkout, or a kernel folder's own, kernels/quantized/test/op_*_test.cpp) against the installed wheel and "
                "run them against the kernels registered in this process.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="test files, or folders of op_*_test.cpp")
    p.add_argument("--kernel-set", metavar="NAME", help="whose kernels/NAME/test/supported_features_def.yaml applies "
                   "(portable, optimized, quantized; default: the test folder's set, kernels/quantized/test/ quantized, "
                   "optimized for kernels/test/)")
    p.add_argument("--filter", metavar="PATTERN", help="gtest's filter: Suite.Name, * wildcards, -exclusions")
    p.add_argument("--root", metavar="DIR", help="the checkout (default: found from the file's executorch/... includes)")
    p.add_argument("--json", metavar="FILE", help="write every file's and test's result as JSON to FILE")
    p.add_argument("--jobs", "-j", type=int, metavar="N", help="parallel compiles (default: the CPU count)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S", help="seconds one run of a test binary may take (default 300)")
    p.add_argument("--verbose", "-v", action="store_true", help="list skipped tests with their reasons, and generation notes")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("--load", action="append", metavar="SPEC",
                   help="load kernels first (FILE.cpp of a checkout, LIB.so, FILE.py:FUNCTION; repeatable): the tests "
                        "run against them")
    return p


def main(argv: list[str]) -> int:
    return run_command(build_parser(), _run, argv)


def _run(args) -> int:
    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        raise UsageError(f"--json: no folder {os.path.dirname(os.path.abspath(args.json))}")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    for path in args.paths:
        if not os.path.exists(path):
            raise UsageError(f"{path}: no such file or folder")
    from ..bench.inputs import quiet

    with quiet():
        from ..gtest import gtest

        if args.load:
            from ..checkout.load import load_all

            load_all(args.load)

    def progress(done, total, path):
        if total > 1 and sys.stderr.isatty():
            print(f"\r[{done}/{total}] {path}\033[K", end="" if done < total else "\n", file=sys.stderr, flush=True)

    with quiet():
        result = gtest(args.paths, kernel_set=args.kernel_set, test_filter=args.filter, root=args.root, jobs=args.jobs,
                       timeout=args.timeout, progress=progress)
    print(result.text(verbose=args.verbose), flush=True)
    if args.json:
        result.write_json(args.json)
    return result.exit_code
