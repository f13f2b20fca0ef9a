"""Benchmarks 1 and 2 of issue 3: the cost of one small kernel call.

`op(a, b, out=c)` (etops, aten::add.out on 2x3 float32) against, in the same run
and interleaved:
  * torch.ops.aten.add.out(a, b, out=c)   (torch's dispatcher through the op overload)
  * torch.add(a, b, out=c)                (torch's Python binding)
  * the floor: benchmarks/floor's add_floor(a, b, c), the same ExecuTorch kernel
    called through DLPack's C exchange API with no argument checks at all
  * a one-op .pte (torch.add(x, y)) run with executorch.runtime's Method.execute
  * etops with a Python number for `other`, op(a, 2.0, out=c), against etops with a
    0-dim float32 tensor there, op(a, s, out=c) (issue 14: at most 2x)
  * the allocating calls: etops op(a, b) (no out=: etops allocates the out, in C
    for a signature it met before, through the call memo) against torch.add(a, b)
    (issue 29: at most 1.5x; issue 47: at most 1.2x)
  * etops with a 0-dim tensor for `other` against the same call with a 1-D one,
    op(a, r, out=c) with r of shape (3,) (issue 47: at most 1.3x)

Every candidate runs in its own plain `for` loop (no lambda in between), so the
figures include the loop's own cost (reported as `empty loop`), the same for all.

    python benchmarks/bench_call_overhead.py [--calls 20000] [--repeats 15] [--json PATH]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

import torch  # noqa: E402
import etops  # noqa: E402


def make_pte(tmpdir: str) -> str:
    """Exports torch.add(x, y) on 2x3 float32 to a .pte file and returns its path."""
    from executorch.exir import to_edge

    class Add(torch.nn.Module):
        def forward(self, x, y):
            return torch.add(x, y)

    ex = (torch.ones(2, 3), torch.ones(2, 3))
    program = to_edge(torch.export.export(Add(), ex)).to_executorch()
    path = os.path.join(tmpdir, "add.pte")
    with open(path, "wb") as f:
        f.write(program.buffer)
    return path


def etops_and_floor_loops(op, add_floor, a, b, c):
    """The two loops every etops / floor figure compares: `n` calls of etops'
    op(a, b, out=c) and of the floor's add_floor(a, b, c), each returning its
    nanoseconds (plain loops, no call in between; bench_floor_min.py uses them too)."""
    pc = time.perf_counter_ns

    def etops_loop(n):
        t0 = pc()
        for _ in range(n):
            op(a, b, out=c)
        return pc() - t0

    def floor_loop(n):
        t0 = pc()
        for _ in range(n):
            add_floor(a, b, c)
        return pc() - t0

    return etops_loop, floor_loop


def run(calls: int = 20000, repeats: int = 15, warmup: int = 2) -> dict:
    floor = _common.build_floor()
    from executorch.runtime import Runtime

    reg = etops.registry()
    op = reg.aten.add.out
    a, b = torch.rand(2, 3), torch.rand(2, 3)
    c = torch.empty(2, 3)

    with tempfile.TemporaryDirectory() as tmp:
        method = Runtime.get().load_program(make_pte(tmp)).load_method("forward")

    # Correctness first: every candidate computes a + b.
    want = a + b
    for check in (lambda: op(a, b, out=c), lambda: torch.ops.aten.add.out(a, b, out=c),
                  lambda: torch.add(a, b, out=c), lambda: floor.add_floor(a, b, c)):
        c.zero_()
        check()
        assert torch.equal(c, want), check
    assert torch.equal(method.execute([a, b])[0], want)

    add_out = torch.ops.aten.add.out
    tadd = torch.add
    add_floor = floor.add_floor
    execute = method.execute
    ab = [a, b]
    pc = time.perf_counter_ns
    etops_loop, floor_loop = etops_and_floor_loops(op, add_floor, a, b, c)

    def torch_ops_loop(n):
        t0 = pc()
        for _ in range(n):
            add_out(a, b, out=c)
        return pc() - t0

    def torch_add_loop(n):
        t0 = pc()
        for _ in range(n):
            tadd(a, b, out=c)
        return pc() - t0

    def pte_loop(n):
        t0 = pc()
        for _ in range(n):
            execute(ab)
        return pc() - t0

    two, zero_dim, row = 2.0, torch.tensor(2.0), torch.full((3,), 2.0)
    want2 = a + 2.0
    for other in (two, zero_dim, row):
        c.zero_()
        op(a, other, out=c)
        assert torch.equal(c, want2), other

    def number_loop(n):
        t0 = pc()
        for _ in range(n):
            op(a, two, out=c)
        return pc() - t0

    def zero_dim_loop(n):
        t0 = pc()
        for _ in range(n):
            op(a, zero_dim, out=c)
        return pc() - t0

    def row_loop(n):
        t0 = pc()
        for _ in range(n):
            op(a, row, out=c)
        return pc() - t0

    def etops_alloc_loop(n):
        t0 = pc()
        for _ in range(n):
            op(a, b)
        return pc() - t0

    def torch_alloc_loop(n):
        t0 = pc()
        for _ in range(n):
            tadd(a, b)
        return pc() - t0

    assert torch.equal(op(a, b), want) and torch.equal(op(a, b), want)  # the second through C's allocation

    def empty_loop(n):
        t0 = pc()
        for _ in range(n):
            pass
        return pc() - t0

    candidates = {
        "etops op(a, b, out=c)": etops_loop,
        "torch.ops.aten.add.out": torch_ops_loop,
        "torch.add(out=)": torch_add_loop,
        "floor (C, no checks)": floor_loop,
        "pte Method.execute": pte_loop,
        "etops op(a, 2.0, out=c)": number_loop,
        "etops op(a, 0-dim tensor, out=c)": zero_dim_loop,
        "etops op(a, b) (allocates)": etops_alloc_loop,
        "torch.add(a, b) (allocates)": torch_alloc_loop,
        "etops op(a, 1-D tensor, out=c)": row_loop,
        "empty loop": empty_loop,
    }
    names = list(candidates)
    samples: dict[str, list[float]] = {k: [] for k in names}
    for r in range(warmup + repeats):
        # Interleaved, with the order rotated each repeat so no candidate always goes first.
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            n = calls // 5 if name == "pte Method.execute" else calls
            ns = candidates[name](n) / n
            if r >= warmup:
                samples[name].append(ns / 1000.0)  # microseconds

    stats = {k: _common.summary(v) for k, v in samples.items()}
    m = {k: v["min"] for k, v in stats.items()}
    med = {k: v["median"] for k, v in stats.items()}
    E, O, A, F, P, N, Z, EA, TA, R = names[:10]

    def ratios(x):
        return {
            "etops / torch.ops": x[E] / x[O],
            "etops / torch.add": x[E] / x[A],
            "etops / floor": x[E] / x[F],
            "floor / torch.ops": x[F] / x[O],
            "pte / etops": x[P] / x[E],
            "number / 0-dim tensor": x[N] / x[Z],
            "etops op(a, b) / torch.add(a, b)": x[EA] / x[TA],
            "0-dim tensor / 1-D tensor": x[Z] / x[R],
        }

    goals = {"etops / torch.ops": ("<=", 0.25), "etops / torch.add": ("<=", 0.5),
             "etops / floor": ("<=", 1.4), "pte / etops": (">=", 10.0), "number / 0-dim tensor": ("<=", 2.0),
             "etops op(a, b) / torch.add(a, b)": ("<=", 1.2), "0-dim tensor / 1-D tensor": ("<=", 1.3)}
    # Paired: the ratio within each interleaved repeat (neighbouring samples share the
    # machine's state), then the median over repeats. The most robust of the three on a
    # shared machine; the "met" column uses it.
    import statistics

    per_repeat = [ratios({k: samples[k][r] for k in names}) for r in range(repeats)]
    paired = {k: statistics.median(x[k] for x in per_repeat) for k in per_repeat[0]}
    return {
        "name": "call_overhead",
        "shape": [2, 3], "dtype": "float32",
        "calls_per_sample": calls, "repeats": repeats,
        "us_per_call": stats,
        "ratios_min": ratios(m), "ratios_median": ratios(med), "ratios_paired": paired,
        "goals": goals,
    }


def report(res: dict) -> str:
    lines = ["Benchmarks 1 and 2: aten::add.out on 2x3 float32, us per call "
             f"({res['calls_per_sample']} calls x {res['repeats']} interleaved repeats)", ""]
    lines.append("| candidate | min us | median us |")
    lines.append("|---|---:|---:|")
    for k, v in res["us_per_call"].items():
        lines.append(f"| {k} | {v['min']:.3f} | {v['median']:.3f} |")
    lines += ["", "| ratio | paired median | of mins | of medians | goal | met (paired) |",
              "|---|---:|---:|---:|---|---|"]
    for k, v in res["ratios_min"].items():
        g = res["goals"].get(k)
        med = res["ratios_median"][k]
        pr = res["ratios_paired"][k]
        goal = f"{g[0]} {g[1]}" if g else ""
        met = ("yes" if (pr <= g[1] if g[0] == "<=" else pr >= g[1]) else "NO") if g else ""
        lines.append(f"| {k} | {pr:.3f} | {v:.3f} | {med:.3f} | {goal} | {met} |")
    return "\n".join(lines)


def main():
    _common.standalone_main(__doc__, {"calls": 20000, "repeats": 15}, run, report)


if __name__ == "__main__":
    main()
