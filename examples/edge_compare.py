"""Per-node comparison of a model's edge program: ExecuTorch kernels vs ATen.

    PYTHONPATH=src .venv/bin/python examples/edge_compare.py [--out DIR] [--fault dtype|override|none]

Exports a small CNN with batch norm and pooling, lowers it with to_edge, runs
every node on its ExecuTorch kernel next to ATen, prints the table, writes it as
markdown, plots the error per node (PNG) and writes a script that reproduces the
first divergence. The planted fault: ``dtype`` (default) adds a log_softmax in
float64, a dtype ExecuTorch's kernel refuses; ``override`` replaces ExecuTorch's
aten::relu.out by a kernel off by 0.01 in one channel (etops.override).
"""

from __future__ import annotations

import argparse
import contextlib
import pathlib

import torch
import torch.nn as nn
from executorch.exir import to_edge

import etops
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
    parser.add_argument("--fault", choices=("dtype", "override", "none"), default="dtype", help="the planted fault")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(0)
    model = SmallCNN(fault=args.fault == "dtype").eval()
    x = torch.randn(2, 3, 32, 32)
    edge = to_edge(torch.export.export(model, (x,)))

    planted = contextlib.nullcontext()
    if args.fault == "override":

        def bad_relu(x, out=None):
            y = torch.relu(x)
            y[:, 0] += 0.01  # off by 0.01 in the first channel
            return y

        planted = etops.override("aten::relu.out", bad_relu)
    with planted:
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
