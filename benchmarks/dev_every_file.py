"""Every unmodified kernel file of an ExecuTorch checkout through ``etops dev``
(the table of docs/dev.md): each file of ``kernels/portable/cpu``, ``kernels/optimized/cpu``
and ``kernels/quantized/cpu`` judged against itself at git ``HEAD``, as an author
would run it before editing. An unmodified file should exit 0 (no finding the base
does not share, timings "no difference") or 3 (an operator no case reaches, named).

Files run in chunks, a fresh ``etops dev`` process a chunk (``--json`` per chunk),
so a process that dies loses one chunk, and the run resumes from ``--state``.
The table (markdown) is printed at the end and written to ``--markdown``.

    python benchmarks/dev_every_file.py CHECKOUT [--kinds portable,optimized,quantized]
        [--chunk 8] [--state dev-every-file.json] [--markdown table.md] [--limit N]
        [--shard K/N] [--also OTHER-STATE.json ...] [-- more etops dev flags, e.g. --budget 30]

``--shard K/N`` runs every N-th file from the K-th (two processes, two shards, each
with a state of its own); ``--also`` adds other states' rows to the table.

CHECKOUT must be a git checkout (the base is the file at HEAD).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KINDS = ("portable", "optimized", "quantized")


def kernel_files(checkout: Path, kinds) -> list[Path]:
    files = []
    for kind in kinds:
        files += sorted((checkout / "kernels" / kind / "cpu").glob("op_*.cpp"))
    return files


def _etops_dev(files: list[Path], out_json: Path, report_dir: Path, extra: list[str]) -> tuple[int, str, float]:
    cmd = [sys.executable, "-c", "import sys; from etops.cli import main; sys.exit(main())", "dev", *map(str, files),
           "--json", str(out_json), "--report-dir", str(report_dir), *extra]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tempfile.gettempdir())
    return proc.returncode, proc.stdout[-4000:] + proc.stderr[-4000:], time.perf_counter() - t


def _summary(f: dict) -> dict:
    """One file's row from its dev JSON entry."""
    timing = f.get("timing") or []
    words = sorted({r.get("verdict") or ("no sample" if r.get("error") else "?") for r in timing})
    gt = f.get("gtest") or {}
    counts = gt.get("counts") or {}
    return {
        "exit": f["exit_code"], "ops": f.get("ops", []), "cases": f.get("cases", {}), "no_case": f.get("no_case", []),
        "error": (f.get("error") or "").splitlines()[0][:300] if f.get("error") else "",
        "new_findings": f.get("new_findings", 0),
        "in_base": sum(1 for x in f.get("findings", []) if x.get("in_base")),
        "layout_cases": sum(sum(v.get("cases", {}).values()) for v in (f.get("layout_cases") or {}).values()),
        "left_out": sum((f.get("left_out") or {}).values()),
        "timing": words,
        "gtest": {**counts, "regressions": len(gt.get("regressions") or []), "error": (gt.get("error") or "")[:200],
                  "ran": len(gt.get("files") or []), "not_run": [n["why"][:200] for n in gt.get("not_run") or []]} if gt else {},
        "seconds": round(sum((f.get("seconds") or {}).values()), 1),
    }


