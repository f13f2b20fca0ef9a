"""The first Python kernel of a kernel cache: the CPU seconds of compiling the library
of trampolines (etops.custom.python_kernel.TRAMPOLINES) that every Python kernel
runs through, in a fresh kernel cache, with the prelude precompiled (made first and
waited for) and without it (ETOPS_PCH=0). The compiler's CPU is its user + sys time
(RUSAGE_CHILDREN around the build); wall seconds depend on the machine's load.

    python benchmarks/bench_python_kernel_build.py [--repeats 3] [--before FILE] [--json PATH]

--before FILE: another python_kernel.py (``git show REV:src/etops/custom/python_kernel.py >
FILE``) whose TRAMPOLINES are built alternately with this tree's, each in a cache of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from etops import custom
from etops.custom import python_kernel
from etops.custom.build import Source, build

EMPTY_KERNEL = "Tensor& f_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) { return out; }"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _trampolines_of(path: str) -> str:
    """TRAMPOLINES as python_kernel.py at `path` defines it (its assignment alone run:
    the module's relative imports need the package)."""
    text = Path(path).read_text()
    start = text.index('TRAMPOLINES = r"""')
    end = text.index("\n", text.index('""".replace("ETOPS_SLOTS"', start))
    scope = {"SLOTS": python_kernel.SLOTS}
    exec(text[start:end], scope)  # noqa: S102 - one string assignment
    return scope["TRAMPOLINES"]


def one_build(source: str, precompiled: bool) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of building `source` as the trampolines in a fresh cache."""
    os.environ["ETOPS_PCH"] = "1" if precompiled else "0"
    folder = Path(tempfile.mkdtemp(prefix="etops-bench-trampolines-"))
    custom.set_cache_dir(folder)
    if precompiled:
        build([Source("<empty>", EMPTY_KERNEL)], [])  # starts the prelude's precompile
        while not list(folder.glob("prelude/*/prelude.h.gch")) or list(folder.glob("prelude/*/building")):
            time.sleep(0.1)
        subprocess.run(["true"])  # reaps the precompile's shell: its CPU is counted before
    cpu, wall = _children_cpu(), time.perf_counter()
    build([Source("<etops python trampolines>", source)], [])
    return _children_cpu() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", help="another python_kernel.py, built alternately")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    sources = {"this tree": python_kernel.TRAMPOLINES}
    if args.before:
        sources = {"before": _trampolines_of(args.before), **sources}
    figures: dict = {"load_average": os.getloadavg()[0], "runs": {}}
    print(f"load average {figures['load_average']:.1f}")
    for precompiled in (True, False):
        seen: dict = {name: [] for name in sources}
        for _ in range(args.repeats):
            for name, source in sources.items():
                seen[name].append(one_build(source, precompiled))
        label = "precompiled prelude" if precompiled else "no precompiled prelude"
        for name, runs in seen.items():
            figures["runs"][f"{label}, {name}"] = [{"cpu": c, "wall": w} for c, w in runs]
            cpu = statistics.median(c for c, _ in runs)
            wall = statistics.median(w for _, w in runs)
            print(f"{label:24} {name:10} CPU {cpu:5.2f} s (median of {len(runs)}; min {min(c for c, _ in runs):.2f}), "
                  f"wall {wall:5.2f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
