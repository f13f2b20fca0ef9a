"""etops.edge.compare: planted divergences, the report's renderings, the reproducer."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

import etops
import etops.edge as edge
from edge_helpers import Lowered


class DoubleLogSoftmax(nn.Module):
    """The planted fault: log_softmax in float64, a dtype ExecuTorch's
    _log_softmax kernel refuses (ATen computes it)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        scores = torch.log_softmax(h.double(), dim=-1).float()
        return self.fc2(scores).sigmoid()


class ChannelsLastPlusScalar(nn.Module):
    """Fails on ExecuTorch without any planting: a channels-last tensor plus a 0-dim
    constant (the .pte fails the same way)."""

    def forward(self, x):
        return torch.tanh(x) + x.to(memory_format=torch.channels_last) + 1


@pytest.fixture(scope="module")
def planted():
    from executorch.exir import to_edge

    torch.manual_seed(0)
    model = DoubleLogSoftmax().eval()
    x = torch.randn(3, 8)
    return model, (x,), to_edge(torch.export.export(model, (x,)))


def test_compare_finds_the_planted_kernel(planted):
    model, inputs, manager = planted
    report = edge.compare(manager, inputs, model=model)
    first = report.first_divergence
    assert first is not None
    assert first.status == "error"
    assert first.kernel == "aten::_log_softmax.out"
    assert first.op == "aten::_log_softmax"
    assert "_log_softmax.out" in first.message and "KernelError" in first.message
    assert first.dtype == "float64"
    assert "log_softmax" in (first.source or "")
    # the nodes after it still ran on ATen's values: no pile-up
    assert [r.status for r in report].count("error") == 1
    later = [r for r in report if r.index > first.index]
    assert later and all(r.ok for r in later)
    assert report.end_to_end_error and "_log_softmax.out" in report.end_to_end_error
    text = str(report)
    assert "first divergence" in text and "aten::_log_softmax.out" in text and "ERROR" in text


def test_run_raises_at_the_planted_kernel(planted):
    _, inputs, manager = planted
    with pytest.raises(etops.KernelError, match="_log_softmax.out"):
        edge.run(manager, inputs)


def _run_script(source: str):
    exec(compile(source, "reproducer.py", "exec"), {"__name__": "__main__"})


def test_reproducer_reproduces(planted, tmp_path):
    model, inputs, manager = planted
    first = edge.compare(manager, inputs).first_divergence
    script = first.write_reproducer(tmp_path / "repro.py")
    source = open(script).read()
    assert "exir_ops.edge.aten._log_softmax.default" in source
    with pytest.raises(etops.KernelError, match="_log_softmax.out"):
        _run_script(source)  # self-contained: its own imports, the inputs embedded


def test_reproducer_runs_standalone(planted, tmp_path):
    """The script in a fresh interpreter (as a user would run it)."""
    model, inputs, manager = planted
    script = edge.compare(manager, inputs).first_divergence.write_reproducer(tmp_path / "repro.py")
    src = str(__import__("pathlib").Path(etops.__file__).resolve().parent.parent)
    result = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=180, env={**__import__("os").environ, "PYTHONPATH": src})
    assert result.returncode != 0
    assert "KernelError" in result.stderr and "_log_softmax.out" in result.stderr, result.stderr[-3000:]


def test_reproducer_of_a_mismatch_passes_with_default_tolerance():
    """A mismatch found with zero tolerance: the script compares with those."""
    from executorch.exir import to_edge

    torch.manual_seed(0)
    model = nn.Linear(16, 8).eval()
    x = torch.randn(4, 16)
    report = edge.compare(to_edge(torch.export.export(model, (x,))), x, rtol=0, atol=0)
    first = report.first_divergence
    assert first is not None and first.status == "mismatch" and first.kernel == "aten::addmm.out"
    source = first.reproducer()
    assert "rtol=0" in source and "atol=0" in source
    with pytest.raises(AssertionError, match="Tensor-likes are not equal|not close"):
        _run_script(source)
    _run_script(source.replace("rtol=0, atol=0", "rtol=1.3e-06, atol=1e-05"))


def test_compare_flags_mismatches_beyond_tolerance():
    """With zero tolerance, the kernels that round differently from ATen (matmul,
    convolution accumulation order) show as mismatches; bit-exact ones don't."""
    from executorch.exir import to_edge

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 10)).eval()
    x = torch.randn(2, 3, 8, 8)
    manager = to_edge(torch.export.export(model, (x,)))
    strict = edge.compare(manager, x, rtol=0, atol=0)
    default = edge.compare(manager, x)
    assert default.ok
    mismatched = [r for r in strict if r.status == "mismatch"]
    assert mismatched, str(strict)
    for r in mismatched:
        assert r.max_abs > 0 and r.mismatched > 0 and r.inputs is not None
    relu = next(r for r in strict if r.op == "aten::relu")
    assert relu.ok and relu.max_abs == 0 and math.isinf(relu.snr)
    assert strict.first_divergence is mismatched[0]


