"""Per-node comparison of a model's edge program: ExecuTorch kernels vs ATen.

    PYTHONPATH=src .venv/bin/python examples/edge_compare.py [--out DIR] [--no-fault]

Exports a small CNN with batch norm and pooling (plus, unless --no-fault, a
log_softmax in float64: a dtype ExecuTorch's kernel refuses, the planted fault),
lowers it with to_edge, runs every node on its ExecuTorch kernel next to ATen,
prints the table, writes it as markdown, plots the error per node (PNG) and
writes a script that reproduces the first divergence.
"""

from __future__ import annotations

import argparse
import pathlib

import torch
import torch.nn as nn
from executorch.exir import to_edge

import etops.edge


class SmallCNN(nn.Module):
    def __init__(self, fault: bool):
        super().__init__()
        self.fault = fault
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        logits = self.head(self.features(x).flatten(1))
        if self.fault:  # ExecuTorch's _log_softmax kernel has no float64
            return torch.log_softmax(logits.double(), dim=-1).float()
        return torch.log_softmax(logits, dim=-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="edge_compare_out", help="folder for the markdown, the PNG and the reproducer")
    parser.add_argument("--no-fault", action="store_true", help="leave out the planted float64 log_softmax")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(0)
    model = SmallCNN(fault=not args.no_fault).eval()
    x = torch.randn(2, 3, 32, 32)
    edge = to_edge(torch.export.export(model, (x,)))

    report = etops.edge.compare(edge, (x,), model=model)
    print(report)

    (out / "report.md").write_text(report.to_markdown())
    report.plot(out / "errors.png")
    print(f"\nwrote {out / 'report.md'} and {out / 'errors.png'}")
    first = report.first_divergence
    if first is not None:
        first.write_reproducer(out / "reproduce_first_divergence.py")
        print(f"wrote {out / 'reproduce_first_divergence.py'} (run it to see node {first.node} fail alone)")
    else:
        outs = etops.edge.run(edge, (x,))
        print("\nno divergence; edge.run output:", tuple(outs.shape))


if __name__ == "__main__":
    main()
