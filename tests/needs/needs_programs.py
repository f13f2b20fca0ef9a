"""Programs the needs tests export (each once per module) and the reference they
are checked against: what executorch.runtime does when it loads and runs the .pte."""

from __future__ import annotations

import torch


class Plain(torch.nn.Module):
    """Scalars (alpha), a dtype conversion, a TensorList (cat), a mixed-dtype
    comparison whose compute dtype (int16) no tensor has."""

    def forward(self, x, y, a, b):
        s = torch.add(x, y, alpha=2).sum(dim=0, keepdim=True).to(torch.int64)
        return s, torch.cat([x, y]), torch.lt(a, b)


PLAIN_INPUTS = (torch.ones(2, 3), torch.full((2, 3), 2.0), torch.arange(4, dtype=torch.uint8), torch.full((4,), 2, dtype=torch.int8))


class Dynamic(torch.nn.Module):
    def forward(self, x):
        return (x * 2).reshape(-1, 2)


class Branchy(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos() * 3, (x,))


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x)) + 1


def to_pte(model, inputs, dynamic_shapes=None) -> bytes:
    from executorch.exir import to_edge

    return to_edge(torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)).to_executorch().buffer


def to_xnnpack_pte(model, inputs) -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    lowered = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[XnnpackPartitioner()])
    return lowered.to_executorch().buffer


def load_and_run(pte: bytes, inputs, method: str = "forward"):
    """executorch.runtime's verdict: the outputs, or the exception loading raised."""
    from executorch.runtime import Runtime

    try:
        loaded = Runtime.get().load_program(pte).load_method(method)
    except Exception as exc:  # the runtime's own error for a program it cannot load
        return exc
    return loaded.execute(list(inputs))
