"""The ``etops`` command line (``python -m etops`` or the ``etops`` script).

    etops list [--ns NS] [--grep TEXT] [--json]
    etops show NAME [--json]
    etops bench NAME... [--sizes 16,4k,1M] [--dtype float32,float16] [--plot add.png] [--json]
    etops bench --all [--budget 120] [--report bench.md]
    etops bench --delegate FILE.py:FUNCTION... [--threads N] [--plot d.png] [--json]
    etops threads [N] [--json]
    etops backends [--json]
    etops needs PROGRAM.pte [--json FILE] [--selected-ops YAML]
    etops check [NAME...] [--dtype ...] [--isolated --jobs N] [--report R.md --json R.json]
    etops fuzz [--budget S] [--guard] [--kernels TEXT]
    etops dev PATH... [--base REV] [--changed [REV]] [--watch] [--json FILE] [--markdown FILE] [--max-slowdown R]
    etops gtest PATH... [--kernel-set SET] [--filter PATTERN] [--json FILE]
    etops report upstream REPORT.json|KERNEL... --checkout DIR [--out DIR] [--apply CHECKOUT]
    etops check|bench|needs|fuzz|gtest --load FILE.cpp|LIB.so|FILE.py:FUNCTION ...

Tables and progress bars are rich's on a terminal, plain text when piped. An error
is one line on stderr and exit code 2 (``--debug`` shows the traceback).

May import: the core and every extension (it is the outermost layer); nothing imports it.
"""

from __future__ import annotations

import argparse
import sys

from .usage import EXIT_ERROR, UsageError



