"""Shared helpers of the benchmark scripts: building and importing the floor
extension, summaries, machine facts."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.join(HERE, "build", "floor")
RESULTS = os.path.join(HERE, "results")


def build_floor(verbose: bool = False):
    """Configures and builds benchmarks/floor into benchmarks/build/floor (cmake + ninja),
    then imports it. etops must be imported first (it loads the kernel libraries)."""
    import etops  # noqa: F401  (loads libexecutorch.so and the kernel libraries)

    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")  # the venv's ninja, if any
    out = None if verbose else subprocess.DEVNULL
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        subprocess.run(
            ["cmake", "-S", os.path.join(HERE, "floor"), "-B", BUILD, "-G", "Ninja",
             "-DCMAKE_BUILD_TYPE=Release", f"-DPython_EXECUTABLE={sys.executable}"],
            check=True, stdout=out, env=env)
    subprocess.run(["cmake", "--build", BUILD], check=True, stdout=out, env=env)
    if BUILD not in sys.path:
        sys.path.insert(0, BUILD)
    import _floor

    return _floor


def summary(samples: list[float]) -> dict:
    return {"min": min(samples), "median": statistics.median(samples), "samples": samples}


def ms_table(ms_per_call: dict, digits: int = 3) -> list[str]:
    """A markdown table of `summary()`s in milliseconds, a row per candidate."""
    return ["| candidate | min ms | median ms |", "|---|---:|---:|"] + [
        f"| {name} | {v['min']:.{digits}f} | {v['median']:.{digits}f} |" for name, v in ms_per_call.items()]


def machine() -> dict:
    """etops.bench's machine facts, plus torch's thread count."""
    import torch

    from etops.bench import machine as etops_machine

    return {**etops_machine(), "torch_threads": torch.get_num_threads()}


def standalone_main(doc: str, options: dict, run, report) -> None:
    """The command line of one benchmark script: `options` maps each option name to
    its default (an int), `run(**options)` measures, `report(results)` renders; the
    figures also go to --json PATH when given."""
    import argparse
    import json

    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in options.items():
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    res = run(**{name: getattr(args, name) for name in options})
    res["machine"] = machine()
    print(report(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
