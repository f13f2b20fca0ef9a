"""The commands behind ``etops``: each takes the parsed arguments, prints, returns
the exit code, and raises for errors (``etops.cli.main`` makes them one line)."""

from __future__ import annotations

import os
import sys

from .output import console, emit_json, fits_terminal, is_tty, print_table, progress_bar, quiet, quiet_etops
from .usage import UsageError


# ---- kernel facts ----------------------------------------------------------------------


def _et_package_dir() -> str:
    import importlib.util

    spec = importlib.util.find_spec("executorch")
    return os.path.realpath(list(spec.submodule_search_locations)[0]) if spec and spec.submodule_search_locations else ""


def _origin(library: str, base: str) -> str:
    return "built-in" if base and os.path.realpath(library).startswith(base + os.sep) else "custom"


def _describe(kernel) -> dict:
    """Everything list/show report about one registered operator."""
    base = _et_package_dir()
    entries = kernel.kernels
    fallbacks = [i for i, k in enumerate(entries) if k.key is None]
    items = []
    for i, k in enumerate(entries):
        note = ""
        if k.key is None and len(fallbacks) > 1 and i != fallbacks[-1]:
            note = "shadowed: a later fallback kernel is the one ExecuTorch picks"
        items.append({
            "key": k.key,
            "tensors": [list(t) for t in k.tensors] if k.tensors is not None else None,
            "describe": k.describe(),
            "library": k.library,
            "origin": _origin(k.library, base),
            "note": note,
        })
    origins = {it["origin"] for it in items}
    status = "overridden" if len(origins) > 1 else (origins.pop() if origins else "-")
    schema = getattr(kernel, "_schema", None)
    info = {
        "name": kernel.name,
        "schema": str(schema) if schema is not None else None,
        "schema_known": schema is not None,
        "schema_source": kernel.schema_source,
        "callable": bool(kernel.callable),
        "kernels": items,
        "libraries": sorted({os.path.basename(it["library"]) for it in items}),
        "status": status,
    }
    if not kernel.callable:
        info["not_callable"] = kernel._plan_error
    return info


def _keys_summary(info: dict) -> str:
    items = info["kernels"]
    if len(items) == 1 and items[0]["key"] is None:
        return "fallback"
    dtypes = []
    for it in items:
        if it["tensors"]:
            d = it["tensors"][0][0]
            if d not in dtypes:
                dtypes.append(d)
    fb = " + fallback" if any(it["key"] is None for it in items) else ""
    shown = ", ".join(dtypes[:4]) + (", ..." if len(dtypes) > 4 else "")
    return f"{sum(1 for it in items if it['key'] is not None)} keys ({shown}){fb}"


# ---- commands ----------------------------------------------------------------------------


def version(args) -> int:
    etops = quiet_etops(args.debug)
    import torch

    from ..bench import machine

    m = machine()
    print(f"etops {etops.__version__}, torch {torch.__version__}, executorch {m['executorch']}, python {m['python']}")
    return 0


def cmd_list(args) -> int:
    etops = quiet_etops(args.debug)
    reg = etops.registry()
    names = sorted(reg.operator_names)
    if args.ns:
        unknown = [ns for ns in args.ns if ns not in reg.namespaces]
        if unknown:
            raise UsageError(f"no registered kernels in namespace {unknown[0]!r} (namespaces: {', '.join(reg.namespaces)})")
        names = [n for n in names if n.split("::", 1)[0] in args.ns]
    if args.grep:
        names = [n for n in names if args.grep.lower() in n.lower()]
    with quiet(args.debug):
        infos = [_describe(reg.get_kernel(n)) for n in names]
    if args.json:
        return emit_json([{k: v for k, v in i.items()} for i in infos])
    rows = [[i["name"], _keys_summary(i), ", ".join(i["libraries"]), "yes" if i["schema_known"] else "no"] for i in infos]
    print_table(["name", "kernel keys", "library", "schema known"], rows,
                 caption=f"{len(rows)} kernels" + (f" of {len(reg.operator_names)}" if len(rows) != len(reg.operator_names) else ""))
    return 0


