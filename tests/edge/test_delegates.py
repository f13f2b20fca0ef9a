"""edge.run and edge.compare on programs lowered to XNNPACK: delegate calls run their
backend (etops.delegate), bit-identical to the .pte through executorch.runtime; each
delegate call is one row of compare, against its original subgraph on ATen."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn as nn

import etops
import etops.delegate
import etops.edge as edge
from edge_helpers import Lowered, bit_identical

pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner")

from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner  # noqa: E402

from etops.edge._run import AtenExecutor, ExecuTorchExecutor, interpret, placeholder_values, user_outputs  # noqa: E402

if not any(b.name == "XnnpackBackend" and b.available for b in etops.backends()):
    pytest.skip("the XNNPACK backend is not available", allow_module_level=True)

BACKEND = "XnnpackBackend"


class LinearActivation(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(self, x):
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(x))))


class ConvBnPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.avg = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)
        with torch.no_grad():  # non-trivial running statistics: batch norm's folding is exercised
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.fc(self.avg(x).flatten(1))


class PartlyDelegated(nn.Module):
    """cumsum is not XNNPACK's: a kernel node between two delegate calls."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return torch.sigmoid(self.fc2(torch.cumsum(torch.relu(self.fc1(x)), dim=1)))


def _transformer():
    return nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)


MODELS = {
    "linear_activation": lambda: (LinearActivation(), (torch.randn(4, 16),)),
    "conv_bn_pool": lambda: (ConvBnPool(), (torch.randn(2, 3, 16, 16),)),
    "transformer": lambda: (_transformer(), (torch.randn(2, 5, 16),)),
    "partly_delegated": lambda: (PartlyDelegated(), (torch.randn(3, 8),)),
}

_cache: dict = {}


def _lowered(name: str) -> Lowered:
    if name not in _cache:
        torch.manual_seed(0)
        model, inputs = MODELS[name]()
        _cache[name] = Lowered(model, inputs, partitioner=[XnnpackPartitioner()])
    return _cache[name]


@pytest.fixture(scope="module", params=sorted(MODELS))
def lowered(request):
    return _lowered(request.param)


def _calls(lowered):
    return etops.delegate.delegate_calls(lowered.edge.exported_program().graph_module)


def _delegate_inputs(lowered) -> dict:
    """Node name -> the inputs edge.run gave each delegate call."""
    ep = lowered.edge.exported_program()
    captured = {}

    def on_node(node, args, kwargs, value):
        if etops.delegate.is_delegate_call(node):
            captured[node.name] = [a.clone() for a in args[1:]]

    interpret(ep.graph_module, placeholder_values(ep, lowered.inputs, None), ExecuTorchExecutor(), on_node=on_node)
    return captured


# ---- edge.run: the correctness anchor ----------------------------------------------------


def test_programs_are_delegated(lowered):
    calls = _calls(lowered)
    assert calls and all(m.backend_id == BACKEND for _, m, _ in calls)


def test_run_edge_program_matches_pte_bit_for_bit(lowered):
    outs = edge.run(lowered.edge, lowered.inputs, flat=True)
    bit_identical(outs, lowered.pte_outputs)


def test_run_pre_emission_program_matches_pte_bit_for_bit(lowered):
    bit_identical(edge.run(lowered.edge, lowered.inputs, flat=True, stage="executorch"), lowered.pte_outputs)
    bit_identical(edge.run(lowered.executorch, lowered.inputs, flat=True), lowered.pte_outputs)


def test_run_matches_eager_within_tolerance(lowered):
    outs = edge.run(lowered.edge, *lowered.inputs, flat=True)
    assert len(outs) == len(lowered.eager_outputs)
    for a, e in zip(outs, lowered.eager_outputs):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


def test_bit_exactness_is_not_trivial():
    """The anchor means something: on ATen (each delegate call running its original
    subgraph, as executorch_call_delegate does eagerly) the transformer's output
    differs from the .pte's in the last bits; through the backend it does not."""
    lowered = _lowered("transformer")
    ep = lowered.edge.exported_program()
    aten = user_outputs(ep, interpret(ep.graph_module, placeholder_values(ep, lowered.inputs, None), AtenExecutor()))
    torch.testing.assert_close(aten[0], lowered.pte_outputs[0])
    assert not torch.equal(aten[0], lowered.pte_outputs[0])
    assert torch.equal(edge.run(lowered.edge, lowered.inputs, flat=True)[0], lowered.pte_outputs[0])


def test_each_lowered_module_runs_directly(lowered):
    """etops.delegate.load on the inputs edge.run gave each call: within tolerance of
    its original subgraph on ATen, and bit for bit the lowered module's own .pte."""
    from executorch.runtime import Runtime

    inputs = _delegate_inputs(lowered)
    for attr, module, node in _calls(lowered):
        run = etops.delegate.load(module, name=attr)
        args = inputs[node.name]
        outs = run(*args)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        with torch.no_grad():
            expected = run._info.reference(*args)
        torch.testing.assert_close(outs, expected, rtol=1e-5, atol=1e-5)
        buffer = module.buffer()  # executorch.runtime reads it while the method runs: keep it alive
        pte = list(Runtime.get().load_program(buffer).load_method("forward").execute(args))
        del buffer
        bit_identical(outs, pte)


