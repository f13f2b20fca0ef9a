"""Delegates from Python: list the backends, run each XNNPACK delegate of a small
transformer block on its own, run the whole program with etops.edge against its
.pte, and compare every delegate call with its original subgraph on ATen.

    PYTHONPATH=src .venv/bin/python examples/delegates.py
"""

from __future__ import annotations

import copy

import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime

import etops


def main() -> None:
    print("backends:", ", ".join(f"{b.name} ({'available' if b.available else 'not available'})" for b in etops.backends()))

    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True).eval()
    x = torch.randn(1, 8, 32)
    edge = to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[XnnpackPartitioner()])

    # Each delegate call on its own: inputs captured from one run of the program
    calls = etops.delegate.delegate_calls(edge.exported_program().graph_module)
    print(f"\n{len(calls)} delegate calls")
    attr, lowered, _ = calls[0]
    run = etops.delegate.load(lowered, name=attr)  # XNNPACK's init, once
    print(run)
    inputs = [torch.randn(*spec.shape) if spec.kind == "Tensor" else 1 for spec in run._info.inputs]
    out = run(*inputs)
    print("direct call vs its subgraph on ATen: max abs diff", (out - run._info.reference(*inputs)[0]).abs().max().item())

    # The whole program: delegates through their backend, the rest on ExecuTorch kernels
    (ours,) = etops.edge.run(edge, x, flat=True)
    buffer = copy.deepcopy(edge).to_executorch().buffer
    (pte,) = Runtime.get().load_program(buffer).load_method("forward").execute([x])
    print("\netops.edge.run vs the .pte:", "bit-identical" if torch.equal(ours, pte) else "DIFFERENT")

    # Each delegate call (one row, its ops inside) and kernel node against ATen
    report = etops.edge.compare(edge, x)
    print()
    print(report)


if __name__ == "__main__":
    main()
