"""etops.bench_delegate: each delegate of a lowered program timed against the same
subgraph on ExecuTorch's kernels and on ATen. Tiny models and repeat counts; no
assertion on speed."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
import torch

import etops
from etops.bench import delegates
from etops.delegate import ValueSpec

pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "delegate_models.py"
FAST = {"repeats": 3, "warmup": 1, "target": 2e-4, "threads": 1}


class TwoDelegates(torch.nn.Module):
    """linear + relu, a layer norm XNNPACK leaves out, linear + relu: two delegate calls."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.b = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.b(self.norm(torch.relu(self.a(x)))))


@pytest.fixture(scope="module")
def lowered():
    torch.manual_seed(0)
    model = TwoDelegates().eval()
    inputs = (torch.randn(4, 16),)
    return model, delegates.lower(model, inputs), inputs


@pytest.fixture(scope="module")
def result(lowered):
    _, edge, inputs = lowered
    return etops.bench_delegate(edge, inputs, label="two", **FAST)


def _check_measured(row):
    assert row["error"] is None, row
    for side in delegates.SIDES:
        s = row[side]
        assert 0 < s["min"] <= s["median"] and len(s["samples"]) == FAST["repeats"], (side, s)
    for a, b in delegates.RATIOS:
        r = row["ratios"][f"{a}/{b}"]
        assert r["median"] > 0 and r["q1"] <= r["q3"] and r["of_mins"] > 0
    assert row["agree"] == {"delegate": True, "executorch": True}, row["max_abs_diff"]
    assert row["backend"] == "XnnpackBackend"


def test_every_delegate_of_a_program_on_three_sides(result):
    assert [r["name"] for r in result.rows] == ["lowered_module_0", "lowered_module_1"]
    for row in result.rows:
        _check_measured(row)
        assert row["model"] == "two"
        assert row["ops"] == ["linear", "relu"]
        assert row["input"].startswith("captured")
        assert row["executorch_program"] == "original subgraph" and row["side_errors"] == {}
    assert [r["shapes"] for r in result.rows] == ["4x16", "4x8"]
    assert result.threads == {"torch": 1, "executorch": 1}
    assert set(result.ratios()[("two", "lowered_module_1")]) == {"delegate/aten", "executorch/aten", "delegate/executorch"}


def test_captured_inputs_are_what_the_program_passes(lowered):
    model, edge, inputs = lowered
    captured = delegates.capture_inputs(edge, inputs)
    assert len(captured) == 2
    (first,), (second,) = captured.values()
    assert torch.equal(first, inputs[0])
    with torch.no_grad():
        expected = model.norm(torch.relu(model.a(inputs[0])))
    torch.testing.assert_close(second, expected)


