"""The cost of calling one XNNPACK delegate from Python, side by side (interleaved,
etops' harness): ``etops.delegate.load(lowered)(x, out=out)``, the same without
``out`` (outs allocated), the program's ``.pte`` through ``executorch.runtime``
(``Method.execute``: the same delegate, input copied in, output returned) and eager
PyTorch. The models are small, so the figures are the per-call overhead.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_delegate_call.py [--repeats 11]
"""

from __future__ import annotations

import argparse
import copy
import statistics

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime

import etops
from etops.bench.core import paired_ratio, time_calls

MODELS = {
    "linear_relu 4x16->8": (lambda: torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU()), (4, 16)),
    "linear_relu 32x256->256": (lambda: torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU()), (32, 256)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args()
    etops.set_num_threads(1)
    torch.set_num_threads(1)
    print("| model | etops, out given | etops, outs allocated | .pte Method.execute | eager | .pte / etops (out given) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, (make, shape) in MODELS.items():
        torch.manual_seed(0)
        model = make().eval()
        x = torch.randn(*shape)
        edge = to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[XnnpackPartitioner()])
        (lowered,) = etops.delegate.lowered_modules(edge)
        run = etops.delegate.load(lowered)
        out = run(x)
        buffer = copy.deepcopy(edge).to_executorch().buffer
        method = Runtime.get().load_program(buffer).load_method("forward")
        assert torch.equal(method.execute([x])[0], out)
        with torch.no_grad():
            samples, _ = time_calls(
                {
                    "out": (run, (x,), {"out": out}),
                    "alloc": (run, (x,), {}),
                    "pte": (method.execute, ([x],), {}),
                    "eager": (model, (x,), {}),
                },
                repeats=args.repeats,
            )
        med = {k: statistics.median(v) * 1e6 for k, v in samples.items()}
        ratio = paired_ratio(samples["pte"], samples["out"])
        print(f"| {label} | {med['out']:.2f} us | {med['alloc']:.2f} us | {med['pte']:.2f} us | {med['eager']:.2f} us | {ratio['median']:.1f}x |")


if __name__ == "__main__":
    main()