def test_partly_delegated_program_runs_kernels_between_delegates():
    lowered = _lowered("partly_delegated")
    nodes = [n for n in lowered.edge.exported_program().graph.nodes if n.op == "call_function" and n.target.__name__ != "getitem"]
    kinds = ["delegate" if etops.delegate.is_delegate_call(n) else str(n.target.__name__) for n in nodes]
    assert kinds == ["delegate", "aten.cumsum.default", "delegate"]
    report = edge.compare(lowered.edge, lowered.inputs, end_to_end=False)
    assert [r.kernel for r in report] == [f"{BACKEND}::lowered_module_0", "aten::cumsum.out", f"{BACKEND}::lowered_module_1"]
    assert [r.is_delegate for r in report] == [True, False, True]


def test_dynamic_batch_matches_pte_bit_for_bit():
    """Symbolic output shapes: the delegate allocates its outs from the inputs."""
    torch.manual_seed(0)
    batch = torch.export.Dim("batch", min=2, max=8)
    lowered = Lowered(LinearActivation(), (torch.randn(4, 16),), dynamic_shapes=({0: batch},), partitioner=[XnnpackPartitioner()])
    (_, _, node), = _calls(lowered)
    assert not isinstance(node.meta["val"][0].shape[0], int)
    for n in (2, 5, 8):
        x = torch.randn(n, 16)
        pte = list(lowered.method.execute([x]))
        bit_identical(edge.run(lowered.edge, x, flat=True), pte)
        bit_identical(edge.run(lowered.executorch, x, flat=True), pte)


# ---- edge.compare ------------------------------------------------------------------------


def test_compare_reports_one_row_per_delegate_call(lowered):
    report = edge.compare(lowered.edge, lowered.inputs, model=lowered.model)
    assert report.ok, str(report)
    assert report.end_to_end and all(o.ok for o in report.end_to_end), report.summary()
    calls = _calls(lowered)
    rows = report.delegates
    assert [r.node for r in rows] == [node.name for _, _, node in calls]
    kernel_nodes = [n for n in lowered.edge.exported_program().graph.nodes if n.op == "call_function" and not etops.delegate.is_delegate_call(n) and n.target.__name__ != "getitem"]
    assert len(report) == len(calls) + len(kernel_nodes)
    for row, (attr, module, _) in zip(rows, calls):
        assert row.kernel == f"{BACKEND}::{attr}" and row.backend == BACKEND
        inside = [str(n.target.__name__) for n in module.original_module.graph.nodes if n.op == "call_function" and n.target.__name__ != "getitem"]
        assert list(row.ops) == inside
        assert row.op.startswith(f"delegate ({BACKEND}): ") and all(op in row.op for op in inside)
        assert report[row.kernel] is row
    assert f"{len(calls)} delegate call" in report.summary()
    text = str(report)
    assert f"{BACKEND}::lowered_module_0" in text and "kernels and delegates" in text


def test_compare_pre_emission_program():
    lowered = _lowered("partly_delegated")
    report = edge.compare(lowered.edge, lowered.inputs, stage="executorch")
    assert report.stage == "pre-emission" and report.ok, str(report)
    assert [r.kernel for r in report.delegates] == [f"{BACKEND}::lowered_module_0", f"{BACKEND}::lowered_module_1"]


def _with_perturbed_subgraph(lowered, index: int, delta: float = 0.01):
    """A copy of the program whose `index`th lowered module's original subgraph has a
    weight off by `delta`: its backend (the processed blob) no longer computes it."""
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    manager = copy.deepcopy(lowered.edge)
    gm = manager.exported_program().graph_module
    attr, module, node = etops.delegate.delegate_calls(gm)[index]
    original = copy.deepcopy(module.original_module)
    key = next(k for k in original.state_dict if k.endswith("weight"))
    with torch.no_grad():
        original.state_dict[key].add_(delta)  # the copy's own tensor
    assert not torch.equal(original.state_dict[key], module.original_module.state_dict[key])
    setattr(gm, attr, LoweredBackendModule(original, module.backend_id, module.processed_bytes, module.compile_specs, module.named_data_store_output))
    return manager, node.name


