"""``python -m etops check`` (also ``python -m etops.conformance``): ExecuTorch's
kernels against ATen on PyTorch's OpInfo samples, and every kernel with a reference
(etops.conformance.references) against it on its own inputs.

``main(argv)`` takes the arguments after ``check`` (a leading ``check`` is
accepted too) and returns the exit status: 1 when a kernel crashed, did not return
within a case's limit (--isolated), aborted or computed a wrong result, or etops could not make a call (``--strict``: any
mismatch or guarded case too), else 0; ``--report-only``: 0 whatever the sweep
found; 2 usage error."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..llm_library import LLM_NAMESPACES, load_llm_custom_ops

EPILOG = """\
examples:
  python -m etops check                                  every registered kernel, every OpInfo dtype / reference
  python -m etops check aten::add.out --dtype float16 --verbose
  python -m etops check --isolated --jobs 2 --report report.md --json report.json
  python -m etops check aten::cat.out --dim-order-axis --html report.html
  python -m etops check aten::native_layer_norm.out --numerics-axis
  python -m etops check aten::add.out --no-generated        OpInfo's samples only, no generated cases
  python -m etops check --llm-custom-ops llama::custom_sdpa.out

Kernels are called as an exported program calls them (etops.as_program): etops'
workarounds for known kernel bugs do not hide them. An ExecuTorch abort (ET_CHECK)
is unwound into an abort case; without --isolated a kernel that segfaults ends this
process. With --isolated (or --jobs > 1) cases run in worker processes; a
worker that dies is recorded as a crash, with a reproducer, and the sweep goes on;
a kernel call that does not return within its case's limit (100 times ATen's time
for the call, at least ETOPS_CASE_TIMEOUT_FLOOR seconds, default 10) is a hang case:
its worker is killed and replaced, the rest of the task runs without that case.
Reproducers of mismatches and crashes go to REPORT_DIR/reproducers/; the findings
(cases grouped by root cause, each shrunk to its smallest failing input) lead every
report, with one standalone reproducer each in REPORT_DIR/findings/.
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m etops check", description=__doc__.split("\n\n")[0],
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kernels", nargs="*", metavar="KERNEL",
                   help="kernels to check (aten::add.out; aten::add for every overload); default: every registered kernel "
                        "(aten ones on OpInfo samples and their references, the others on their references)")
    p.add_argument("--dtype", action="append", dest="dtypes", metavar="DTYPE",
                   help="only this dtype (float16, int64, ...; repeat or comma-separate); default: every dtype OpInfo lists for CPU")
    p.add_argument("--opinfo", action="append", dest="opinfos", metavar="NAME",
                   help="only these OpInfos (ids as 'nn.functional.conv2d', 'max.reduction_with_dim'); repeatable")
    p.add_argument("--isolated", action="store_true", help="run cases in worker processes; a crash is recorded and the sweep goes on")
    p.add_argument("--jobs", "-j", type=int, default=None, metavar="N", help="worker processes (implies --isolated when > 1; default 1)")
    p.add_argument("--report", metavar="PATH.md", help="write the markdown report here")
    p.add_argument("--json", metavar="PATH.json", help="write the JSON report here")
    p.add_argument("--report-dir", metavar="DIR",
                   help="where reproducer scripts go (default: the folder of --report/--json, else ./etops-conformance)")
    p.add_argument("--verbose", "-v", action="store_true", help="one line per task and per failing case as they finish")
    p.add_argument("--quiet", "-q", action="store_true", help="no table, only the summary line")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--strict", action="store_true", help="exit 1 if any case is a mismatch, guarded, error, crash or abort "
                   "(default: 1 on a crash, an abort, a wrong result or an error)")
    p.add_argument("--report-only", action="store_true", help="exit 0 whatever the sweep found (the report is the result)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="isolated mode: seconds without news, while no kernel call is in flight, before a "
                        "worker counts as hung (120; a kernel call has its case's limit: ETOPS_CASE_TIMEOUT_FLOOR)")
    p.add_argument("--max-details", type=int, default=3, metavar="N", help="recorded cases (and reproducers) per kernel, OpInfo, dtype and status (3)")
    p.add_argument("--refresh-discovery", action="store_true", help="rediscover which OpInfos reach which kernels (cached otherwise)")
    p.add_argument("--dim-orders", choices=["programs", "channels-last", "reversed"], default="programs",
                   help="lay every dense input out anew: 'channels-last' (rank 4 and 5, as programs may give them) or "
                        "'reversed' (rank >= 2, kept under etops.layout('preserve')); mismatches are kernels that "
                        "ignore dim orders (default 'programs': the inputs as the samples make them)")
    p.add_argument("--guard", action="store_true",
                   help="run every case as etops.guard.call (tensors against guard pages, in the guard process; "
                        "about 0.5 ms a case): a kernel reading or writing outside its tensors is a crash naming the argument")
    p.add_argument("--dim-order-axis", action="store_true",
                   help="run every case also in each dense layout other than contiguous (channels-last for rank 4 and 5, "
                        "the last two dims transposed for rank >= 2) under etops.layout('preserve'); per kernel the report "
                        "says: silently wrong / crashes / refuses (KernelError) / honours, with a reproducer (three sweeps)")
    p.add_argument("--numerics-axis", action="store_true",
                   help="run every float32/float64 case also with its floating inputs transformed to expose numerics (a large "
                        "offset, magnitudes that cancel, values near the dtype's limits, long reductions; ATen on the same "
                        "values); findings keyed as root causes, with reproducers (five more sweeps of the floating cases)")
    generated = p.add_mutually_exclusive_group()
    generated.add_argument("--generated", nargs="?", const="also", choices=["also", "only"], default=None,
                           help="judge cases generated from each kernel's schema and the constraint table "
                                "(etops.ops.generation) too: shape classes, dtype combinations, scalar and value classes "
                                "combined pairwise, judged as OpInfo's samples are (task ids gen:<kernel>). On by default "
                                "(not with --opinfo); '--generated only': those alone")
    generated.add_argument("--no-generated", action="store_true",
                           help="OpInfo's samples and the references only, no generated cases")
    p.add_argument("--html", metavar="PATH.html",
                   help="write a self-contained HTML report: a kernel x dtype matrix coloured by status, each cell opening "
                        "its cases and reproducers, the dim-order axis beside it")
    p.add_argument("--no-shrink", action="store_true",
                   help="group findings by root cause without shrinking them (no reruns; reproducers from the recorded case)")
    llm = p.add_mutually_exclusive_group()
    llm.add_argument("--llm-custom-ops", action="store_true",
                     help="load ExecuTorch's LLM custom ops (executorch.extension.llm.custom_ops) and check their kernels "
                          "(llama::*, preprocess::*) against their math, with the ATen implementations the same library "
                          "registers as a second witness (docs/llm.md); an error when the library is missing. Without "
                          "it they are loaded and checked when the library is importable and no KERNEL is named (or one "
                          "of theirs is)")
    llm.add_argument("--no-llm-custom-ops", action="store_true",
                     help="leave ExecuTorch's LLM custom ops unloaded, whatever the sweep")
    p.add_argument("--load", action="append", metavar="SPEC",
                   help="load kernels first (FILE.cpp of a checkout, LIB.so, FILE.py:FUNCTION; repeatable) and check "
                        "those when no KERNEL is named; worker processes load them too")
    p.add_argument("--hooks", metavar="MODULE", help=argparse.SUPPRESS)  # test hooks: module name or .py path
    return p


