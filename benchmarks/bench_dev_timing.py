"""How ``etops dev``'s timing reads an unchanged kernel file and a 2x slowdown
planted in it (issue 44, "timing that knows its noise"): ``etops dev FILE`` run
N times on each, alternated (unchanged, plant, unchanged, ...) so that both meet
the same load; per run and size, the verdict, the median ratio edit / base, its
interval (etops.dev.timing.interval), the rounds, the exit code with
``--max-slowdown`` on the plant; the load average (1 min) before each run.

The plant does the kernel's work twice:

- default: the tests' miniature checkout (tests/dev/inprocess/minicheckout.py),
  committed in a temporary git repository, ``op_mul.cpp`` with its loop run twice
  (minicheckout.SLOWDOWN, the plant of check_gate.py's gate test);
- ``--checkout ET``: ``kernels/portable/cpu/op_exp.cpp`` of an ExecuTorch checkout
  (a copy: the plant is written into the file, which must be unmodified, and
  undone afterwards), its ``exp_out`` calling the unary-ufunc helper twice.

Each run is ``etops dev FILE --no-gtest --json OUT`` (the judge runs, so the timing
runs alongside it as a kernel author's run does; ``--no-check``: the timing alone).

``--wall-clock`` reads the one-thread loops off the wall clock, as before the CPU
clock: what the verdict makes of a loaded machine's noise ("too noisy").

    python benchmarks/bench_dev_timing.py [--checkout ET] [--runs 5] [--max-slowdown 1.3] [--no-check] [--wall-clock] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: the upstream plant: op_exp.cpp's one-line definition, and exp_out computing its output twice
EXP_FILE = "kernels/portable/cpu/op_exp.cpp"
EXP_TWICE = ("DEFINE_UNARY_UFUNC_REALHBBF16_TO_FLOATHBF16(exp_out, std::exp)",
             "Tensor& exp_out(KernelRuntimeContext& ctx, const Tensor& in, Tensor& out) {\n"
             "  internal::unary_ufunc_realhbbf16_to_floathbf16(std::exp, std::exp, ctx, in, out);\n"
             "  return internal::unary_ufunc_realhbbf16_to_floathbf16(std::exp, std::exp, ctx, in, out);\n"
             "}")


#: ``--wall-clock``: the one-thread timing's "cpu" clock read off the wall clock instead
#: (as before the CPU clock), to see what the verdict makes of the wall clock's noise
WALL_CLOCK = "import time; from etops.bench import core; core.CLOCKS['cpu'] = time.perf_counter_ns; "


def _etops_cli(wall_clock: bool = False) -> list[str]:
    return [sys.executable, "-c", (WALL_CLOCK if wall_clock else "") + "import sys; from etops.cli import main; sys.exit(main())"]


def run_dev(path: Path, out_json: Path, extra: list[str], wall_clock: bool = False) -> dict:
    """One ``etops dev`` run: its exit code, wall seconds, the load before it and
    each timing row's verdict, median ratio, interval and rounds."""
    load = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.run(_etops_cli(wall_clock) + ["dev", str(path), "--no-gtest", "--json", str(out_json), *extra],
                          capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t
    rows = []
    if out_json.exists():
        try:
            from etops.dev.timing import interval
        except ImportError:  # an etops before the interval (a figure "before"): its interquartile range
            def interval(ratio):
                return ratio["q1"], ratio["q3"], None

        for f in json.loads(out_json.read_text())["files"]:
            for r in f["timing"]:
                ratio = r.get("vs_builtin")
                low, high, _ = interval(ratio) if ratio else (None, None, None)
                rows.append({"kernel": r["kernel"], "label": r.get("label"), "verdict": r.get("verdict") or r.get("error"),
                             "median": ratio["median"] if ratio else None, "low": low, "high": high,
                             "rounds": r.get("repeats"), "clock": r.get("clock"), "slowdown_finding": r.get("slowdown_finding")})
        out_json.unlink()
    return {"exit": proc.returncode, "wall": wall, "load": load, "rows": rows,
            "stderr": proc.stderr[-1000:] if proc.returncode not in (0, 1) else ""}


def _line(name: str, run: dict) -> str:
    cells = [f"{r['label']} {r['median']:.2f}x [{r['low']:.2f}-{r['high']:.2f}] {r['verdict']} ({r['rounds']} rounds)"
             if r["median"] is not None else f"{r['label']} {r['verdict']}" for r in run["rows"]]
    return f"{name:9s} load {run['load']:4.1f} exit {run['exit']} {run['wall']:5.1f} s: " + "; ".join(cells)


def summary(runs: list[dict]) -> dict:
    """Per size: the verdicts counted and the medians' range over the runs."""
    out: dict = {}
    for run in runs:
        for r in run["rows"]:
            s = out.setdefault(r["label"], {"verdicts": Counter(), "medians": []})
            s["verdicts"][r["verdict"]] += 1
            if r["median"] is not None:
                s["medians"].append(r["median"])
    return {label: {"verdicts": dict(s["verdicts"]),
                    "median_range": [min(s["medians"]), max(s["medians"])] if s["medians"] else None}
            for label, s in out.items()}


def _setup(args, tmp: Path) -> tuple[Path, tuple[str, str]]:
    if args.checkout:
        path = Path(args.checkout).resolve() / EXP_FILE
        dirty = subprocess.run(["git", "-C", str(path.parent), "status", "--porcelain", "--", path.name],
                               capture_output=True, text=True, check=True).stdout.strip()
        if dirty:
            raise SystemExit(f"--checkout: {path} is modified; the benchmark plants into an unmodified file")
        return path, EXP_TWICE
    sys.path.insert(0, str(HERE.parent / "tests" / "dev" / "inprocess"))
    import minicheckout

    return minicheckout.git_checkout(tmp) / "kernels/portable/cpu/op_mul.cpp", minicheckout.SLOWDOWN


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkout", help="an ExecuTorch checkout (a copy) whose op_exp.cpp gets the plant "
                                      "(default: the tests' miniature checkout's op_mul.cpp)")
    p.add_argument("--runs", type=int, default=5, help="runs of each, unchanged and plant (default 5)")
    p.add_argument("--max-slowdown", type=float, default=1.3, help="--max-slowdown of the plant's runs (default 1.3)")
    p.add_argument("--no-check", action="store_true", help="the timing alone (etops dev --no-check)")
    p.add_argument("--wall-clock", action="store_true", help="the one-thread timing on the wall clock (as before the CPU clock)")
    p.add_argument("--json", help="write the runs and the summary here")
    args = p.parse_args(argv)
    if args.runs < 1:
        raise SystemExit(f"--runs must be at least 1, got {args.runs}")
    tmp = Path(tempfile.mkdtemp(prefix="etops-dev-timing-"))
    extra = ["--no-check"] if args.no_check else ["--dtype", "float32"]
    try:
        path, (old, new) = _setup(args, tmp)
        original = path.read_text()
        if old not in original:
            raise SystemExit(f"{path}: the plant's text {old[:60]!r} is not in the file")
        runs: dict[str, list] = {"unchanged": [], "plant": []}
        try:
            for _ in range(args.runs):
                path.write_text(original)
                runs["unchanged"].append(run_dev(path, tmp / "dev.json", extra, args.wall_clock))
                print(_line("unchanged", runs["unchanged"][-1]), flush=True)
                path.write_text(original.replace(old, new))
                runs["plant"].append(run_dev(path, tmp / "dev.json", [*extra, "--max-slowdown", str(args.max_slowdown)],
                                             args.wall_clock))
                print(_line("plant 2x", runs["plant"][-1]), flush=True)
        finally:
            path.write_text(original)
        figures = {"file": str(path), "runs": runs, "max_slowdown": args.max_slowdown, "wall_clock": args.wall_clock,
                   "summary": {k: summary(v) for k, v in runs.items()},
                   "plant_exit_1": sum(r["exit"] == 1 for r in runs["plant"]),
                   "unchanged_exit_0": sum(r["exit"] == 0 for r in runs["unchanged"])}
        from etops.bench import machine

        figures["machine"] = machine()
        for name, s in figures["summary"].items():
            for label, v in s.items():
                rng = v["median_range"]
                print(f"{name} {label}: {v['verdicts']}" + (f", medians {rng[0]:.2f}-{rng[1]:.2f}x" if rng else ""))
        print(f"plant exit 1 (--max-slowdown {args.max_slowdown}): {figures['plant_exit_1']}/{args.runs}; "
              f"unchanged exit 0: {figures['unchanged_exit_0']}/{args.runs}")
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1, default=str))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
