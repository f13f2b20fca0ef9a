"""Two etops trees side by side on the same work: ``etops check --json`` over a
kernel set (or every registered kernel) and ``etops dev --json`` over kernel files
of an ExecuTorch checkout (some, or every file ``dev_every_file.py`` runs), each
run once per tree, then the JSON reports, the reproducers (the files the runs
wrote) and the exit codes compared, timings and paths left out. It shows that a
change meant to keep every verdict (a refactoring) kept them, or names what
differed, grouped.

    python benchmarks/compare_trees.py --before SITE_A --after SITE_B \\
        [--kernels all | aten::add.out,aten::sum.IntList_out,... | ''] \\
        [--dev CHECKOUT/kernels/portable/cpu/op_abs.cpp ... | --dev-every-file CHECKOUT] [--dev-chunk 8] \\
        [--work DIR] [--python PY] [--only before|after | --compare-only] [--summary-only] [-- more etops check flags]

SITE_A / SITE_B: what goes on PYTHONPATH for each tree (a ``pip install --target``
folder of each checkout of etops, e.g. ``pip install --no-build-isolation
--no-deps --target /tmp/before-site /tmp/before``). Each tree runs with a fresh
``ETOPS_CACHE_DIR`` of its own (WORK/NAME/cache), so neither reads what the
other (or an earlier run) kept. ``dev`` runs with ``--no-timing --no-gtest`` and a
budget large enough that no task is left out (timings and the gtest build are not
what a verdict refactoring changes, and a budget makes what runs depend on the
machine's load), its files in chunks of ``--dev-chunk``, a process and a report a
chunk: a run stopped early keeps the chunks it finished, and only chunks both
trees finished are compared (the others are named). Prints one line per
difference (the JSON path, before, after; not with ``--summary-only``), then the
differences grouped (report, kernel or file, the path with list entries, dtypes
and operators collapsed: a count and one example each), and exits 1 when any,
else 0.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

#: keys whose values are timings, dates, hosts or the cache's state: left out of the comparison
VOLATILE = {"created", "seconds", "wall", "wall_seconds", "elapsed", "time", "timing", "timings", "date", "started", "finished",
            "host", "case_seconds", "aten_seconds", "duration", "per_call", "python", "platform", "torch", "etops_version",
            "version", "cache", "cached", "compiled", "build_dir"}
#: a duration inside a line of text ("[exit 0, 230.7 s]")
_DURATION = re.compile(r"\b\d+(?:\.\d+)? s\b")
DEFAULT_KERNELS = ("aten::add.out,aten::sum.IntList_out,aten::_softmax.out,aten::_log_softmax.out,aten::mul.out,"
                   "aten::sub.out,aten::div.out,aten::abs.out,aten::exp.out,aten::where.self_out,aten::mm.out,"
                   "aten::bmm.out,aten::clamp.out,aten::mean.out,aten::cat.out,aten::index_select.out,"
                   "aten::native_layer_norm.out,aten::gelu.out,quantized_decomposed::quantize_per_tensor.out,"
                   "quantized_decomposed::dequantize_per_tensor.out")
#: --kernels' word for every registered kernel (etops check with no names)
ALL = "all"


def every_dev_file(checkout: str) -> list[str]:
    """The kernel files benchmarks/dev_every_file.py runs for `checkout` (its
    kernel_files over all its kinds), in its order."""
    path = Path(__file__).resolve().parent / "dev_every_file.py"
    spec = importlib.util.spec_from_file_location("dev_every_file", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [str(p) for p in module.kernel_files(Path(checkout), module.KINDS)]


def _run(python: str, site: str, cache: Path, args: list[str], cwd: Path) -> int:
    env = dict(os.environ, PYTHONPATH=site, ETOPS_CACHE_DIR=str(cache))
    cmd = [python, "-c", "import sys; from etops.cli import main; sys.exit(main())", *args]
    cwd.mkdir(parents=True, exist_ok=True)
    with open(cwd / "output.log", "w") as log:
        return subprocess.run(cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT).returncode


def run_tree(name: str, python: str, site: str, work: Path, kernels: list[str] | None, dev_files: list[str],
             check_extra: list[str], chunk: int = 8) -> dict:
    """Runs check (`kernels`: None for no check, [] for every kernel) and dev (in
    chunks of `chunk` files) with one tree in a fresh work/name (its own fresh
    ETOPS_CACHE_DIR); {"check": exit, "dev/000": exit, ...}, written to
    work/name/exit_codes.json after each step, so a run stopped early keeps the
    steps it finished."""
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    cache = out / "cache"
    cache.mkdir(parents=True)
    (out / "tree.json").write_text(json.dumps({"site": site, "cache": str(cache), "dev_files": dev_files}))
    codes: dict = {}
    steps = []
    if kernels is not None:
        d = out / "check"
        steps.append(("check", d, ["check", *kernels, "--json", str(d / "check.json"), "--report-dir", str(d),
                                   "--no-progress", "--quiet", *check_extra]))
    for i in range(0, len(dev_files), chunk):
        d = out / "dev" / f"{i // chunk:03d}"
        steps.append((f"dev/{i // chunk:03d}", d, ["dev", *dev_files[i:i + chunk], "--json", str(d / "dev.json"),
                                                   "--report-dir", str(d), "--no-timing", "--no-gtest", "--budget", "100000"]))
    for step, d, args in steps:
        t = time.monotonic()
        codes[step] = _run(python, site, cache, args, d)
        (out / "exit_codes.json").write_text(json.dumps(codes))
        print(f"{name} {step}: exit {codes[step]} in {time.monotonic() - t:.0f} s ({time.strftime('%H:%M:%S')})", flush=True)
    return codes


#: the fields that name one entry of a list (a case, a finding, a kernel, a file): lists of such
#: entries are compared entry by entry, matched by name, not by position
IDENTITIES = (("kernel", "opinfo", "dtype", "sample", "call"), ("kernel", "kind", "category", "signature", "layout"),
              ("kernel",), ("path",), ("file",), ("namespace",))


def _identity(entry) -> str | None:
    if not isinstance(entry, dict):
        return None
    for fields in IDENTITIES:
        if all(f in entry for f in fields):
            return "|".join(str(entry[f]) for f in fields)
    return None


#: a finding's reproducer's number (findings/012_wrong__mm.out.py): its place in the report, which a
#: finding found or gone before it shifts; taken out, findings are matched by kind and kernel
_FINDING_NUMBER = re.compile(r"(?<![\w.])\d+_(?=[a-z_]+__)")


def _text(value: str, roots: list[tuple[str, str]]) -> str:
    for path, token in roots:
        value = value.replace(path, token)
    return _FINDING_NUMBER.sub("N_", _DURATION.sub("<N> s", value))


def normalized(value, roots: "str | list[tuple[str, str]]"):
    """`value` (JSON) with the volatile keys left out, the run's folders taken out of
    strings (`roots`: (path, token) pairs, longest first; a str: the run's folder,
    "<RUN>"), and lists of named entries (cases, findings, kernels) made dicts by
    name (a name met again in the same list gets ``#2``, ``#3``, ... in order)."""
    if isinstance(roots, str):
        roots = [(roots, "<RUN>")]
    if isinstance(value, dict):
        return {k: normalized(v, roots) for k, v in value.items() if k not in VOLATILE and not k.endswith("_seconds")}
    if isinstance(value, list):
        names = [_identity(v) for v in value]
        if value and all(names):
            seen: dict = {}
            keyed = {}
            for n, v in zip(names, value):
                seen[n] = seen.get(n, 0) + 1
                keyed[f"<{n}>" if seen[n] == 1 else f"<{n}>#{seen[n]}"] = normalized(v, roots)
            return keyed
        return [normalized(v, roots) for v in value]
    if isinstance(value, str):
        return _text(value, roots)
    if isinstance(value, float):
        return round(value, 12)
    return value


def differences(a, b, path="$") -> list[tuple]:
    """(JSON path, before, after) of every leaf that differs; the path is a tuple of
    its parts (keys, list indices) when `path` is one, else a string."""
    parts = path if isinstance(path, tuple) else (path,)
    found = _differences(a, b, parts)
    return found if isinstance(path, tuple) else [(path_text(p), x, y) for p, x, y in found]


def _differences(a, b, path: tuple) -> list[tuple]:
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                found.append(((*path, k), a.get(k, "<absent>"), b.get(k, "<absent>")))
            else:
                found += _differences(a[k], b[k], (*path, k))
        return found
    if isinstance(a, list) and isinstance(b, list):
        if a and b and all(isinstance(v, (str, int, float, bool, type(None))) for v in a + b):
            return _scalar_lists(a, b, path)
        found = [] if len(a) == len(b) else [((*path, "length"), len(a), len(b))]
        for i, (x, y) in enumerate(zip(a, b)):
            found += _differences(x, y, (*path, i))
        return found
    return [] if _same(a, b) else [(path, a, b)]


def _scalar_lists(a: list, b: list, path: tuple) -> list[tuple]:
    """Two lists of plain values (dtypes, OpInfos) as one difference: the values only
    in each (``members``), else the order when they hold the same values."""
    if len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b)):
        return []
    only_a, only_b = [v for v in a if v not in b], [v for v in b if v not in a]
    if only_a or only_b or len(a) != len(b):
        return [((*path, "members"), only_a, only_b)]
    return [((*path, "order"), a, b)]