def wants_llm_custom_ops(args) -> bool | None:
    """Whether the sweep loads the LLM custom ops: True (required: --llm-custom-ops),
    None (when importable: no KERNEL named and nothing --load-ed, or a KERNEL of
    their namespaces), False."""
    if args.llm_custom_ops:
        return True
    if args.no_llm_custom_ops:
        return False
    if args.kernels:
        return None if any(k.startswith(LLM_NAMESPACES) for k in args.kernels) else False
    return None if not args.load else False  # --load alone checks what it loaded


def generated_cases(args) -> bool | str:
    """The sweep's `generated`: "only", True (the default, but with --opinfo naming
    OpInfos) or False (--no-generated)."""
    if args.no_generated:
        return False
    if args.generated is not None:
        return "only" if args.generated == "only" else True
    return not args.opinfos


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["check"]:
        argv = argv[1:]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    import torch

    from .. import KernelNotFoundError
    from .report import terminal, write_json, write_markdown
    from .opinfos import dtype_from_name
    from .sweep import run

    dtypes = None
    if args.dtypes:
        try:
            dtypes = [dtype_from_name(d.strip()) for spec in args.dtypes for d in spec.split(",") if d.strip()]
        except ValueError as exc:
            parser.print_usage(sys.stderr)
            print(f"{parser.prog}: error: {exc}", file=sys.stderr)
            return 2
    jobs = 1 if args.jobs is None else args.jobs
    if jobs < 1:
        print(f"{parser.prog}: error: --jobs must be at least 1", file=sys.stderr)
        return 2
    report_dir = args.report_dir
    if report_dir is None:
        first = args.report or args.json or args.html
        report_dir = str(Path(first).resolve().parent) if first else "etops-conformance"
    from .runner import default_kmap
    from .sweep import resolve_kernels

    llm = wants_llm_custom_ops(args)
    if llm is not False:
        try:
            load_llm_custom_ops()
        except ImportError as exc:
            if llm:
                print(f"{parser.prog}: error: --llm-custom-ops: {exc}", file=sys.stderr)
                return 2

    if args.load:
        from ..checkout.load import load_for_command

        loaded = load_for_command(args.load, parser.prog)
        if loaded is None:
            return 2
        args.kernels = args.kernels or loaded
    try:
        kernels = resolve_kernels(args.kernels or None, default_kmap()) if args.kernels else None
        if args.opinfos:
            from .opinfos import opinfos

            unknown = [o for o in args.opinfos if o not in opinfos()]
            if unknown:
                raise ValueError(f"no OpInfo named {', '.join(unknown)}")
    except (KernelNotFoundError, ValueError) as exc:
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    hooks = args.hooks
    if args.guard:
        if hooks is not None or args.dim_orders != "programs":
            print(f"{parser.prog}: error: --guard goes with neither --dim-orders nor --hooks", file=sys.stderr)
            return 2
        hooks = "etops.guard.hooks:guarded"
    for flag, given in (("--dim-order-axis", args.dim_order_axis), ("--numerics-axis", args.numerics_axis)):
        if given and (hooks is not None or args.dim_orders != "programs"):
            print(f"{parser.prog}: error: {flag} goes with neither --dim-orders, --guard nor --hooks", file=sys.stderr)
            return 2
    if args.dim_orders != "programs":
        from .dim_orders import MODES

        if hooks is not None:
            print(f"{parser.prog}: error: --dim-orders and --hooks do not go together", file=sys.stderr)
            return 2
        hooks = MODES[args.dim_orders]
    options = dict(dtypes=dtypes, isolated=args.isolated or jobs > 1, jobs=jobs, progress=False if args.no_progress else None,
                   refresh_discovery=args.refresh_discovery, opinfo_filter=set(args.opinfos) if args.opinfos else None,
                   timeout=args.timeout, verbose=args.verbose, log=sys.stderr,
                   generated=generated_cases(args))
    max_details = args.max_details
    if args.dim_order_axis:
        from .dim_orders import AXIS_MAX_DETAILS

        max_details = max(max_details, AXIS_MAX_DETAILS)
    if args.numerics_axis:
        from .numerics import AXIS_MAX_DETAILS as NUMERICS_MAX_DETAILS

        max_details = max(max_details, NUMERICS_MAX_DETAILS)
    report = run(kernels, report_dir=report_dir, hooks=hooks, max_details=max_details, **options)
    del torch
    from .clusters import build

    clusters = build(report, report_dir=report_dir, hooks=hooks, shrink=not args.no_shrink)
    axis = None
    if args.dim_order_axis:
        from .dim_orders import run_axis

        axis = run_axis(kernels, report, report_dir=report_dir, shrink=not args.no_shrink, **options)
    numerics = None
    if args.numerics_axis:
        from .numerics import run_axis as run_numerics_axis

        numerics = run_numerics_axis(kernels, report, report_dir=report_dir, shrink=not args.no_shrink, **options)
    if args.quiet:
        from .clusters import headline
        from .report import summary_line

        print(headline(report, clusters))
        if axis is not None:
            print("\n".join(axis.terminal_lines()[:1 + len(axis.runs)]))  # the verdict counts per layout
        if numerics is not None:
            print(numerics.headline())
        print(summary_line(report))
    else:
        print(terminal(report, clusters=clusters, axis=axis, numerics=numerics))
    if report.generated is not None:
        from .generated import coverage_line

        print(coverage_line(report.generated))
    if args.report:
        write_markdown(report, args.report, clusters, axis, numerics)
        print(f"markdown report: {args.report}")
    if args.json:
        write_json(report, args.json, clusters, axis, numerics)
        print(f"JSON report: {args.json}")
    if args.html:
        from .html import write_html

        write_html(report, args.html, clusters, axis)
        print(f"HTML report: {args.html}")
    n_repro = sum(1 for c in report.details if c.reproducer)
    if n_repro:
        print(f"reproducers: {n_repro} in {Path(report_dir) / 'reproducers'}")
    return exit_status(report, clusters + (numerics.all_clusters() if numerics is not None else []), args.strict, args.report_only)


def exit_status(report, clusters, strict: bool = False, report_only: bool = False) -> int:
    """0 or 1 (see the module doc): 1 when a case crashed, hung, aborted or was an etops
    error, or a finding is a wrong result; `strict`: any mismatch or guarded case
    too; `report_only`: always 0."""
    from .gating import KINDS, gates

    if report_only:
        return 0
    kinds = {status for status, n in report.totals().items() if n and status in KINDS} | {c.category for c in clusters}
    return 1 if any(gates(kind, None, strict=strict) for kind in kinds) else 0


if __name__ == "__main__":
    sys.exit(main())
