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
    """A dynamic batch: the size is read at run time (prim ops without tensors)."""

    def forward(self, x):
        return (x * 2).reshape(x.shape[0] * 2, -1)


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


#: The custom op of the needs tests: a torch op (functional + out variant) whose
#: ExecuTorch kernel etops registers only when a test asks (register_scale_kernel).
SCALE_NAMESPACE = "needs16"

_LIBS: list = []


def define_scale_op():
    """Defines torch op needs16::scale (x -> 3 * x) and its out variant, once per
    process; no ExecuTorch kernel is registered."""
    if _LIBS:
        return
    lib = torch.library.Library(SCALE_NAMESPACE, "DEF")
    lib.define("scale(Tensor x) -> Tensor")
    lib.define("scale.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    lib.impl("scale", lambda x: x * 3, "CompositeExplicitAutograd")
    lib.impl("scale", lambda x: torch.empty_like(x), "Meta")

    def scale_out(x, *, out):
        return out.copy_(x * 3)

    lib.impl("scale.out", scale_out, "CompositeExplicitAutograd")
    _LIBS.append(lib)


class Scaled(torch.nn.Module):
    def forward(self, x):
        return getattr(torch.ops, SCALE_NAMESPACE).scale(x + 1)


SCALED_INPUTS = (torch.arange(6.0).reshape(2, 3),)