def _same(a, b) -> bool:
    """Equal leaves, NaN equal to NaN (a max_rel_error of NaN in both reports is no difference)."""
    return a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)


def path_text(path: tuple) -> str:
    """A path of differences() as one line: keys joined by dots, indices in brackets."""
    text = str(path[0])
    for part in path[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def written_files(folder: Path, roots: list[tuple[str, str]] | None = None) -> dict:
    """The reproducers and other scripts a run wrote under `folder` (relative path ->
    text, the run's folders taken out: `roots` as normalized's, else `folder`)."""
    roots = roots or [(str(folder), "<RUN>")]
    files: dict = {}
    for p in sorted(folder.rglob("*.py")):
        name = _FINDING_NUMBER.sub("N_", str(p.relative_to(folder)))
        n = sum(1 for k in files if k == name or k.startswith(name + "#"))
        files[name if n == 0 else f"{name}#{n + 1}"] = _text(p.read_text(errors="replace"), roots)
    return files


def _roots(tree: Path, folder: Path) -> list[tuple[str, str]]:
    """The paths that differ between the trees' runs, longest first: the step's
    folder, the tree's site and cache folder, the tree's work folder."""
    info = json.loads((tree / "tree.json").read_text()) if (tree / "tree.json").exists() else {}
    pairs = [(str(folder), "<RUN>"), (info.get("cache", str(tree / "cache")), "<CACHE>"), (info.get("site", ""), "<SITE>"),
             (str(tree), "<TREE>")]
    return sorted([p for p in pairs if p[0]], key=lambda p: -len(p[0]))


def _label(step: str, suffix: str = "") -> str:
    """A step's name at the head of its differences' paths: check, dev[000]."""
    kind, _, n = step.partition("/")
    return f"{kind}{suffix}" + (f"[{n}]" if n else "")


def compare(work: Path, notes: list | None = None) -> list[tuple]:
    """The differences (path tuple, before, after) between work/before and
    work/after: the exit codes, each JSON report and the files written, of the
    steps both trees finished; a step only one finished is named in `notes`."""
    before, after = work / "before", work / "after"
    codes_a = json.loads((before / "exit_codes.json").read_text())
    codes_b = json.loads((after / "exit_codes.json").read_text())
    both = [s for s in codes_a if s in codes_b]
    notes = notes if notes is not None else []
    for step in sorted(set(codes_a) ^ set(codes_b)):
        notes.append(f"{step}: finished by {'before' if step in codes_a else 'after'} only, not compared")
    for step in [s for s in both if codes_a[s] < 0 or codes_b[s] < 0]:  # a signal ended it: no report to compare
        killed = " and ".join(f"{name} (signal {-code})" for name, code in (("before", codes_a[step]), ("after", codes_b[step]))
                              if code < 0)
        notes.append(f"{step}: killed by a signal in {killed} (the kernel's OOM killer, say), not compared")
        both.remove(step)
    found = _differences({s: codes_a[s] for s in both}, {s: codes_b[s] for s in both}, ("exit",))
    for step in both:
        kind = step.split("/")[0]
        fa, fb = before / step, after / step
        a, b = fa / f"{kind}.json", fb / f"{kind}.json"
        if not a.exists() and not b.exists():
            continue
        ja = normalized(json.loads(a.read_text()), _roots(before, fa)) if a.exists() else None
        jb = normalized(json.loads(b.read_text()), _roots(after, fb)) if b.exists() else None
        found += _differences(ja, jb, (_label(step),))
        found += _differences(written_files(fa, _roots(before, fa)), written_files(fb, _roots(after, fb)),
                              (_label(step, "-files"),))
    return found


#: keys whose children are named by a dtype, an operator or a layout: collapsed to * in the summary
MAPS = {"by_dtype", "cases", "base_cases", "sources", "layout_cases", "numerics_cases", "without", "left_out"}
_FILE_NUMBER = re.compile(r"^(\d+|N)_")


def _is_name(part) -> bool:
    return isinstance(part, str) and part.startswith("<") and (part.endswith(">") or bool(re.search(r">#\d+$", part)))


def where(path: tuple) -> str:
    """The kernel or the kernel file a difference is about ("-": the whole report):
    the first named entry's first field (a file's path from kernels/ on), or the
    kernel (check) or file (dev) a written file is named after."""
    if str(path[0]).split("[")[0].endswith("-files") and len(path) > 1:
        rel = re.sub(r"#\d+$", "", str(path[1]))
        if str(path[0]).startswith("dev"):
            return rel.split("/")[0]
        fields = _FILE_NUMBER.sub("", rel.rsplit("/", 1)[-1]).removesuffix(".py").split("__")
        return fields[1] if len(fields) > 1 else rel
    for part in path[1:]:
        if _is_name(part):
            first = part[1:].split("|")[0].split(">")[0]
            return first.split("/kernels/", 1)[-1]
    return "-"


def collapsed(path: tuple) -> str:
    """The path with what varies within one kind of difference taken out: named
    entries as <>, list indices as [], dev's chunk numbers, a written file's name,
    the dtype / operator / layout under MAPS keys as *."""
    head = re.sub(r"\[\d+\]$", "", str(path[0]))
    if head.endswith("-files"):
        rel = str(path[1]) if len(path) > 1 else ""
        folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
        if head.startswith("dev"):  # <file stem>/findings/NNN_kind__kernel.py
            folder = "/".join(["*", *folder.split("/")[1:]])
        return f"{head}.{folder}/*" if folder else f"{head}.*"
    parts = [head]
    after_map = False
    if head == "exit":  # ("exit", "dev/000"): every chunk's exit code alike
        return "exit." + re.sub(r"/\d+$", "/*", str(path[1])) if len(path) > 1 else head
    for part in path[1:]:
        if isinstance(part, int):
            parts.append("[]")
        elif _is_name(part):
            parts.append("<>")
        else:
            parts.append("*" if after_map else str(part))
        after_map = isinstance(part, str) and part in MAPS
    return ".".join(parts).replace(".[]", "[]")


def summary(found: list[tuple], example_chars: int = 160) -> str:
    """The differences grouped: by (report, collapsed path) with how many leaves
    and kernels or files each, then by (report, kernel or file, collapsed path); a
    count and one example each."""
    coarse: dict = {}
    fine: dict = {}
    for path, a, b in found:
        key = collapsed(path)
        spot = where(path)
        c = coarse.setdefault(key, [0, set(), (path, a, b)])
        c[0] += 1
        c[1].add(spot)
        f = fine.setdefault((key.split(".")[0], spot, key), [0, (path, a, b)])
        f[0] += 1

    def example(item) -> str:
        path, a, b = item
        return f"{path_text(path)}: {json.dumps(a)[:example_chars]} -> {json.dumps(b)[:example_chars]}"

    lines = [f"summary: {len(found)} differences, {len(coarse)} kinds, {len(fine)} groups by kernel or file", "",
             "by kind (leaves, kernels or files, path collapsed; one example):"]
    for key, (n, spots, first) in sorted(coarse.items(), key=lambda kv: (-kv[1][0], kv[0])):
        lines.append(f"  {n:6d} {len(spots):4d}  {key}")
        lines.append(f"               e.g. {example(first)}")
    lines += ["", "by kernel or file (leaves, report, kernel or file, path collapsed; one example):"]
    for (report, spot, key), (n, first) in sorted(fine.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[1][0], kv[0][2])):
        lines.append(f"  {n:6d}  {report}  {spot}  {key}")
        lines.append(f"               e.g. {example(first)}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", help="PYTHONPATH of the tree before (not needed with --compare-only)")
    p.add_argument("--after", help="PYTHONPATH of the tree after (not needed with --compare-only)")
    p.add_argument("--kernels", default=DEFAULT_KERNELS,
                   help=f"comma-separated kernels for etops check, '{ALL}' for every registered kernel, '' for no check")
    dev = p.add_mutually_exclusive_group()
    dev.add_argument("--dev", nargs="*", default=[], metavar="FILE", help="kernel files of a checkout for etops dev")
    dev.add_argument("--dev-every-file", metavar="CHECKOUT",
                     help="etops dev over every file benchmarks/dev_every_file.py runs for CHECKOUT")
    p.add_argument("--dev-chunk", type=int, default=8, metavar="N", help="kernel files per etops dev process (8)")
    p.add_argument("--work", default="/tmp/etops-compare-trees", help="where both runs write (work/before, work/after)")
    p.add_argument("--python", default=sys.executable, help="the interpreter both trees run with")
    p.add_argument("--compare-only", action="store_true", help="compare the runs already in --work")
    p.add_argument("--only", choices=["before", "after"], help="run one tree only (then --compare-only)")
    p.add_argument("--summary-only", action="store_true", help="print the grouped summary, not each difference")
    args, check_extra = p.parse_known_args(argv)
    check_extra = [a for a in check_extra if a != "--"]
    if args.dev_chunk < 1:
        p.error(f"--dev-chunk: at least 1, not {args.dev_chunk}")
    work = Path(args.work)
    kernels = None if not args.kernels else [] if args.kernels == ALL else [k for k in args.kernels.split(",") if k]
    if args.dev_every_file is not None and not (Path(args.dev_every_file) / "kernels").is_dir():
        p.error(f"--dev-every-file: {args.dev_every_file} has no kernels folder (not an ExecuTorch checkout)")
    dev_files = every_dev_file(args.dev_every_file) if args.dev_every_file else args.dev
    if not args.compare_only:
        for name, site in (("before", args.before), ("after", args.after)):
            if args.only in (None, name):
                if not site:
                    p.error(f"--{name}: the tree's PYTHONPATH is needed to run it")
                print(name, run_tree(name, args.python, site, work, kernels, dev_files, check_extra, args.dev_chunk),
                      flush=True)
    if args.only:
        return 0
    notes: list = []
    found = compare(work, notes)
    if not args.summary_only:
        for path, a, b in found:
            print(f"{path_text(path)}: {json.dumps(a)[:300]} -> {json.dumps(b)[:300]}")
    for note in notes:
        print("note:", note)
    print(f"{len(found)} differences")
    if found:
        print(summary(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
