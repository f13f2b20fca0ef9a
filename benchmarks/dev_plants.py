"""Planted bugs through ``etops dev``: does the gate fail every wrong edit, with
reproducers that fail while the bug stands and pass once it is reverted?

Each plant (``PLANTS`` in ``dev_plants_list.py`` next to this script) is a small
edit of one upstream kernel file: exact old text -> new text, a kind, and what it
should be found as. For each plant, in a copy of the checkout (the checkout itself is
never touched: ``git clone`` into ``--work``):

1. apply the plant (a working-tree edit over HEAD, so HEAD is ``etops dev``'s base);
2. run ``etops dev FILE --json J --report-dir D`` (its own process) with a wall-clock
   ``--timeout``; a run past it is "hung etops dev";
3. run every gating finding's reproducer (``--repro-timeout``): it should exit 1;
4. revert the plant (``git checkout FILE``) and run each reproducer again: exit 0.

Unmodified files (``CONTROLS``) are run too: exit 0 expected. Results go to
``--state`` (resumed from: a plant already there is not run again unless ``--rerun``);
the markdown table is printed and written to ``--markdown``.

    python benchmarks/dev_plants.py CHECKOUT [--work DIR] [--state dev-plants.json]
        [--markdown table.md] [--only NAME,...] [--timeout 600] [--repro-timeout 180]
        [--list] [-- more etops dev flags, e.g. --budget 30]

CHECKOUT must be a git checkout of pytorch/executorch whose HEAD is the pristine
source the plants were written against (cff6f4d); ``--list`` checks that every
plant's old text occurs exactly once there and prints the plants.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dev_plants_list import CONTROLS, PLANTS  # noqa: E402


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def prepare_work(checkout: Path, work: Path) -> Path:
    """A clone of `checkout` in `work`/et (made once; reset to HEAD when it exists)."""
    dest = work / "et"
    if not (dest / ".git").exists():
        work.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", str(checkout), str(dest)], check=True)
    _git(dest, "checkout", "-q", "--", ".")
    return dest


def apply_plant(repo: Path, plant: dict) -> None:
    """Writes the plant's edits over the file at HEAD; each old text must occur once."""
    path = repo / plant["file"]
    text = path.read_text()
    for old, new in plant["edits"]:
        n = text.count(old)
        if n != 1:
            raise ValueError(f"plant {plant['name']}: old text occurs {n} times in {plant['file']}: {old[:60]!r}")
        text = text.replace(old, new)
    path.write_text(text)


def revert(repo: Path, rel: str) -> None:
    _git(repo, "checkout", "-q", "--", rel)