def test_channels_last_failure_matches_pte():
    from executorch.exir import to_edge
    from executorch.runtime import Runtime

    x = torch.randn(2, 3, 4, 4)
    lowered = None
    with pytest.raises(RuntimeError, match="0x12"):
        lowered = Lowered(ChannelsLastPlusScalar(), (x,))  # the .pte fails: InvalidArgument
    assert lowered is None
    manager = to_edge(torch.export.export(ChannelsLastPlusScalar().eval(), (x,)))
    with pytest.raises(etops.KernelError) as info:
        edge.run(manager, x)
    assert info.value.error_name == "InvalidArgument" and info.value.op == "aten::add.out"
    report = edge.compare(manager, x)
    assert report.first_divergence.kernel == "aten::add.out" and report.first_divergence.status == "error"
    del Runtime


def test_report_renderings(planted, tmp_path):
    model, inputs, manager = planted
    report = edge.compare(manager, inputs, model=model)
    md = report.to_markdown()
    assert "| # | node | op | kernel |" in md and "**ERROR**" in md and "`aten::_log_softmax.out`" in md
    for col in ("node", "op", "kernel", "dtype", "shape", "max abs err", "max rel err", "status"):
        assert col in report.table()
    png = tmp_path / "errors.png"
    fig = report.plot(png)
    assert fig is not None
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report["aten__log_softmax_default"].status == "error"
    assert repr(report).startswith("<CompareReport")


def test_compare_pre_emission_program(planted):
    model, inputs, manager = planted
    report = edge.compare(manager, inputs, stage="executorch")
    assert report.stage == "pre-emission"
    first = report.first_divergence
    assert first.kernel == "aten::_log_softmax.out" and first.op == "aten::_log_softmax.out"
    source = first.reproducer()
    assert "torch.ops.aten._log_softmax.out" in source and "OUTS = ('out',)" in source
    with pytest.raises(etops.KernelError, match="_log_softmax.out"):
        _run_script(source)


def test_progress_bar(planted, capsys):
    """Shown on graphs of more than 300 nodes (forced here on a small one, and
    the threshold checked on its own: exporting a 300-node graph takes seconds)."""
    from etops.edge._run import Progress

    assert Progress(301, "x", None).enabled and not Progress(300, "x", None).enabled
    assert not Progress(5000, "x", False).enabled
    model, inputs, manager = planted
    nodes = sum(1 for n in manager.exported_program().graph.nodes if n.op == "call_function")
    edge.compare(manager, inputs, progress=True)
    err = capsys.readouterr().err
    assert "etops.edge.compare [" in err and f"/{2 * nodes} nodes" in err  # reference run + end-to-end run
    assert f"] {nodes + 4}/{2 * nodes} nodes" in err  # the end-to-end run stopped at the planted kernel (5th node)
    with pytest.raises(etops.KernelError):
        edge.run(manager, inputs, progress=True)
    assert "etops.edge.run [" in capsys.readouterr().err
    with pytest.raises(etops.KernelError):
        edge.run(manager, inputs)
    assert "etops.edge.run" not in capsys.readouterr().err


def _bad_relu(x, out=None):
    y = torch.relu(x)
    y[..., 0] += 0.01  # the planted fault: first column off by 0.01
    return y


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = torch.tanh(self.fc2(h))
        return self.fc3(h)


@pytest.mark.skipif(not hasattr(etops, "override"), reason="needs etops.override (custom kernels)")
def test_compare_finds_an_overridden_faulty_kernel():
    """The planted fault proper: aten::relu.out replaced by a kernel that is off by
    0.01 in one column. compare points at relu; the nodes after it, fed ATen's
    values, stay within tolerance; end to end the error shows; the .pte agrees."""
    from executorch.exir import to_edge
    from executorch.runtime import Runtime

    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(3, 8)
    manager = to_edge(torch.export.export(model, (x,)))
    et = __import__("copy").deepcopy(manager).to_executorch()
    with etops.override("aten::relu.out", _bad_relu):
        report = edge.compare(manager, x, model=model)
        outs = edge.run(manager, x, flat=True)
        pte = list(Runtime.get().load_program(et.buffer).load_method("forward").execute([x]))
    first = report.first_divergence
    assert first.kernel == "aten::relu.out" and first.status == "mismatch"
    assert first.max_abs == pytest.approx(0.01, rel=1e-3) and first.mismatched == 3
    assert "torch.relu(self.fc1(x))" in first.source
    assert [r.node for r in report.divergences] == [first.node]
    assert not all(o.ok for o in report.end_to_end)
    assert torch.equal(outs[0], pte[0])  # the .pte ran the overridden kernel too
    assert edge.compare(manager, x).ok  # restored