def test_compare_finds_a_delegate_that_diverges_from_its_subgraph(tmp_path):
    lowered = _lowered("partly_delegated")
    manager, node_name = _with_perturbed_subgraph(lowered, 1)
    report = edge.compare(manager, lowered.inputs)
    first = report.first_divergence
    assert first is not None and first.node == node_name and first.is_delegate
    assert first.status == "mismatch" and first.kernel == f"{BACKEND}::lowered_module_1"
    assert first.ops == ("aten.linear.default", "aten.sigmoid.default")
    assert first.max_abs > 1e-3 and first.mismatched > 0 and math.isfinite(first.snr)
    assert "torch.sigmoid(self.fc2(" in (first.source or "")
    assert [r.node for r in report.divergences] == [node_name]  # the delegate before it and the kernel agree
    assert not all(o.ok for o in report.end_to_end)
    text = str(report)
    assert "first divergence" in text and "MISMATCH" in text and f"{BACKEND}::lowered_module_1" in text
    md = report.to_markdown()
    assert "**MISMATCH**" in md and "`delegate (XnnpackBackend): aten.linear.default, aten.sigmoid.default`" in md
    png = tmp_path / "errors.png"
    report.plot(png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<CompareReport: 1 kernel node and 2 delegate calls, 1 diverging>" == repr(report)
    assert edge.compare(lowered.edge, lowered.inputs).ok  # the program itself is untouched


def test_reproducer_of_a_delegate_rebuilds_the_lowered_module(tmp_path):
    """The script embeds the lowered module (original subgraph, processed blob, compile
    specs, named data) and the inputs: run alone, it shows the divergence."""
    lowered = _lowered("partly_delegated")
    manager, _ = _with_perturbed_subgraph(lowered, 1)
    source = open(edge.compare(manager, lowered.inputs).first_divergence.write_reproducer(tmp_path / "repro.py")).read()
    assert "etops.delegate.load(lowered" in source and "LoweredBackendModule(" in source
    with pytest.raises(AssertionError, match="not close"):
        exec(compile(source, "repro.py", "exec"), {"__name__": "__main__"})
    # the same delegate of the unperturbed program, compared with zero tolerance
    strict = edge.compare(lowered.edge, lowered.inputs, rtol=0, atol=0, end_to_end=False)
    rows = [r for r in strict.delegates if r.status == "mismatch"]
    assert rows  # XNNPACK rounds differently from ATen: the script passes at a float32 tolerance
    source = rows[0].reproducer()
    assert "rtol=0, atol=0" in source
    exec(compile(source.replace("rtol=0, atol=0", "rtol=1e-05, atol=1e-05"), "repro.py", "exec"), {"__name__": "__main__"})


def test_compare_reports_a_delegate_whose_backend_is_missing(monkeypatch):
    """A lowered module for a backend this process does not have: edge.run raises
    DelegateError naming it; compare makes it an error row and goes on."""
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    lowered = _lowered("partly_delegated")
    manager = copy.deepcopy(lowered.edge)
    gm = manager.exported_program().graph_module
    attr, module, node = etops.delegate.delegate_calls(gm)[0]
    setattr(gm, attr, LoweredBackendModule(module.original_module, "NoSuchBackend", module.processed_bytes, module.compile_specs, module.named_data_store_output))
    with pytest.raises(etops.DelegateError, match="NoSuchBackend"):
        edge.run(manager, lowered.inputs)
    report = edge.compare(manager, lowered.inputs)
    first = report.first_divergence
    assert first.node == node.name and first.status == "error" and "DelegateError" in first.message
    assert first.kernel == f"NoSuchBackend::{attr}" and first.op.startswith("delegate (NoSuchBackend): ")
    assert [r.status for r in report] == ["error", "ok", "ok"]  # the rest ran on ATen's values
    assert report.end_to_end_error and "NoSuchBackend" in report.end_to_end_error
    assert "ERROR" in str(report) and "**ERROR**" in report.to_markdown()
    assert "etops.delegate.load(lowered" in first.reproducer()

    def unserializable(lowered, name):
        raise RuntimeError("cannot serialize this subgraph")

    monkeypatch.setattr("etops.edge.reproducer.lowered_payload", unserializable)
    source = first.reproducer()  # a script that says so, not a crash
    assert "cannot be reproduced standalone" in source and "cannot serialize this subgraph" in source
    with pytest.raises(SystemExit, match="cannot be reproduced standalone"):
        exec(compile(source, "repro.py", "exec"), {"__name__": "__main__"})


@pytest.mark.skipif(not hasattr(etops, "override"), reason="needs etops.override (custom kernels)")
def test_compare_finds_an_overridden_kernel_between_delegates():
    """A faulty kernel outside the delegates: compare points at it, the delegate calls
    stay within tolerance; edge.run and the .pte both run the override."""
    from executorch.runtime import Runtime

    def bad_cumsum(x, dim, dtype=None, out=None):
        y = torch.cumsum(x, dim)
        y[..., 0] += 0.01  # the planted fault
        return y

    lowered = _lowered("partly_delegated")
    with etops.override("aten::cumsum.out", bad_cumsum):
        report = edge.compare(lowered.edge, lowered.inputs, model=lowered.model)
        outs = edge.run(lowered.edge, lowered.inputs, flat=True)
        pte = list(Runtime.get().load_program(lowered.executorch.buffer).load_method("forward").execute(list(lowered.inputs)))
    first = report.first_divergence
    assert first.kernel == "aten::cumsum.out" and first.status == "mismatch" and not first.is_delegate
    assert first.max_abs == pytest.approx(0.01, rel=1e-3)
    assert [r.node for r in report.divergences] == [first.node]
    assert all(r.ok for r in report.delegates) and len(report.delegates) == 2
    assert not all(o.ok for o in report.end_to_end)
    bit_identical(outs, pte)
    assert not torch.equal(outs[0], lowered.pte_outputs[0])
    assert edge.compare(lowered.edge, lowered.inputs).ok  # restored