def run_dev(repo: Path, rel: str, out: Path, extra: list[str], timeout: float) -> dict:
    """`etops dev` on one file in a process of its own; its exit code, seconds and JSON
    (None when it hung past `timeout` or wrote none)."""
    out.mkdir(parents=True, exist_ok=True)
    js = out / "dev.json"
    if js.exists():
        js.unlink()
    cmd = [sys.executable, "-c", "import sys; from etops.cli import main; sys.exit(main())", "dev",
           str(repo / rel), "--json", str(js), "--report-dir", str(out / "report"), *extra]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=out, stdout=open(out / "dev.out", "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # the etops dev process group this function started
        proc.wait()
        code = "hung"
    seconds = time.perf_counter() - t
    data = json.loads(js.read_text()) if code != "hung" and js.exists() else None
    return {"exit": code, "seconds": round(seconds, 1), "json": data}


def run_reproducer(path: Path, cwd: Path, timeout: float):
    """The reproducer's exit code, or "hung"."""
    proc = subprocess.Popen([sys.executable, str(path)], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        return "hung"


def findings_of(data: dict | None) -> tuple[list[dict], list[str], list[str]]:
    """The findings (category, gating, in_base, layout, dtypes, reproducer), the
    timing findings (slowdown, crashed) and the upstream gtest's regressions (test
    names) of one file's dev JSON."""
    if not data or not data.get("files"):
        return [], [], []
    f = data["files"][0]
    found = [{"category": x["category"], "gating": x["gating"], "in_base": x["in_base"], "layout": x.get("layout"),
              "kernel": x.get("kernel"), "dtypes": x.get("input_dtypes") or x.get("dtypes"),
              "reproducer": x.get("reproducer"), "summary": (x.get("summary") or "")[:300]}
             for x in f.get("findings", [])]
    timing = [f"timing {'crashed' if r.get('crashed') else 'slowdown'} {r.get('kernel', '').split('::')[-1]} {r.get('label', '')}"
              for r in f.get("timing") or [] if r.get("slowdown_finding") or r.get("crashed")]
    gtest = [r["name"] for r in (f.get("gtest") or {}).get("regressions") or []]
    return found, timing, gtest


def verdict(row: dict) -> str:
    """ok, or FAIL and why: exit 1 from a gating finding of etops' own judge or timing
    (upstream's gtest failing alone is not etops finding it: it has no reproducer),
    every gating reproducer 1 with the plant and 0 after the revert (a control: exit 0)."""
    if row.get("control"):
        return "ok" if row["exit"] == 0 else f"FAIL: unmodified file exits {row['exit']}"
    if row["exit"] == "hung":
        return "FAIL: hung etops dev"
    if row["exit"] != 1:
        return f"FAIL: exit {row['exit']}" + (" (build error)" if row["exit"] == 2 else "")
    why = []
    gating = [f for f in row["findings"] if f["gating"]]
    if not gating and not row["timing_findings"]:
        nongating = sorted({f["category"] for f in row["findings"] if not f["in_base"]})
        why.append(("found only by upstream's gtest" if row.get("gtest_regressions") else "exit 1 with no gating finding")
                   + (f" (etops: {', '.join(nongating)}, not gating)" if nongating else " (etops: no new finding)"))
    for f in gating:
        if f.get("with_plant") != 1:
            why.append(f"reproducer of {f['category']} exits {f.get('with_plant')} with the plant")
        if f.get("after_revert") != 0:
            why.append(f"reproducer of {f['category']} exits {f.get('after_revert')} after the revert")
    counted = [w if why.count(w) == 1 else f"{w} (x{why.count(w)})" for w in dict.fromkeys(why)]
    return "ok" if not why else "FAIL: " + "; ".join(counted)


def run_one(repo: Path, plant: dict, out: Path, extra: list[str], timeout: float, repro_timeout: float) -> dict:
    rel = plant["file"]
    control = plant.get("control", False)
    if not control:
        apply_plant(repo, plant)
    try:
        res = run_dev(repo, rel, out, [*extra, *plant.get("args", [])], timeout)
        found, timing, gtest = findings_of(res["json"])
        for f in found:
            if f["gating"] and f["reproducer"]:
                f["with_plant"] = run_reproducer(out / f["reproducer"], out, repro_timeout)
    finally:
        revert(repo, rel)
    for f in found:
        if f["gating"] and f["reproducer"] and not control:
            f["after_revert"] = run_reproducer(out / f["reproducer"], out, repro_timeout)
    row = {"name": plant["name"], "kind": plant["kind"], "file": rel, "expect": plant.get("expect", ""),
           "control": control, "exit": res["exit"], "seconds": res["seconds"], "findings": found,
           "timing_findings": timing, "gtest_regressions": gtest, "args": plant.get("args", [])}
    if res["json"] is None and res["exit"] != "hung":
        tail = (out / "dev.out").read_text()[-600:] if (out / "dev.out").exists() else ""
        row["error"] = tail.strip().splitlines()[-1] if tail.strip() else ""
    row["verdict"] = verdict(row)
    return row


def refresh(state: dict, work: Path) -> None:
    """Recomputes each row's timing findings, upstream-test regressions and verdict from
    the dev JSON kept under `work`/runs (after a change of `verdict`; the reproducers'
    exits kept)."""
    for name, row in state.items():
        js = work / "runs" / name / "dev.json"
        if js.exists():
            _, row["timing_findings"], row["gtest_regressions"] = findings_of(json.loads(js.read_text()))
        row["verdict"] = verdict(row)


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(state: dict) -> str:
    """The markdown table, a row a plant (then the controls), and the count of ok."""
    rows = ["| plant | kind | file | exit | findings | reproducer with the plant (want 1) | "
            "after revert (want 0) | s | verdict |", "|---|---|---|---|---|---|---|---:|---|"]
    order = [p["name"] for p in PLANTS + CONTROLS]
    names = [n for n in order if n in state] + sorted(n for n in state if n not in order)
    ok = 0
    for name in names:
        r = state[name]
        ok += r["verdict"] == "ok"
        fs = r["findings"]
        kinds = [f"{f['category']}{' (' + f['layout'] + ')' if f.get('layout') else ''}" for f in fs if f["gating"]]
        kinds += r["timing_findings"]
        if r.get("gtest_regressions"):
            kinds.append(f"upstream test: {len(r['gtest_regressions'])} regressions")
        kinds = ["gating: " + ", ".join(k if kinds.count(k) == 1 else f"{k} x{kinds.count(k)}"
                                        for k in dict.fromkeys(kinds))] if kinds else []
        new = sorted({f["category"] for f in fs if not f["gating"] and not f["in_base"]})
        kinds += ["not gating: " + ", ".join(new)] if new else []
        shared = sorted({f["category"] for f in fs if f["in_base"]})
        kinds += [f"in base: {', '.join(shared)}"] if shared else []
        gating = [f for f in fs if f["gating"]]
        with_plant = ", ".join(str(f.get("with_plant", "-")) for f in gating) or "-"
        after = ", ".join(str(f.get("after_revert", "-")) for f in gating) or "-"
        want = "want 0" if r.get("control") else "want 1"
        rows.append(f"| {_cell(name)} | {_cell(r['kind'])} | `{r['file'].replace('kernels/', '')}` | "
                    f"{r['exit']} ({want}) | {_cell('; '.join(kinds) or '-')} | {with_plant} | {after} | "
                    f"{r['seconds']:.0f} | {_cell(r['verdict'])} |")
    return f"ok: {ok} of {len(names)}\n\n" + "\n".join(rows) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout", type=Path)
    ap.add_argument("--work", type=Path, help="where the copy of the checkout and the reports go (default: a temp folder)")
    ap.add_argument("--state", type=Path, default=Path("dev-plants.json"), help="results so far (resumed from)")
    ap.add_argument("--markdown", type=Path, help="write the table here too")
    ap.add_argument("--only", help="comma-separated plant names to run")
    ap.add_argument("--rerun", action="store_true", help="run the selected plants again even when in --state")
    ap.add_argument("--timeout", type=float, default=600, help="seconds one etops dev may take (default 600)")
    ap.add_argument("--repro-timeout", type=float, default=180, help="seconds one reproducer may take (default 180)")
    ap.add_argument("--refresh", action="store_true",
                    help="recompute the verdicts of --state from the JSON kept in --work; run nothing")
    ap.add_argument("--list", action="store_true", help="check the plants against CHECKOUT and list them; run nothing")
    ap.add_argument("extra", nargs="*", help="more etops dev flags (after --)")
    args = ap.parse_args()
    if not (args.checkout / ".git").exists():
        ap.error(f"{args.checkout} is not a git checkout (the base is the file at HEAD)")
    everything = PLANTS + CONTROLS
    known = {p["name"] for p in everything}
    only = [n for n in (args.only or "").split(",") if n]
    unknown = [n for n in only if n not in known]
    if unknown:
        ap.error(f"--only: unknown plants {unknown}")
    if args.list:
        for p in PLANTS:
            text = _git(args.checkout, "show", f"HEAD:{p['file']}")
            counts = [text.count(old) for old, _ in p["edits"]]
            print(f"{p['name']:28} {p['kind']:26} {p['file']:45} {'ok' if counts == [1] * len(counts) else counts}")
        return
    state = json.loads(args.state.read_text()) if args.state.exists() else {}
    if args.refresh:
        if not args.work:
            ap.error("--refresh needs --work (where the runs' JSON is)")
        refresh(state, args.work)
        args.state.write_text(json.dumps(state, indent=1, sort_keys=True))
        todo = []
    else:
        todo = [p for p in everything if (not only or p["name"] in only) and (args.rerun or p["name"] not in state)]
    if todo:
        work = args.work or Path(tempfile.mkdtemp(prefix="etops-dev-plants-"))
        repo = prepare_work(args.checkout.resolve(), work.resolve())
    for i, plant in enumerate(todo):
        row = run_one(repo, plant, work.resolve() / "runs" / plant["name"], args.extra, args.timeout, args.repro_timeout)
        state[plant["name"]] = row
        args.state.write_text(json.dumps(state, indent=1, sort_keys=True))
        print(f"[{i + 1}/{len(todo)}] {plant['name']}: exit {row['exit']} in {row['seconds']:.0f} s: {row['verdict']}",
              flush=True)
    text = table(state)
    if args.markdown:
        args.markdown.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
