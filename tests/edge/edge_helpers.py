"""Helpers: models exported once per module (exports are slow): the edge program, the
program right before emission and the .pte's outputs through executorch.runtime."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.utils._pytree as pytree

exir = pytest.importorskip("executorch.exir")

import etops.edge  # noqa: E402


class Lowered:
    """`partitioner`: lowered with ``to_edge_transform_and_lower`` and these
    partitioners (delegates in the graph) instead of ``to_edge``."""

    def __init__(self, model: torch.nn.Module, inputs: tuple, dynamic_shapes=None, partitioner=None):
        from executorch.exir import to_edge, to_edge_transform_and_lower
        from executorch.runtime import Runtime

        self.model = model.eval()
        self.inputs = inputs
        exported = torch.export.export(self.model, inputs, dynamic_shapes=dynamic_shapes)
        self.edge = to_edge(exported) if partitioner is None else to_edge_transform_and_lower(exported, partitioner=list(partitioner))
        # to_executorch() rewrites the manager's programs in place: lower a copy
        self.executorch = copy.deepcopy(self.edge).to_executorch()
        self.method = Runtime.get().load_program(self.executorch.buffer).load_method("forward")
        self.pte_outputs = list(self.method.execute(pytree.tree_leaves(inputs)))
        with torch.no_grad():
            self.eager_outputs = pytree.tree_leaves(self.model(*inputs))


def bit_identical(actual: list, expected: list) -> None:
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == e.dtype and a.shape == e.shape, f"output {i}: {a.dtype}{list(a.shape)} vs {e.dtype}{list(e.shape)}"
        # bit for bit (NaNs included): compare the raw bytes
        assert torch.equal(a.contiguous().view(torch.uint8) if a.dtype != torch.bool else a, e.contiguous().view(torch.uint8) if e.dtype != torch.bool else e), f"output {i} differs from the .pte's"
