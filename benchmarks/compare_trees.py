"""Two etops trees side by side on the same work: ``etops check --json`` over a
kernel set and ``etops dev --json`` over some kernel files of an ExecuTorch
checkout, each run once per tree, then the JSON reports, the reproducers (the
files the runs wrote) and the exit codes compared, timings and paths left out. It
shows that a change meant to keep every verdict (a refactoring) kept them, or
names what differed.

    python benchmarks/compare_trees.py --before SITE_A --after SITE_B \\
        [--kernels aten::add.out,aten::sum.IntList_out,...] [--dev CHECKOUT/kernels/portable/cpu/op_abs.cpp ...] \\
        [--work DIR] [--python PY] [-- more etops check flags]

SITE_A / SITE_B: what goes on PYTHONPATH for each tree (a ``pip install --target``
folder of each checkout of etops, e.g. ``pip install --no-build-isolation
--no-deps --target /tmp/before-site /tmp/before``). ``dev`` runs with
``--no-timing --no-gtest`` and a budget large enough that no task is left out
(timings and the gtest build are not what a verdict refactoring changes, and a
budget makes what runs depend on the machine's load). Prints one line per
difference (the JSON path, before, after) and exits 1 when any, else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

#: keys whose values are timings, dates, hosts or the cache's state: left out of the comparison
VOLATILE = {"created", "seconds", "wall", "wall_seconds", "elapsed", "time", "timing", "timings", "date", "started", "finished",
            "host", "case_seconds", "aten_seconds", "duration", "per_call", "python", "platform", "torch", "etops_version",
            "version", "cache", "cached", "compiled"}
#: a duration inside a line of text ("[exit 0, 230.7 s]")
_DURATION = re.compile(r"\b\d+(?:\.\d+)? s\b")
DEFAULT_KERNELS = ("aten::add.out,aten::sum.IntList_out,aten::_softmax.out,aten::_log_softmax.out,aten::mul.out,"
                   "aten::sub.out,aten::div.out,aten::abs.out,aten::exp.out,aten::where.self_out,aten::mm.out,"
                   "aten::bmm.out,aten::clamp.out,aten::mean.out,aten::cat.out,aten::index_select.out,"
                   "aten::native_layer_norm.out,aten::gelu.out,quantized_decomposed::quantize_per_tensor.out,"
                   "quantized_decomposed::dequantize_per_tensor.out")


def _run(python: str, site: str, args: list[str], cwd: Path) -> int:
    env = dict(os.environ, PYTHONPATH=site)
    cmd = [python, "-c", "import sys; from etops.cli import main; sys.exit(main())", *args]
    cwd.mkdir(parents=True, exist_ok=True)
    with open(cwd / "output.log", "w") as log:
        return subprocess.run(cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT).returncode


def run_tree(name: str, python: str, site: str, work: Path, kernels: list[str], dev_files: list[str],
             check_extra: list[str]) -> dict:
    """Runs check and dev with one tree; {"check": exit, "dev": exit} (the reports in work/name)."""
    out = work / name
    codes = {}
    if kernels:
        d = out / "check"
        codes["check"] = _run(python, site, ["check", *kernels, "--json", str(d / "check.json"), "--report-dir", str(d),
                                             "--no-progress", "--quiet", *check_extra], d)
    if dev_files:
        d = out / "dev"
        codes["dev"] = _run(python, site, ["dev", *dev_files, "--json", str(d / "dev.json"), "--report-dir", str(d),
                                           "--no-timing", "--no-gtest", "--budget", "100000"], d)
    (out / "exit_codes.json").write_text(json.dumps(codes))
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


def normalized(value, root: str):
    """`value` (JSON) with the volatile keys left out, the run's folder taken out of
    strings, and lists of named entries (cases, findings, kernels) made dicts by name."""
    if isinstance(value, dict):
        return {k: normalized(v, root) for k, v in value.items() if k not in VOLATILE and not k.endswith("_seconds")}
    if isinstance(value, list):
        names = [_identity(v) for v in value]
        if value and all(names) and len(set(names)) == len(names):
            return {f"<{n}>": normalized(v, root) for n, v in zip(names, value)}
        return [normalized(v, root) for v in value]
    if isinstance(value, str):
        return _DURATION.sub("<N> s", value.replace(root, "<RUN>"))
    if isinstance(value, float):
        return round(value, 12)
    return value


def differences(a, b, path: str = "$") -> list[tuple[str, object, object]]:
    """(JSON path, before, after) of every leaf that differs."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                found.append((f"{path}.{k}", a.get(k, "<absent>"), b.get(k, "<absent>")))
            else:
                found += differences(a[k], b[k], f"{path}.{k}")
        return found
    if isinstance(a, list) and isinstance(b, list):
        found = [] if len(a) == len(b) else [(f"{path}.length", len(a), len(b))]
        for i, (x, y) in enumerate(zip(a, b)):
            found += differences(x, y, f"{path}[{i}]")
        return found
    return [] if a == b else [(path, a, b)]


def written_files(folder: Path) -> dict:
    """The reproducers and other scripts a run wrote under `folder` (relative path -> text, its folder taken out)."""
    return {str(p.relative_to(folder)): p.read_text(errors="replace").replace(str(folder), "<RUN>")
            for p in sorted(folder.rglob("*.py"))}


def compare(work: Path) -> list[tuple[str, object, object]]:
    before, after = work / "before", work / "after"
    found = differences(json.loads((before / "exit_codes.json").read_text()),
                        json.loads((after / "exit_codes.json").read_text()), "exit")
    for kind in ("check", "dev"):
        a, b = before / kind / f"{kind}.json", after / kind / f"{kind}.json"
        if not a.exists() and not b.exists():
            continue
        ja = normalized(json.loads(a.read_text()), str(before / kind)) if a.exists() else None
        jb = normalized(json.loads(b.read_text()), str(after / kind)) if b.exists() else None
        found += differences(ja, jb, kind)
        found += differences(written_files(before / kind), written_files(after / kind), f"{kind}-files")
    return found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, help="PYTHONPATH of the tree before")
    p.add_argument("--after", required=True, help="PYTHONPATH of the tree after")
    p.add_argument("--kernels", default=DEFAULT_KERNELS, help="comma-separated kernels for etops check ('' for none)")
    p.add_argument("--dev", nargs="*", default=[], metavar="FILE", help="kernel files of a checkout for etops dev")
    p.add_argument("--work", default="/tmp/etops-compare-trees", help="where both runs write (work/before, work/after)")
    p.add_argument("--python", default=sys.executable, help="the interpreter both trees run with")
    p.add_argument("--compare-only", action="store_true", help="compare the runs already in --work")
    p.add_argument("--only", choices=["before", "after"], help="run one tree only (then --compare-only)")
    args, check_extra = p.parse_known_args(argv)
    check_extra = [a for a in check_extra if a != "--"]
    work = Path(args.work)
    kernels = [k for k in args.kernels.split(",") if k]
    if not args.compare_only:
        for name, site in (("before", args.before), ("after", args.after)):
            if args.only in (None, name):
                print(name, run_tree(name, args.python, site, work, kernels, args.dev, check_extra), flush=True)
    if args.only:
        return 0
    found = compare(work)
    for path, a, b in found:
        print(f"{path}: {json.dumps(a)[:300]} -> {json.dumps(b)[:300]}")
    print(f"{len(found)} differences")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