class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not usage + message
        raise UsageError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="etops", description="ExecuTorch's registered kernels: list, inspect, benchmark against ATen.")
    p.add_argument("--debug", action="store_true", help="show tracebacks and library log messages")
    p.add_argument("--version", action="store_true", help="print the versions of etops, torch and executorch")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    ls = sub.add_parser("list", help="every registered kernel: name, kernel keys, providing library, schema known")
    ls.add_argument("--ns", action="append", metavar="NAMESPACE", help="only this namespace (repeatable)")
    ls.add_argument("--grep", metavar="TEXT", help="only names containing TEXT (case-insensitive)")
    ls.add_argument("--json", action="store_true", help="JSON on stdout")

    sh = sub.add_parser("show", help="one kernel: schema, each kernel key decoded, provider, built-in / custom / overridden")
    sh.add_argument("name", nargs="+", help="operator name, e.g. aten::convolution.out")
    sh.add_argument("--json", action="store_true", help="JSON on stdout")

    b = sub.add_parser("bench", help="time ExecuTorch kernels against ATen, or delegates against both")
    b.add_argument("name", nargs="*", help="operator names (aten::add.out ...)")
    b.add_argument("--all", action="store_true", help="every registered aten kernel on a representative input, ranked")
    b.add_argument("--delegate", nargs="+", action="extend", metavar="FILE.py:FUNCTION",
                   help="models to lower to XNNPACK: a function returning (model, example_inputs), as FILE.py:FUNCTION or "
                        "package.module:FUNCTION (FILE.py:f,g for several; FILE.py alone: its MODELS dict); each delegate "
                        "is timed against the same subgraph on ExecuTorch kernels and on ATen")
    b.add_argument("--sizes", metavar="LIST", help="element counts of the largest input, e.g. 16,4k,1M,16M (default: OpInfo's sample as it is)")
    b.add_argument("--dtype", metavar="LIST", help="dtypes, e.g. float32,float16 (default: float32 where OpInfo has it)")
    b.add_argument("--repeats", type=int, default=None, help="timed rounds (default 11; --all: 5)")
    b.add_argument("--warmup", type=int, default=2, help="rounds thrown away first (default 2)")
    b.add_argument("--target", type=float, default=0.005, help="seconds each timed loop lasts (default 0.005)")
    b.add_argument("--threads", type=int, metavar="N", help="torch's intra-op threads and ExecuTorch's threadpool, both (default: 1 each, so that verdicts do not flip with the machine's load)")
    b.add_argument("--plot", metavar="PNG", help="write a plot: time against size, and the ratio")
    b.add_argument("--budget", type=float, default=120.0, help="--all: seconds for the whole run (default 120)")
    b.add_argument("--size", default="16k", help="--all: scale each sample to about this many elements ('sample': keep it; default 16k)")
    b.add_argument("--report", metavar="MD", help="write the table as markdown to MD and the figures as JSON next to it")
    b.add_argument("--grep", metavar="TEXT", help="--all: only kernels whose name contains TEXT")
    b.add_argument("--top", type=int, metavar="N", help="--all: print only the N slowest ratios (the report has all)")
    b.add_argument("--json", action="store_true", help="JSON on stdout instead of the table")
    b.add_argument("--against", choices=["aten", "builtin"], default="aten",
                   help="'builtin': A/B timing of each overridden kernel (see --load) against the built-in kernel it "
                        "replaced and against ATen, interleaved, one thread unless --threads, a verdict only beyond the noise")
    _add_load(b)

    th = sub.add_parser("threads", help="ExecuTorch's threadpool size (for this process's benchmarks)")
    th.add_argument("n", nargs="?", type=int, help="set the pool to N threads")
    th.add_argument("--json", action="store_true", help="JSON on stdout")

    be = sub.add_parser("backends", help="ExecuTorch's registered delegate backends and whether each is available")
    be.add_argument("--json", action="store_true", help="JSON on stdout")

    ne = sub.add_parser("needs", help="each kernel and delegate call of a .pte against this process's registry and backends (exit 1 if one is missing)")
    ne.add_argument("program", help="the .pte file")
    ne.add_argument("--json", metavar="FILE", help="write the report as JSON to FILE ('-': on stdout, instead of the table)")
    ne.add_argument("--selected-ops", metavar="YAML", help="write selected_operators.yaml (gen_oplist's format, with et_kernel_metadata) for a selective build")
    _add_load(ne)

    dv = sub.add_parser("dev", help="build kernel files of an ExecuTorch checkout, judge them as 'etops check' does (guarded) "
                                    "next to the same files before the edit, time them against it (exit 0 no new finding, "
                                    "1 new finding, 2 build error, 3 an operator got no case)")
    dv.add_argument("paths", nargs="*", metavar="PATH", help="kernel source files, or folders of them")
    dv.add_argument("--root", metavar="DIR", help="the checkout (default: found from the file's executorch/... includes)")
    dv.add_argument("--yaml", action="append", metavar="FILE", help="the kernel YAML (default: the nearest functions.yaml, "
                                                                   "custom_ops.yaml, optimized.yaml or quantized.yaml above the file)")
    dv.add_argument("--base", metavar="REV", help="compare with the files at this git revision (default HEAD; "
                                                  "'none': with the wheel's built-in kernels)")
    dv.add_argument("--changed", nargs="?", const="HEAD", metavar="REV",
                    help="check every kernel file changed since REV (default HEAD) and those including a changed header")
    dv.add_argument("--watch", action="store_true", help="run again on every save of a file or a checkout header it includes")
    dv.add_argument("--max-rounds", type=int, metavar="N", help=argparse.SUPPRESS)  # --watch: stop after N rounds (tests)
    dv.add_argument("--json", metavar="FILE", help="write the result as JSON to FILE (--watch: rewritten every round)")
    dv.add_argument("--markdown", metavar="FILE", help="write the result as a pull-request comment (markdown) to FILE")
    dv.add_argument("--report-dir", metavar="DIR", help="where reproducers go (default: next to --json, else etops' cache)")
    dv.add_argument("--dtype", metavar="LIST", help="conformance dtypes, e.g. float32,int64 (default: every dtype the OpInfos list)")
    dv.add_argument("--no-isolate", action="store_true", help="call the kernels in this process, unguarded (faster; a crash ends it)")
    dv.add_argument("--max-slowdown", type=float, metavar="R", help="a slowdown of the edit beyond R times the base "
                                                                    "(and beyond the noise) at any size is a finding")
    dv.add_argument("--timing-dtype", default="float32", help="dtype of the timing inputs (default float32)")
    dv.add_argument("--threads", type=int, default=1, metavar="N", help="threads for the timing (default 1)")
    dv.add_argument("--repeats", type=int, default=11, help="interleaved timing rounds (default 11; fewer once 5 decide, "
                                                              "more, up to 41, while too noisy)")
    dv.add_argument("--budget", type=float, default=60.0, metavar="S",
                    help="seconds the edit's cases may take (float32 first; tasks left out are counted; default 60, 0: no limit)")
    dv.add_argument("--no-check", action="store_true", help="build and swap in, no conformance")
    dv.add_argument("--no-timing", action="store_true", help="no timing")
    dv.add_argument("--no-dim-orders", action="store_true",
                    help="leave out the dim-order axis (the edit's cases again channels-last and transposed, under "
                         "etops.layout('preserve'), against the base's)")
    dv.add_argument("--no-numerics", action="store_true",
                    help="leave out the numerics axis (the cases of reductions, scans, softmaxes, normalizations and "
                         "products again on inputs offset, cancelling, huge, tiny and long, against the base's)")
    dv.add_argument("--no-generated", action="store_true",
                    help="leave out the generated cases (each operator's inputs from its schema and the constraint table: "
                         "shape, dtype, scalar and value classes combined pairwise, judged as the OpInfo samples are)")
    dv.add_argument("--opinfo", action="append", dest="opinfos", metavar="NAME",
                    help="only the cases of these OpInfos (ids as 'etops check --opinfo' takes them, e.g. 'mul'; "
                         "repeatable): their samples, no reference or generated case")
    dv.add_argument("--no-gtest", action="store_true", help="do not run the checkout's kernels/test/op_<name>_test.cpp "
                                                            "and kernels/<folder>/test/op_<name>_test.cpp (etops gtest) "
                                                            "on the base and the edit")
    dv.add_argument("--no-python-tests", action="store_true",
                    help="do not run the upstream test_*.py next to an LLM kernel file (extension/llm/custom_ops) that "
                         "call its operators' torch ops, routed to the registry, on the base and the edit")

    # `check` is the conformance command line (etops.conformance.cli): main() hands it
    # everything after the word; this entry only lists it in --help.
    sub.add_parser("check", help="run OpInfo samples against ExecuTorch kernels (see 'etops check --help')", add_help=False)
    sub.add_parser("fuzz", help="the fuzz campaign over callable kernels (see 'etops fuzz --help')", add_help=False)
    sub.add_parser("report", help="'etops report upstream': findings as failing upstream gtests with their issue "
                                  "text (see 'etops report upstream --help')", add_help=False)
    sub.add_parser("gtest", help="upstream's kernel gtests (kernels/test/op_*_test.cpp) against this process's kernels "
                                 "(see 'etops gtest --help')", add_help=False)
    return p


