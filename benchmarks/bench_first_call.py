"""What the first call of a new argument signature costs (issue 33).

etops checks a call with torch the first time it meets its argument signature (the
dtypes, ranks and sizes of its tensors and its int arguments: etops' slow path,
torch's meta kernels in Python), then remembers the signature, and the calls after it
take the C path. This times, for `op = etops.registry().aten.add.out` on float32:

  * first:    `op(a, b, out=c)` on a shape no call of `op` used before (one call,
              timed alone), for `--shapes` different shapes;
  * repeated: the same call again on that shape (a loop of `--calls` calls, per call);
  * and the same two for the call without `out=` (`op(a, b)`: etops allocates the
    out, through Python the first time, in C after).

Every shape is new to the kernel object, so each first call is a real first call; the
kernel itself was called before on another shape (its plan and registry lookups are
not part of it). Reported: medians over the shapes, and first - repeated in us. Re-run
it after changing what a first call does (`--json PATH` keeps every sample).

    python benchmarks/bench_first_call.py [--shapes 200] [--calls 200] [--json PATH]
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

import torch  # noqa: E402
import etops  # noqa: E402


def run(shapes: int = 200, calls: int = 200) -> dict:
    op = etops.registry().aten.add.out
    warm = torch.rand(2, 3)
    op(warm, warm, out=torch.empty(2, 3))
    op(warm, warm)
    pc = time.perf_counter_ns
    samples: dict[str, list[float]] = {k: [] for k in ("first out=", "repeated out=", "first alloc", "repeated alloc")}
    for i in range(shapes):
        shape = (3 + i // 40, 5 + i % 40)  # distinct, never (2, 3)
        a, b, c = torch.rand(shape), torch.rand(shape), torch.empty(shape)
        t0 = pc()
        op(a, b, out=c)
        samples["first out="].append((pc() - t0) / 1000)
        t0 = pc()
        for _ in range(calls):
            op(a, b, out=c)
        samples["repeated out="].append((pc() - t0) / calls / 1000)
        assert torch.equal(c, a + b)
        a2, b2 = torch.rand(shape[0], shape[1] + 41), torch.rand(shape[0], shape[1] + 41)  # a signature of its own
        t0 = pc()
        op(a2, b2)
        samples["first alloc"].append((pc() - t0) / 1000)
        t0 = pc()
        for _ in range(calls):
            op(a2, b2)
        samples["repeated alloc"].append((pc() - t0) / calls / 1000)
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "name": "first_call", "dtype": "float32", "shapes": shapes, "calls": calls,
        "us_median": med,
        "us_min": {k: min(v) for k, v in samples.items()},
        "first_minus_repeated_us": {"out=": med["first out="] - med["repeated out="],
                                    "alloc": med["first alloc"] - med["repeated alloc"]},
        "samples_us": samples,
    }


def report(res: dict) -> str:
    m, lo = res["us_median"], res["us_min"]
    lines = [f"First call of a new signature: aten::add.out, float32, {res['shapes']} new shapes, "
             f"repeated calls in loops of {res['calls']}", "",
             "| call | first: median (min) us | repeated: median (min) us | first - repeated | first / repeated |",
             "|---|---:|---:|---:|---:|"]
    for key, label in (("out=", "`op(a, b, out=c)`"), ("alloc", "`op(a, b)` (allocates)")):
        f, r = f"first {key}", f"repeated {key}"
        lines.append(f"| {label} | {m[f]:.1f} ({lo[f]:.1f}) | {m[r]:.3f} ({lo[r]:.3f}) | "
                     f"{m[f] - m[r]:.1f} us | {m[f] / m[r]:.0f}x |")
    return "\n".join(lines)


def main():
    _common.standalone_main(__doc__, {"shapes": 200, "calls": 200}, run, report)


if __name__ == "__main__":
    main()