def _show_text(info: dict) -> str:
    lines = [info["name"]]
    lines.append(f"  schema:   {info['schema'] or '(unknown)'}")
    lines.append(f"  source:   {info['schema_source']}")
    lines.append(f"  callable: {'yes' if info['callable'] else 'no - ' + str(info.get('not_callable'))}")
    lines.append(f"  status:   {info['status']}  ({len(info['kernels'])} kernel{'s' if len(info['kernels']) != 1 else ''})")
    for it in info["kernels"]:
        key = it["key"] or "fallback"
        lines.append(f"  kernel {key}")
        if it["tensors"] is not None:
            lines.append(f"    tensors: {it['describe']}")
        lines.append(f"    library: {it['library']} ({it['origin']})")
        if it["note"]:
            lines.append(f"    note:    {it['note']}")
    return "\n".join(lines)


def cmd_show(args) -> int:
    etops = quiet_etops(args.debug)
    reg = etops.registry()
    infos = []
    with quiet(args.debug):
        for name in args.name:
            if "::" not in name:
                name = "aten::" + name
            infos.append(_describe(reg.get_kernel(name)))
    if args.json:
        return emit_json(infos[0] if len(infos) == 1 else infos)
    for n, info in enumerate(infos):
        if n:
            print()
        if is_tty():
            from rich.markup import escape

            text = escape(_show_text(info))
            text = text.replace("built-in)", "[green]built-in[/green])").replace("custom)", "[yellow]custom[/yellow])")
            console().print(text, soft_wrap=True)
        else:
            print(_show_text(info))
    return 0


