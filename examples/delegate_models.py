"""Small models to lower to XNNPACK and time with ``etops bench --delegate``.

Each factory returns ``(model, example_inputs)``; the command exports the model,
lowers it with ``to_edge_transform_and_lower(..., partitioner=[XnnpackPartitioner()])``
and times every delegate of the program three ways: the delegate (XNNPACK), the
same subgraph on ExecuTorch's kernels (etops.edge) and on ATen.

    PYTHONPATH=src .venv/bin/python -m etops bench --delegate examples/delegate_models.py:linear_relu
    PYTHONPATH=src .venv/bin/python -m etops bench --delegate examples/delegate_models.py          # all of MODELS
    PYTHONPATH=src .venv/bin/python examples/delegate_models.py                                   # from Python, 1 thread

A factory may also return an already lowered program (an EdgeProgramManager or
ExportedProgram with delegates) with its example inputs.
"""

from __future__ import annotations

import torch
import torch.nn as nn


class LinearReLU(nn.Module):
    def __init__(self, features: int = 256, hidden: int = 512):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.fc2 = nn.Linear(hidden, features)

    def forward(self, x):
        return torch.relu(self.fc2(torch.relu(self.fc1(x))))


class ConvBNPool(nn.Module):
    def __init__(self, channels: int = 16):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(2 * channels)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        return self.pool(torch.relu(self.bn2(self.conv2(x))))


class TransformerBlock(nn.Module):
    """Pre-norm self-attention and MLP, written with plain ops (what XNNPACK takes)."""

    def __init__(self, dim: int = 64, heads: int = 4, mlp: int = 4):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp * dim)
        self.fc2 = nn.Linear(mlp * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q = q.reshape(b, t, h, d // h).transpose(1, 2)
        k = k.reshape(b, t, h, d // h).transpose(1, 2)
        v = v.reshape(b, t, h, d // h).transpose(1, 2)
        att = torch.softmax((q @ k.transpose(-2, -1)) * (d // h) ** -0.5, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm2(x))))


def _init(model: nn.Module) -> nn.Module:
    """Deterministic weights, and batch-norm statistics that are not the identity."""
    torch.manual_seed(0)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return model.eval()


def linear_relu():
    """Two linear layers with ReLU, batch 32 x 256 features (hidden 512)."""
    model = _init(LinearReLU())
    return model, (torch.randn(32, 256),)


def conv_bn_pool():
    """Two conv 3x3 + batch norm + ReLU + max pool stages on 1x3x64x64."""
    model = _init(ConvBNPool())
    return model, (torch.randn(1, 3, 64, 64),)


def transformer_block():
    """One pre-norm transformer block (4 heads, dim 64, MLP 256) on 1x64 tokens."""
    model = _init(TransformerBlock())
    return model, (torch.randn(1, 64, 64),)


#: What ``etops bench --delegate examples/delegate_models.py`` runs (no ``:name``).
MODELS = {"linear_relu": linear_relu, "conv_bn_pool": conv_bn_pool, "transformer_block": transformer_block}


if __name__ == "__main__":
    import etops

    for name, factory in MODELS.items():
        model, inputs = factory()
        # one thread: on a small shared machine ATen's OpenMP loops stall with two
        # (benchmarks/README.md); threads=None keeps torch's count
        print(etops.bench_delegate(model, inputs, label=name, repeats=5, threads=1))
