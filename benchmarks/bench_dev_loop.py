"""Edit-to-verdict of ``etops dev`` (issues 28, 35): one kernel file edited, then
rebuilt, swapped in, judged as ``etops check`` judges (every call guarded) next to
its base (the file at git HEAD when the file lies in a git checkout, built once and
judged once per process; else the wheel's built-in) and timed against the base at
three sizes, until the verdict is printed.

- cold: a fresh ``etops dev FILE`` process with an empty kernel cache (no
  precompiled prelude either), wall clock from process start to exit;
- warm, watching: ``etops.dev.watch`` in one process, the file edited after each
  round (a comment appended: an edit no kernel call observes); from the write to the
  next round's verdict (includes the watch's polling), with the round's phases and,
  for an LLM kernel file, how its upstream Python tests' statuses were had (replayed);
- warm, new process: ``etops dev FILE`` after an edit, the cache (and precompiled
  prelude) in place, wall clock from process start to exit.

``--estimate-rebuild CHECKOUT`` also compiles a sample of the checkout's portable
kernel files the way its CMake build would (same compiler, -O2, no precompiled
header, one file per compiler process) and extrapolates to all of them on this
machine's cores: the time of rebuilding the portable kernel library, without its
link and the codegen'd registration, which add to it.

    python benchmarks/bench_dev_loop.py [--file KERNEL.cpp] [--rounds 3] [--estimate-rebuild CHECKOUT] [--json out.json]

Without --file, it uses the tests' miniature checkout (tests/dev/inprocess/minicheckout.py),
written into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _edit(path: Path, n: int) -> None:
    with open(path, "a") as f:
        f.write(f"\n// etops bench_dev_loop edit {time.time_ns()} {n}\n")


def _etops_cli() -> list[str]:
    return [sys.executable, "-c", "import sys; from etops.cli import main; sys.exit(main())"]


def run_cli(path: Path, cache: str | None, out_json: Path) -> dict:
    env = dict(os.environ)
    if cache is not None:
        env["ETOPS_CACHE_DIR"] = cache
    t = time.perf_counter()
    proc = subprocess.run(_etops_cli() + ["dev", str(path), "--json", str(out_json)], capture_output=True, text=True,
                          env=env, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t
    data = json.loads(out_json.read_text()) if out_json.exists() else {}
    f = (data.get("files") or [{}])[0]
    return {"wall": wall, "exit": proc.returncode, "phases": f.get("seconds", {}), "compiled": f.get("build", {}).get("compiled"),
            "stdout": proc.stdout[-2000:], "stderr": proc.stderr[-2000:]}


def watch_rounds(path: Path, rounds: int) -> list[dict]:
    import etops

    edited: list[float] = []
    out: list[dict] = []

    def on_round(result):
        now = time.perf_counter()
        f = result.files[0]
        if edited:
            out.append({"edit_to_verdict": now - edited[-1], "exit": result.exit_code, "phases": f.seconds,
                        "compiled": f.build.get("compiled"), "python_replay": (f.python_tests or {}).get("replay"),
                        "python_tests_seconds": (f.python_tests or {}).get("seconds"),
                        "gtest_wall_seconds": (f.gtest or {}).get("wall_seconds")})
        if len(edited) < rounds:
            _edit(path, len(edited))
            edited.append(time.perf_counter())

    last = etops.dev.watch(path, on_round, rounds=rounds + 1, idle_timeout=60)
    last.restore()
    return out


def estimate_rebuild(checkout: Path, sample: int = 6) -> dict:
    """Compiles `sample` portable kernel files of `checkout` one by one (the
    compiler, flags and include paths etops dev uses, without its precompiled
    prelude) and extrapolates to every portable kernel and util source."""
    from etops.custom import toolchain

    tc = toolchain()
    cpu = checkout / "kernels/portable/cpu"
    ops = sorted(cpu.glob("op_*.cpp"))
    utils = sorted((cpu / "util").glob("*.cpp")) + sorted(p for p in cpu.glob("*.cpp") if not p.name.startswith("op_"))
    include_root = checkout.parent if checkout.name == "executorch" else None
    if include_root is None:
        raise SystemExit("--estimate-rebuild: give the checkout folder named executorch")
    step = max(1, len(ops) // sample)
    chosen = ops[::step][:sample]
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        for src in chosen:
            cmd = [tc.cxx, "-std=c++17", "-O2", "-fPIC", *[f"-D{d}" for d in tc.defines], *[f"-isystem{d}" for d in tc.include_dirs],
                   f"-I{include_root}", "-Wno-deprecated-declarations", "-c", str(src), "-o", os.path.join(tmp, "o.o")]
            t = time.perf_counter()
            ok = subprocess.run(cmd, capture_output=True).returncode == 0
            times[src.name] = {"seconds": time.perf_counter() - t, "ok": ok}
    per_file = statistics.mean(v["seconds"] for v in times.values())
    files = len(ops) + len(utils)
    cores = os.cpu_count() or 1
    return {"sampled": times, "mean_seconds_per_file": per_file, "op_files": len(ops), "util_files": len(utils),
            "cores": cores, "estimated_seconds": per_file * files / cores}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--file", help="a kernel file of a checkout (default: the tests' miniature checkout's op_add.cpp)")
    p.add_argument("--rounds", type=int, default=3, help="edits timed in each warm mode (default 3)")
    p.add_argument("--estimate-rebuild", metavar="CHECKOUT", help="also estimate rebuilding the checkout's portable kernels")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--watch-only", action="store_true", help="only the warm, watching rounds (no cold or new-process runs)")
    args = p.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="etops-dev-loop-"))
    try:
        if args.file:
            path = Path(args.file).resolve()
        else:
            sys.path.insert(0, str(HERE.parent / "tests" / "dev" / "inprocess"))
            import minicheckout

            path = minicheckout.write(tmp) / "kernels/portable/cpu/op_add.cpp"
        original = path.read_text()
        try:
            _edit(path, -1)
            cold, warm_cli = {}, []
            if not args.watch_only:
                cold = run_cli(path, str(tmp / "empty-cache"), tmp / "cold.json")
                print(f"cold (new process, empty cache): {cold['wall']:.1f} s, exit {cold['exit']}, phases "
                      + ", ".join(f"{k} {v:.1f}" for k, v in cold["phases"].items()), flush=True)
                run_cli(path, None, tmp / "prime.json")  # the default cache's precompiled prelude exists afterwards
            for n in range(0 if args.watch_only else args.rounds):
                _edit(path, n)
                warm_cli.append(run_cli(path, None, tmp / f"warm{n}.json"))
                print(f"warm, new process: {warm_cli[-1]['wall']:.1f} s (compiled: {warm_cli[-1]['compiled']})", flush=True)
            watched = watch_rounds(path, args.rounds)
            for w in watched:
                print(f"warm, watching: {w['edit_to_verdict']:.1f} s (compiled: {w['compiled']}), phases "
                      + ", ".join(f"{k} {v:.1f}" for k, v in w["phases"].items())
                      + (f"; python tests replayed: {w['python_replay']}" if w.get("python_replay") else ""), flush=True)
        finally:
            path.write_text(original)
        figures = {
            "file": str(path),
            "cold_seconds": cold.get("wall"),
            "cold": cold,
            "warm_new_process_seconds": statistics.median(w["wall"] for w in warm_cli) if warm_cli else None,
            "warm_new_process": warm_cli,
            "warm_watch_seconds": statistics.median(w["edit_to_verdict"] for w in watched),
            "warm_watch": watched,
        }
        if args.estimate_rebuild:
            figures["rebuild_estimate"] = est = estimate_rebuild(Path(args.estimate_rebuild).resolve())
            print(f"rebuilding the portable kernels the usual way (estimate): {est['op_files']} + {est['util_files']} files x "
                  f"{est['mean_seconds_per_file']:.1f} s / {est['cores']} cores = {est['estimated_seconds'] / 60:.1f} min", flush=True)
        from etops.bench import machine

        figures["machine"] = machine()
        print("edit-to-verdict: " + ", ".join(f"{what} {figures[key]:.1f} s" for what, key in (
            ("cold", "cold_seconds"), ("warm (watch)", "warm_watch_seconds"), ("warm (new process)", "warm_new_process_seconds"))
            if figures[key] is not None))
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=1, default=str))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
