"""Models lowered to XNNPACK once per test module (lowering takes seconds), with the
inputs of each delegate call and the .pte's outputs through executorch.runtime; and
the test backend of test_backend.cpp, built with etops' custom-kernel toolchain."""

from __future__ import annotations

import copy
import ctypes
import math
from pathlib import Path

import pytest
import torch
import torch.utils._pytree as pytree

pytest.importorskip("executorch.exir")

import etops  # noqa: E402
from etops.bench.delegates import capture_inputs  # noqa: E402


class LinearRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 8)

    def forward(self, x):
        return torch.relu(self.linear(x))


class ConvBnPool(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(torch.relu(self.bn(self.conv(x))))


class Attention(torch.nn.Module):
    """Single-head self-attention with an output projection."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(dim, dim) for _ in range(3))
        self.proj = torch.nn.Linear(dim, dim)
        self.scale = 1.0 / math.sqrt(dim)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        weights = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * self.scale, dim=-1)
        return self.proj(torch.bmm(weights, v))


def trained_batch_norm(model: torch.nn.Module) -> torch.nn.Module:
    """Non-trivial running statistics, so batch norm's folding is exercised."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return model


class XnnpackLowered:
    """`model` exported, lowered with XnnpackPartitioner, its .pte run once."""

    def __init__(self, model: torch.nn.Module, inputs: tuple):
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower
        from executorch.runtime import Runtime

        self.model = model.eval()
        self.inputs = inputs
        self.edge = to_edge_transform_and_lower(torch.export.export(self.model, inputs), partitioner=[XnnpackPartitioner()])
        self.calls = etops.delegate.delegate_calls(self.edge.exported_program().graph_module)
        self.executorch = copy.deepcopy(self.edge).to_executorch()
        method = Runtime.get().load_program(self.executorch.buffer).load_method("forward")
        self.pte_outputs = list(method.execute(pytree.tree_leaves(inputs)))
        with torch.no_grad():
            self.eager_outputs = pytree.tree_leaves(self.model(*inputs))
        # node name -> the inputs of each delegate call, from one eager (ATen) run
        captured = capture_inputs(self.edge, inputs)
        self.call_inputs = {node.name: args for node, args in captured.items()}


def bit_identical(actual, expected) -> bool:
    return actual.dtype == expected.dtype and actual.shape == expected.shape and torch.equal(
        actual.contiguous().view(torch.uint8), expected.contiguous().view(torch.uint8)
    )


# ---- the test backend ------------------------------------------------------------------

TEST_BACKEND = "EtopsTestBackend"
_library = None


def build_test_backend() -> ctypes.CDLL:
    """Builds test_backend.cpp (cached) and loads it: EtopsTestBackend registers then."""
    global _library
    if _library is None:
        from etops.custom.build import Source, build

        source = Path(__file__).with_name("test_backend.cpp")
        lib = build([Source(str(source), None, str(source))], [])
        _library = ctypes.CDLL(lib.library_path, mode=ctypes.RTLD_GLOBAL)
        assert _library.etops_test_backend_registered() == 1
    return _library


_details = None


def aot_test_backend():
    """The ahead-of-time half of EtopsTestBackend: preprocess writes "SCALE <s>" and
    stores the bias as named data. to_backend finds the class among BackendDetails'
    subclasses by its name, so it is kept alive here."""
    global _details
    if _details is not None:
        return _details
    from executorch.exir._serialize._named_data_store import NamedDataStore
    from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult

    class EtopsTestBackend(BackendDetails):
        @staticmethod
        def preprocess(edge_program, compile_specs):
            store = NamedDataStore()
            store.add_named_data("bias", torch.tensor([0.5, -0.5], dtype=torch.float32).numpy().tobytes(), alignment=16)
            return PreprocessResult(processed_bytes=b"SCALE 2.0", data_store_output=store.get_named_data_store_output())

    _details = EtopsTestBackend
    return _details


def lower_to_test_backend(offset: float = 0.25, shape=(2, 3)):
    """A LoweredBackendModule of EtopsTestBackend for `x * 2 + offset + bias`, whose
    original subgraph (x * 2) stands for the subgraph it replaced."""
    from executorch.exir import to_edge
    from executorch.exir.backend.backend_api import to_backend
    from executorch.exir.backend.compile_spec_schema import CompileSpec

    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    aot_test_backend()
    edge = to_edge(torch.export.export(Double(), (torch.randn(*shape),)))
    return to_backend(TEST_BACKEND, edge.exported_program(), [CompileSpec("offset", str(offset).encode())])
