"""edge.run on real models: bit-identical to the .pte (executorch.runtime), within
tolerance of eager PyTorch; compare finds nothing on them."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import etops.edge as edge

from edge_helpers import Lowered, bit_identical


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.avg = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn1(self.conv1(x))))
        x = torch.nn.functional.hardtanh(self.bn2(self.conv2(x)))
        return torch.softmax(self.fc(self.avg(x).flatten(1)), dim=-1)


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(6, 12, num_layers=2, batch_first=True)
        self.head = nn.Linear(12, 3)

    def forward(self, x, h):
        y, h = self.gru(x, h)
        return self.head(y[:, -1]), h


class IndexOps(nn.Module):
    """Integer and index ops: embedding, gather, index, scatter, topk, cumsum,
    comparisons, integer arithmetic."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 5)

    def forward(self, tokens, x):
        e = self.emb(tokens)  # int64 -> float
        values, idx = torch.topk(x, 3, dim=-1)
        picked = torch.gather(x, 1, idx)
        rows = x[torch.tensor([2, 0, 1])]
        counts = torch.cumsum(tokens, dim=1) % 7
        mask = (tokens > 4).to(torch.int32) * 3 - 1
        scattered = torch.zeros(3, 8).scatter_add(1, idx, values)
        sel = torch.index_select(e, 1, torch.tensor([0, 2]))
        return e.sum(1), picked, rows, counts, mask, scattered, sel, idx.argmax(-1)


def _transformer():
    layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
    return layer


MODELS = {
    "cnn": lambda: (SmallCNN(), (torch.randn(2, 3, 16, 16),)),
    "transformer": lambda: (_transformer(), (torch.randn(2, 5, 16),)),
    "gru": lambda: (Recurrent(), (torch.randn(2, 4, 6), torch.randn(2, 2, 12))),
    "index_ops": lambda: (IndexOps(), (torch.randint(0, 20, (3, 4)), torch.randn(3, 8))),
}


def _examples_lstm():
    from executorch.examples.models.lstm.model import LSTMModel

    m = LSTMModel()
    return m.get_eager_model(), m.get_example_inputs()


def _examples_resnet8():
    from executorch.examples.models.mlperf_tiny.resnet8 import ResNet8Model

    m = ResNet8Model()
    return m.get_eager_model(), m.get_example_inputs()


MODELS["examples.lstm"] = _examples_lstm
MODELS["examples.resnet8"] = _examples_resnet8

_cache: dict = {}


@pytest.fixture(scope="module", params=sorted(MODELS))
def lowered(request):
    if request.param not in _cache:
        torch.manual_seed(0)
        model, inputs = MODELS[request.param]()
        _cache[request.param] = Lowered(model, inputs)
    return _cache[request.param]


def test_run_edge_program_matches_pte_bit_for_bit(lowered):
    outs = edge.run(lowered.edge, lowered.inputs, flat=True)
    bit_identical(outs, lowered.pte_outputs)


def test_run_pre_emission_program_matches_pte_bit_for_bit(lowered):
    outs = edge.run(lowered.executorch, lowered.inputs, flat=True)
    bit_identical(outs, lowered.pte_outputs)


def test_run_matches_eager_within_tolerance(lowered):
    outs = edge.run(lowered.edge, lowered.inputs, flat=True)
    assert len(outs) == len(lowered.eager_outputs)
    for a, e in zip(outs, lowered.eager_outputs):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


def test_run_returns_the_models_structure(lowered):
    outs = edge.run(lowered.edge, *lowered.inputs)
    with torch.no_grad():
        eager = lowered.model(*lowered.inputs)
    assert type(outs) is type(eager)
    if isinstance(eager, tuple):
        assert len(outs) == len(eager)


def test_compare_finds_no_divergence(lowered):
    report = edge.compare(lowered.edge, lowered.inputs, model=lowered.model)
    assert len(report) > 0
    assert report.ok, str(report)
    assert report.first_divergence is None
    assert report.end_to_end and all(o.ok for o in report.end_to_end), report.summary()
    kernels = {r.kernel for r in report}
    assert all(k and "::" in k for k in kernels)


def test_model_ops_exercised():
    """The index model does run ExecuTorch's integer and index kernels."""
    if "index_ops" not in _cache:
        torch.manual_seed(0)
        model, inputs = MODELS["index_ops"]()
        _cache["index_ops"] = Lowered(model, inputs)
    report = edge.compare(_cache["index_ops"].edge, _cache["index_ops"].inputs, end_to_end=False)
    kernels = {r.kernel for r in report}
    for k in ("aten::embedding.out", "aten::gather.out", "aten::topk.values", "aten::cumsum.out", "aten::scatter_add.out", "aten::index_select.out"):
        assert k in kernels, (k, sorted(kernels))
