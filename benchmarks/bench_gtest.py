"""Wall time of ``etops gtest FILE`` (issue 37): one upstream kernel test file built
against the wheel and run against the registered kernels, in a new process each
time, from process start to exit.

- cold: an empty cache (googletest, etops' glue, the testing utilities and the test
  compiled);
- warm, test edited: googletest's and the testing utilities' objects cached, the
  test file's object and binary not (what an edit of the test costs);
- warm, all cached: nothing to compile (the run and the interpreter).

- the scoreboard (``--scoreboard``): every ``op_*_test.cpp`` of a test folder of the
  checkout (``--folder``: ``kernels/test`` by default, ``kernels/quantized/test``,
  ``kernels/portable/test``) in one ``etops gtest`` process with the cache as it is,
  its wall time, and the per-file table of docs/gtest.md (markdown, from the run's --json).

    python benchmarks/bench_gtest.py CHECKOUT [--file kernels/test/op_add_test.cpp] [--rounds 3] [--json out.json]
    python benchmarks/bench_gtest.py CHECKOUT --scoreboard [--folder kernels/quantized/test] [--json gtest.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(test: Path, cache: Path) -> tuple[float, int, float]:
    """(wall seconds, exit code, CPU seconds of the process and its children: the
    compiler's too; on a shared machine the CPU time is what load does not inflate)."""
    env = dict(os.environ, ETOPS_CACHE_DIR=str(cache))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "etops", "gtest", str(test)], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode == 2:
        sys.exit(f"etops gtest failed to build {test}:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    return seconds, proc.returncode, cpu


def _forget_test(test: Path, cache: Path) -> None:
    """Removes the test file's object and binary from the cache (a new edit of it)."""
    for folder in ("obj", "bin"):
        for p in (cache / "gtest" / folder).glob(f"{test.stem}-*"):
            p.unlink()


def table(data: dict) -> str:
    """The per-file markdown table of an ``etops gtest --json`` result."""
    rows = ["| file | built | passed | failed | skipped | crashed |", "|---|---|---:|---:|---:|---:|"]
    for f in data["files"]:
        name = Path(f["path"]).name
        if not f["built"]:
            rows.append(f"| {name} | no | | | | |")
            continue
        c = f["counts"]
        rows.append(f"| {name} | yes | {c['passed']} | {c['failed']} | {c['skipped']} | {c['crashed']} |")
    return "\n".join(rows)


def scoreboard(checkout: Path, out: str | None, folder: str = "kernels/test") -> None:
    out = out or str(Path(tempfile.gettempdir()) / "etops-gtest-scoreboard.json")
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "etops", "gtest", str(checkout / folder), "--json", out,
                           "--timeout", "120"], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    data = json.loads(Path(out).read_text())
    print(table(data))
    t = data["totals"]
    print(f"\n{t['built']}/{t['files']} files built; {t['passed']} passed, {t['failed']} failed, {t['skipped']} skipped, "
          f"{t['crashed']} crashed; wall {seconds:.0f} s (building {data['build_seconds']:.0f} s), exit {proc.returncode}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkout", type=Path, help="an ExecuTorch checkout")
    ap.add_argument("--file", default="kernels/test/op_add_test.cpp", help="the test file, relative to the checkout")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each warm measurement (median reported)")
    ap.add_argument("--json", help="write the figures (with --scoreboard: etops gtest's JSON) to this file")
    ap.add_argument("--scoreboard", action="store_true", help="every op_*_test.cpp of --folder, and the per-file table")
    ap.add_argument("--folder", default="kernels/test", help="the scoreboard's test folder, relative to the checkout")
    args = ap.parse_args()
    if args.scoreboard:
        scoreboard(args.checkout, args.json, args.folder)
        return
    test = (args.checkout / args.file).resolve()
    with tempfile.TemporaryDirectory(prefix="etops-bench-gtest-") as tmp:
        cache = Path(tmp)
        cold = _run(test, cache)
        edited, cached = [], []
        for _ in range(args.rounds):
            _forget_test(test, cache)
            edited.append(_run(test, cache))
            cached.append(_run(test, cache))
    figures = {
        "file": args.file,
        "exit_code": cold[1],
        "cold": {"wall": round(cold[0], 2), "cpu": round(cold[2], 2)},
        "warm_test_edited": [{"wall": round(w, 2), "cpu": round(c, 2)} for w, _, c in edited],
        "warm_all_cached": [{"wall": round(w, 2), "cpu": round(c, 2)} for w, _, c in cached],
        "load_average": os.getloadavg()[0],
    }

    def show(label: str, runs: list, goal: str) -> None:
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[2] for r in runs)
        print(f"{label:30s} wall {wall:6.1f} s, CPU {cpu:6.1f} s  {goal}")

    show("cold (empty cache)", [cold], "(goal <= 60 s)")
    show("warm, test edited (median)", edited, "(goal <= 10 s)")
    show("warm, all cached (median)", cached, "")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