def _split(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [t.strip() for t in text.split(",") if t.strip()]


def _write_report(result, path: str, title: str, rows=None) -> str:
    with open(path, "w") as f:
        f.write(result.markdown(title=title, rows=rows))
    json_path = os.path.splitext(path)[0] + ".json"
    result.to_json(json_path, rows=rows)
    return json_path


def _show_bench(args, result, title: str, rows: list, summary: bool) -> int:
    """A benchmark's result as --plot, --report, --json and --top ask: the table on
    stdout, notes on stderr."""
    if args.plot:
        result.plot(args.plot)
    if args.report:
        _write_report(result, args.report, title, rows)
    if args.json:
        data = result.to_dict()
        data["rows"] = rows
        return emit_json(data)
    shown = rows[: args.top] if args.top else rows
    if is_tty() and fits_terminal(result.text(rows=shown)):
        console().print(result.table(title=title, rows=shown))
    else:
        print(title)
        print(result.text(rows=shown))
    notes = [result.summary()] if summary else []
    if args.plot:
        notes.append(f"plot: {args.plot}")
    if args.report:
        notes.append(f"report: {args.report} and {os.path.splitext(args.report)[0]}.json")
    for n in notes:
        print(n, file=sys.stderr)
    return 0


def _bench_delegates(args) -> int:
    """``etops bench --delegate SPEC...``: each model lowered to XNNPACK, each of its
    delegates against the same subgraph on ExecuTorch's kernels and on ATen."""
    if args.name or args.all:
        raise UsageError("--delegate takes model functions (FILE.py:FUNCTION); give kernel names, --all or --delegate, one of them")
    for option in ("sizes", "dtype", "grep"):
        if getattr(args, option):
            raise UsageError(f"--{option} goes with kernel names, not --delegate (a model's example inputs fix the sizes)")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {args.threads}")
    if args.repeats is not None and args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
    if args.plot and not os.path.isdir(os.path.dirname(os.path.abspath(args.plot))):
        raise UsageError(f"--plot: no folder {os.path.dirname(os.path.abspath(args.plot))}")
    quiet_etops(args.debug)
    from ..bench import delegates

    models = [m for spec in args.delegate for m in delegates.models_from_spec(spec)]
    with quiet(args.debug), progress_bar("bench --delegate") as update:
        result = delegates.bench_models(models, repeats=args.repeats or 11, warmup=args.warmup, target=args.target,
                                        threads=args.threads, progress=update)
    title = "delegate vs the same subgraph on ExecuTorch kernels and on ATen: " + ", ".join(name for name, _ in models)
    return _show_bench(args, result, title, result.rows, summary=True)


def _load(args, debug: bool) -> list[str]:
    """Applies --load; the operator names loaded."""
    if not getattr(args, "load", None):
        return []
    quiet_etops(debug)
    from ..checkout.load import load_all

    with quiet(debug):
        return load_all(args.load)


def _ab_rows(args, kernel, builtin, sizes, dtypes) -> list[dict]:
    from ..bench.ab import ab_sample, time_ab

    rows = []
    for dtype in dtypes:
        for size in sizes:
            with quiet(args.debug):
                sample = ab_sample(kernel, size, dtype)
                if sample is None:
                    rows.append({"kernel": kernel.name, "dtype": dtype, "size_label": size,
                                 "error": f"no OpInfo sample of {size} elements works on both sides"})
                    continue
                row = time_ab(kernel, builtin, sample, repeats=args.repeats or 11, warmup=args.warmup, target=args.target,
                              threads=1 if args.threads is None else args.threads)
            row["size_label"] = size
            rows.append(row)
    return rows


def _bench_against_builtin(args, names: list[str]) -> int:
    """``etops bench NAME... --against builtin``: each overridden kernel against the
    built-in it replaced and ATen, A/B."""
    from ..bench.ab import describe_ratio
    from ..custom.registration import builtin_function, callable_function

    etops = quiet_etops(args.debug)
    reg = etops.registry()
    sizes = _split(args.sizes) or ["64k"]
    dtypes = _split(args.dtype) or ["float32"]
    rows = []
    for name in names:
        kernel = reg.get_kernel(name)
        address = builtin_function(name)
        if address is None:
            raise UsageError(f"{name} is not overridden: nothing to compare with its built-in (load a kernel with --load FILE.cpp)")
        handle = callable_function(name, kernel._schema, address, "builtin")
        builtin = handle.kernel
        try:
            rows += _ab_rows(args, kernel, builtin, sizes, dtypes)
        finally:
            handle.deregister()
    if args.json:
        return emit_json(rows)
    for row in rows:
        if row.get("error"):
            print(f"{row['kernel']} {row['dtype']} {row['size_label']}: {row['error']}")
            continue
        us = ", ".join(f"{k} {row[k]['median'] * 1e6:.2f} us" for k in ("new", "builtin", "aten") if k in row)
        print(f"{row['kernel']} {row['dtype']} {row['shapes']} ({row['threads']} thread{'s' if row['threads'] != 1 else ''}, "
              f"{row['repeats']} interleaved rounds): {us}")
        if "vs_builtin" in row:
            print("  " + describe_ratio(row["vs_builtin"], row["verdict_builtin"], "built-in"))
        else:
            print(f"  built-in: {row.get('builtin_error')}")
        print("  " + describe_ratio(row["vs_aten"], row["verdict_aten"], "ATen"))
    return 0


def cmd_bench(args) -> int:
    loaded = _load(args, args.debug)
    if loaded and not args.name and not args.all and not args.delegate:
        args.name = loaded
    if args.against == "builtin":
        if args.all or args.delegate or not args.name:
            raise UsageError("--against builtin takes kernel names (or --load FILE.cpp), not --all or --delegate")
        return _bench_against_builtin(args, [n if "::" in n else "aten::" + n for n in args.name])
    if args.delegate:
        return _bench_delegates(args)
    if args.grep and not args.all:
        raise UsageError("--grep goes with --all")
    if args.all and args.name:
        raise UsageError("give kernel names or --all, not both")
    if not args.all and not args.name:
        raise UsageError("name a kernel (etops bench aten::add.out), pass --all, or --delegate FILE.py:FUNCTION")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {args.threads}")
    if args.repeats is not None and args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
    from ..bench import inputs as _inputs

    size_texts = _split(args.sizes)
    sizes = [_inputs.parse_size(s) for s in size_texts] if size_texts is not None else None
    dtypes = _split(args.dtype)
    from ..bench import parse_dtype

    if dtypes:
        dtypes = [parse_dtype(d) for d in dtypes]
    if args.plot:
        d = os.path.dirname(os.path.abspath(args.plot))
        if not os.path.isdir(d):
            raise UsageError(f"--plot: no folder {d}")
    etops = quiet_etops(args.debug)
    reg = etops.registry()
    if args.all:
        if args.budget <= 0:
            raise UsageError("--budget must be positive")
        if dtypes and len(dtypes) > 1:
            raise UsageError("--all takes one --dtype")
        selected = None
        if args.grep:
            selected = sorted(n for n in reg.operator_names if n.startswith("aten::") and args.grep.lower() in n.lower())
            if not selected:
                raise UsageError(f"no registered aten kernel name contains {args.grep!r}")
        with quiet(args.debug), progress_bar("bench --all") as update:
            result = etops.bench_all(budget=args.budget, kernels=selected, size=None if args.size == "sample" else args.size,
                                     dtype=dtypes[0] if dtypes else "float32", threads=args.threads, progress=update)
        rows = result.ranked()
        title = f"ExecuTorch / ATen, {'aten kernels matching ' + repr(args.grep) if args.grep else 'every registered aten kernel'}, slowest ratio first (budget {args.budget:g} s)"
    else:
        kernels = [reg.get_kernel(n if "::" in n else "aten::" + n) for n in args.name]
        with quiet(args.debug), progress_bar("bench") as update:
            result = etops.bench(kernels, sizes=sizes, dtypes=dtypes, repeats=args.repeats or 11, warmup=args.warmup,
                                 target=args.target, threads=args.threads, progress=update)
        rows = result.rows
        title = "ExecuTorch (etops) / ATen, " + ", ".join(k.name for k in kernels)
    return _show_bench(args, result, title, rows, summary=args.all)


def cmd_threads(args) -> int:
    etops = quiet_etops(args.debug)
    import torch

    from ..bench import threads as _threads

    before = etops.get_num_threads()
    if args.n is not None:
        if args.n < 1:
            raise UsageError(f"the threadpool needs at least 1 thread, got {args.n}")
        etops.set_num_threads(args.n)
    now = etops.get_num_threads()
    data = {"executorch": now, "previous": before, "default": _threads.default_num_threads(), "torch": torch.get_num_threads(), "cores": os.cpu_count()}
    if args.json:
        return emit_json(data)
    print(f"ExecuTorch threadpool: {now} threads" + (f" (was {before})" if now != before else "")
          + f"; default {data['default']} (the logical cores); torch intra-op threads: {data['torch']}")
    if args.n is not None:
        print("The size lasts for this process only: use 'etops bench --threads N', or etops.set_num_threads(N) in Python.")
    return 0


def cmd_backends(args) -> int:
    etops = quiet_etops(args.debug)
    with quiet(args.debug):
        loaded = etops.delegate.load_backend_libraries()
        found = etops.backends()
    data = [{"name": b.name, "available": b.available} for b in found]
    failed = {name: message for name, message in loaded.items() if message}
    if args.json:
        return emit_json({"backends": data, "libraries": sorted(loaded), "failed_libraries": failed})
    rows = [[b.name, "yes" if b.available else "no"] for b in found]
    print_table(["backend", "available"], rows,
                 caption=f"{len(rows)} backends, from {', '.join(sorted(loaded))}")
    for name, message in failed.items():
        print(f"not loaded: {name}: {message}")
    return 0



def cmd_needs(args) -> int:
    """``etops needs PROGRAM``: exit 1 when a call cannot be resolved here."""
    etops = quiet_etops(args.debug)
    _load(args, args.debug)
    with quiet(args.debug):
        result = etops.needs(args.program)
    if args.selected_ops:
        result.write_selected_operators(args.selected_ops)
    if args.json == "-":
        emit_json(result.to_dict())
    else:
        if args.json:
            result.to_json(args.json)
        print_table(result.HEADERS, result.rows(), title=f"etops needs {result.source}", caption=result.summary())
        for m in result.missing:
            print(f"missing: {m.site.method} {m.site.chain}:{m.site.instruction}: {m.reason}")
    return 0 if result.ok else 1


def cmd_dev(args) -> int:
    """``etops dev PATH...``: 0 the edit introduces no finding, 1 it introduces one,
    2 a build error, 3 an operator got no case."""
    if args.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {args.threads}")
    if args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
    if args.max_rounds is not None and not args.watch:
        raise UsageError("--max-rounds goes with --watch")
    if args.max_slowdown is not None and args.max_slowdown <= 1:
        raise UsageError(f"--max-slowdown must be above 1, got {args.max_slowdown}")
    if not args.paths and args.changed is None:
        raise UsageError("give kernel files or folders, or --changed [REV]")
    if args.watch and args.changed is not None:
        raise UsageError("--watch goes with kernel files or folders, not --changed")
    for flag in ("json", "markdown"):
        value = getattr(args, flag)
        if value and not os.path.isdir(os.path.dirname(os.path.abspath(value))):
            raise UsageError(f"--{flag}: no folder {os.path.dirname(os.path.abspath(value))}")
    for path in args.paths:
        if not os.path.exists(path):
            raise UsageError(f"{path}: no such file or folder")
    etops = quiet_etops(args.debug)
    from ..bench import parse_dtype
    from ..dev.base import Base

    dtypes = [parse_dtype(d) for d in _split(args.dtype) or ()] or None
    parse_dtype(args.timing_dtype)
    try:
        base = Base.parse(args.base)
    except ValueError as exc:
        raise UsageError(f"--base: {exc}") from None
    from ..dev.cases import chosen_opinfos

    try:
        chosen_opinfos(args.opinfos)
    except ValueError as exc:
        raise UsageError(f"--opinfo: {exc}") from None
    report_dir = args.report_dir or (os.path.join(os.path.dirname(os.path.abspath(args.json)), "etops-dev") if args.json else None)
    options = dict(root=args.root, yaml=args.yaml, dtypes=dtypes, timing_dtype=args.timing_dtype, threads=args.threads,
                   repeats=args.repeats, check=not args.no_check, timing=not args.no_timing, budget=args.budget or None,
                   base=base, isolate=not args.no_isolate,
                   max_slowdown=args.max_slowdown, report_dir=report_dir, changed=args.changed,
                   gtest=not args.no_gtest, dim_orders=not args.no_dim_orders, numerics=not args.no_numerics,
                   generated=not args.no_generated, python_tests=not args.no_python_tests, opinfos=args.opinfos)

    def show(result) -> None:
        from ..dev import progress

        progress.clear()  # the status line (a terminal only) off before the report
        print(result.text(), flush=True)
        if args.json:
            result.write_json(args.json)
        if args.markdown:
            result.write_markdown(args.markdown)
        if args.watch:
            print(f"watching {len(args.paths)} path{'s' if len(args.paths) != 1 else ''} and the checkout headers they "
                  "include (Ctrl-C ends)", flush=True)

    from ..dev import stream
    from ..learned_store import log_to_stderr

    if args.debug:
        log_to_stderr()  # what etops' disk store did not trust, and why
    with quiet(args.debug), stream.enabled(lambda line: print(line, flush=True)):  # findings as they come
        if args.watch:
            result = etops.dev.watch(args.paths, on_round=show, rounds=args.max_rounds, **options)
        else:
            result = etops.dev(args.paths, **options)
            show(result)
    if result is None:
        return 0
    result.restore()  # the command is over (and main() may be called in-process)
    return result.exit_code