def test_renderings(result, tmp_path):
    text = result.text()
    for word in ("delegate / ATen", "ET kernels / ATen", "delegate / ET kernels", "lowered_module_1", "2: linear, relu", "threads: torch 1"):
        assert word in text
    md = result.markdown(title="two")
    assert md.startswith("## two") and "| `two` | lowered_module_0 |" in md and md.count("\n| `two`") == 2
    data = json.loads(result.to_json())
    assert data["rows"][0]["ratios"]["delegate/aten"]["median"] > 0
    assert data["threads"] == {"torch": 1, "executorch": 1}
    assert result.table().row_count == 2
    assert "2 delegate calls: 2 measured, 0 failed" == result.summary()
    assert len(result.ranked()) == 2
    png = result.plot(str(tmp_path / "d.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_one_lowered_module_with_given_or_random_inputs(lowered):
    _, edge, _ = lowered
    second = etops.delegate.lowered_modules(edge)[1]
    given = etops.bench_delegate(second, (torch.randn(4, 8),), **FAST)
    random = etops.bench_delegate(second, **FAST)
    for r, source in ((given, "given"), (random, "random")):
        (row,) = r.rows
        _check_measured(row)
        assert row["input"].startswith(source) and row["model"] == "lowered module"


def test_a_model_is_lowered_and_an_op_without_kernel_falls_back_to_to_edge():
    """XNNPACK keeps aten.max_pool2d whole, which has no ExecuTorch kernel: the
    ExecuTorch side runs the subgraph as to_edge decomposes it (max_pool2d_with_indices)."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2)).eval()
    r = etops.bench_delegate(model, (torch.randn(1, 3, 10, 10),), **FAST)
    (row,) = r.rows
    _check_measured(row)
    assert row["model"] == "Sequential"
    assert row["executorch_program"] == "original subgraph re-exported with to_edge (aten::max_pool2d has no ExecuTorch kernel)"
    assert "max_pool2d" in row["executorch_fallback"]
    assert "re-exported with to_edge" in r.markdown()


def test_spec_inputs_follow_dtype_shape_and_dim_order():
    info = types.SimpleNamespace(name="d", inputs=(
        ValueSpec("x", "Tensor", torch.float32, (2, 3, 4, 5), (0, 2, 3, 1)),
        ValueSpec("i", "Tensor", torch.int64, (3,), (0,)),
        ValueSpec("m", "Tensor", torch.bool, (), ()),
    ))
    x, i, m = delegates.spec_inputs(info, torch.Generator().manual_seed(0))
    assert x.shape == (2, 3, 4, 5) and x.dtype == torch.float32 and x.is_contiguous(memory_format=torch.channels_last)
    assert i.shape == (3,) and i.dtype == torch.int64
    assert m.shape == () and m.dtype == torch.bool
    import sympy

    dynamic = types.SimpleNamespace(name="d", inputs=(ValueSpec("x", "Tensor", torch.float32, (sympy.Symbol("s0"), 4), (0, 1)),))
    with pytest.raises(ValueError, match="dynamic shape"):
        delegates.spec_inputs(dynamic)
    with pytest.raises(ValueError, match="SymInt"):
        delegates.spec_inputs(types.SimpleNamespace(name="d", inputs=(ValueSpec("n", "SymInt"),)))


def test_models_from_spec():
    spec = f"{EXAMPLES}:linear_relu,conv_bn_pool"
    assert [n for n, _ in delegates.models_from_spec(spec)] == ["linear_relu", "conv_bn_pool"]
    assert [n for n, _ in delegates.models_from_spec(str(EXAMPLES))] == ["linear_relu", "conv_bn_pool", "transformer_block"]
    model, inputs = delegates.models_from_spec(f"{EXAMPLES}:linear_relu")[0][1]()
    assert isinstance(model, torch.nn.Module) and isinstance(inputs, tuple)
    with pytest.raises(ValueError, match="has no function 'nope' .*functions: conv_bn_pool, linear_relu, transformer_block"):
        delegates.models_from_spec(f"{EXAMPLES}:nope")
    with pytest.raises(ValueError, match="no file"):
        delegates.models_from_spec("no/such/models.py:f")
    with pytest.raises(ValueError, match="no module"):
        delegates.models_from_spec("no_such_module_here:f")


def test_bad_programs_raise():
    with pytest.raises(ValueError, match="example inputs"):
        etops.bench_delegate(torch.nn.Linear(2, 2))
    ep = torch.export.export(torch.nn.Linear(2, 2), (torch.randn(1, 2),))
    with pytest.raises(ValueError, match="no delegate calls"):
        etops.bench_delegate(ep, (torch.randn(1, 2),))
    with pytest.raises(TypeError):
        etops.bench_delegate(42)
    with pytest.raises(ValueError, match="repeats"):
        etops.bench_delegate(ep, repeats=0)


def test_bench_models_takes_lowered_programs_and_reports_failures(lowered):
    _, edge, inputs = lowered

    def broken():
        raise RuntimeError("no such weights")

    r = delegates.bench_models([("given", lambda: (edge, inputs)), ("broken", broken)], **FAST)
    assert [(row["model"], row["name"]) for row in r.rows] == [("given", "lowered_module_0"), ("given", "lowered_module_1"), ("broken", "-")]
    for row in r.rows[:2]:
        _check_measured(row)
    assert r.rows[2]["error"] == "export and lower: RuntimeError: no such weights"
    assert "export and lower: RuntimeError: no such weights" in r.text()
    assert r.table().row_count == 3
    assert r.summary() == "3 delegate calls: 2 measured, 1 failed"
    with pytest.raises(ValueError, match="returned int"):
        delegates.build("f", lambda: 3)