def _add_load(parser) -> None:
    parser.add_argument("--load", action="append", metavar="SPEC",
                        help="load kernels first: a kernel file (FILE.cpp, built and swapped in as 'etops dev' does), "
                             "a library (LIB.so) or FILE.py:FUNCTION (a function registering or overriding kernels); repeatable")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    rest = [a for a in argv if a != "--debug"]
    if rest and rest[0] == "check":
        from ..conformance.cli import main as check_main

        return check_main(rest[1:])
    if rest and rest[0] == "fuzz":
        from ..fuzz.campaign import main as fuzz_main

        return fuzz_main(rest[1:])
    if rest[:2] == ["report", "upstream"]:
        from .upstream import main as upstream_main

        return upstream_main(rest[2:] + (["--debug"] if debug else []))
    if rest and rest[0] == "gtest":
        from .gtest import main as gtest_main

        return gtest_main(rest[1:] + (["--debug"] if debug else []))
    try:
        args = build_parser().parse_args(argv)
        if args.version:
            from .commands import version

            return version(args)
        if not args.command:
            build_parser().print_help()
            return 0
        from . import commands

        return getattr(commands, "cmd_" + args.command)(args)
    except KeyboardInterrupt:
        print("etops: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except BaseException as exc:  # noqa: BLE001 - every error is one line
        if debug:
            import traceback

            traceback.print_exc()
        message = str(exc).strip().splitlines()
        text = message[0] if message else type(exc).__name__
        if not isinstance(exc, UsageError) and type(exc).__module__.split(".")[0] not in ("etops",) and not isinstance(exc, (ValueError, KeyError, TypeError, OSError)):
            text = f"{type(exc).__name__}: {text}"
        if len(message) > 1 and not debug:
            text += " (--debug for more)"
        print(f"etops: error: {text}", file=sys.stderr)
        return EXIT_ERROR