def run(checkout: Path, kinds, chunk: int, state_path: Path, extra: list[str], limit: int | None,
        shard: tuple[int, int] = (0, 1)) -> dict:
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    todo = [p for p in kernel_files(checkout, kinds)[shard[0]::shard[1]] if str(p.relative_to(checkout)) not in state]
    if limit is not None:
        todo = todo[:limit]
    work = Path(tempfile.mkdtemp(prefix="etops-dev-every-"))
    for i in range(0, len(todo), chunk):
        files = todo[i:i + chunk]
        out = work / f"chunk{i}.json"
        code, tail, wall = _etops_dev(files, out, work / f"reports{i}", extra)
        data = json.loads(out.read_text()) if out.exists() else {"files": [], "skipped": []}
        seen = set()
        for f in data.get("files", []):
            rel = str(Path(f["path"]).resolve().relative_to(checkout.resolve()))
            state[rel] = _summary(f)
            seen.add(rel)
        for s in data.get("skipped", []):
            rel = str(Path(s).resolve().relative_to(checkout.resolve()))
            state[rel] = {"exit": "helper", "error": "implements no operator of the YAML", "ops": []}
            seen.add(rel)
        for p in files:  # the process died or left a file out: say so
            rel = str(p.relative_to(checkout))
            if rel not in seen:
                state[rel] = {"exit": f"process exit {code}", "error": tail.strip().splitlines()[-1][:300] if tail.strip() else "",
                              "ops": []}
        state_path.write_text(json.dumps(state, indent=1, sort_keys=True))
        done = sum(1 for p in todo[:i + chunk])
        print(f"[{done}/{len(todo)}] chunk of {len(files)} in {wall:.0f} s, exit {code}", flush=True)
    return state


def table(state: dict) -> str:
    """The markdown table, a row a file, and the counts of each exit."""
    rows = ["| file | exit | operators (cases) | dim-order cases | findings also in base | timing | upstream test | why |",
            "|---|---|---|---:|---:|---|---|---|"]
    counts: dict = {}
    for rel in sorted(state):
        s = state[rel]
        counts[str(s["exit"])] = counts.get(str(s["exit"]), 0) + 1
        ops = ", ".join(f"{op.split('::')[-1]} ({s.get('cases', {}).get(op, 0)})" for op in s.get("ops", []))
        gt = s.get("gtest") or {}
        test = (f"{gt.get('passed', 0)} passed, {gt.get('failed', 0)} failed, {gt.get('regressions', 0)} regressions"
                if gt.get("ran", not gt.get("error")) and gt else "does not build" if gt.get("error") else "-")
        if gt.get("not_run"):
            test += f" ({len(gt['not_run'])} test file{'s' if len(gt['not_run']) != 1 else ''} not run)"
        why = s.get("error") or (("no case: " + ", ".join(s["no_case"])) if s.get("no_case") else "")
        if s.get("left_out"):
            why = (why + "; " if why else "") + f"{s['left_out']} tasks past the budget"
        why = why.replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{rel}` | {s['exit']} | {ops} | {s.get('layout_cases', '')} | {s.get('in_base', '')} | "
                    f"{', '.join(s.get('timing', [])) or '-'} | {test} | {why} |")
    head = "exits: " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + f" ({len(state)} files)\n\n"
    return head + "\n".join(rows) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout", type=Path)
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated: portable, optimized, quantized")
    ap.add_argument("--chunk", type=int, default=8, help="files per etops dev process (default 8)")
    ap.add_argument("--state", type=Path, default=Path("dev-every-file.json"), help="results so far (resumed from)")
    ap.add_argument("--markdown", type=Path, help="write the table here too")
    ap.add_argument("--limit", type=int, help="run at most N more files")
    ap.add_argument("--shard", default="0/1", help="K/N: every N-th file from the K-th (default 0/1: all)")
    ap.add_argument("--also", action="append", type=Path, default=[], help="another state whose rows join the table")
    ap.add_argument("extra", nargs="*", help="more etops dev flags (after --)")
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        ap.error(f"--kinds: unknown {bad}; choose from {KINDS}")
    if not (args.checkout / ".git").exists():
        ap.error(f"{args.checkout} is not a git checkout (the base is the file at HEAD)")
    try:
        k, n = (int(x) for x in args.shard.split("/"))
        if not 0 <= k < n:
            raise ValueError
    except ValueError:
        ap.error(f"--shard: K/N with 0 <= K < N, not {args.shard!r}")
    state = run(args.checkout.resolve(), kinds, args.chunk, args.state, args.extra, args.limit, (k, n))
    for other in args.also:
        state = {**json.loads(other.read_text()), **state}
    text = table(state)
    if args.markdown:
        args.markdown.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
