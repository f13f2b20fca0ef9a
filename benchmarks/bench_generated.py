"""Root causes the generated cases add to ``etops check``, and what they cost.

Runs (or reads) two full sweeps of every registered kernel: OpInfo's samples and the
references alone, and the same with ``--generated``; then prints, per sweep, its
wall time, cases and findings (root causes), and the findings only the second one
has, by kernel and category (a finding is the JSON report's cluster: kernel, kind,
signature, layout). A measurement, not a test.

    python benchmarks/bench_generated.py [--jobs 2] [--out DIR] [--reuse]
        [--markdown table.md]

``--reuse`` reads DIR/opinfo.json and DIR/both.json (and their wall times from
DIR/seconds.json) instead of running the sweeps again.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def sweep(out: Path, name: str, jobs: int, generated: bool) -> float:
    """One `etops check` of every registered kernel (--report-only: the report is
    the result); its wall time in seconds."""
    argv = [sys.executable, "-m", "etops", "check", "--isolated", "--jobs", str(jobs), "--no-progress", "-q", "--report-only",
            "--json", str(out / f"{name}.json"), "--report-dir", str(out / name)]
    if generated:
        argv.append("--generated")
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def root_causes(data: dict) -> dict:
    """(kernel, kind, signature, layout) -> the finding, for every finding of a report."""
    return {(f["kernel"], f["kind"], f["signature"], f.get("layout")): f for f in data["findings"]}


def table(opinfo: dict, both: dict, seconds: dict) -> str:
    """The markdown figures: the two sweeps, then the findings only the second has."""
    rows = ["| sweep | wall (s) | sweep (s) | cases | root causes | wrong | abort | unsupported |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, data in (("OpInfo + references", opinfo), ("with --generated", both)):
        cats = [f["category"] for f in data["findings"]]
        rows.append(f"| {name} | {seconds.get(name, 0):.0f} | {data['seconds']:.0f} | {data['totals']['cases']} | "
                    f"{len(data['findings'])} | {cats.count('wrong')} | {cats.count('abort')} | {cats.count('unsupported')} |")
    new = {k: f for k, f in root_causes(both).items() if k not in root_causes(opinfo)}
    gone = [k for k in root_causes(opinfo) if k not in root_causes(both)]
    rows += ["", f"{len(new)} root causes only with the generated cases ({len(gone)} only without: a sweep's findings "
             "move with its cases' clustering):", "", "| kernel | category | smallest input | summary |", "|---|---|---|---|"]
    order = {"wrong": 0, "abort": 1, "guarded": 2, "precision loss": 3}
    for (kernel, *_), f in sorted(new.items(), key=lambda kv: (order.get(kv[1]["category"], 9), kv[0][0])):
        rows.append(f"| `{kernel}` | {f['category']} | `{(f.get('inputs') or '')[:80]}` | {f['summary'][:140]} |")
    cov = both.get("generated_coverage")
    if cov:
        rows += ["", f"generated: {cov['cases']} cases over {cov['kernels']} kernels, pairwise coverage "
                 f"{100 * cov['fraction']:.0f}% ({cov['pairs_covered']} of {cov['pairs_required']} pairs), "
                 f"{len(cov['without'])} kernels without"]
    return "\n".join(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", default="bench-generated")
    p.add_argument("--reuse", action="store_true", help="read the reports of an earlier run from --out")
    p.add_argument("--markdown", metavar="PATH")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    times = out / "seconds.json"
    if args.reuse:
        seconds = json.loads(times.read_text()) if times.exists() else {}
    else:
        seconds = {"OpInfo + references": sweep(out, "opinfo", args.jobs, False),
                   "with --generated": sweep(out, "both", args.jobs, True)}
        times.write_text(json.dumps(seconds))
    text = table(json.loads((out / "opinfo.json").read_text()), json.loads((out / "both.json").read_text()), seconds)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
