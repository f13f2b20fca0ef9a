"""ExecuTorch aborts inside a kernel become etops.KernelAborted (docs/reliability.md),
by construction: no rules-table guard is involved. The custom-kernel side (a kernel
under development tripping its own ET_CHECK, every call path, an abort on another
thread) is tests/custom/inprocess/check_aborts.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

import etops
from etops import ops
from etops.ops import rules_for


def test_float_tensors_given_to_a_quantized_kernel_raise_and_the_next_call_works():
    op = etops.registry().get_kernel("quantized_decomposed::add.out")
    t = torch.randn(2, 3)
    add = etops.registry().aten.add.out
    for _ in range(3):
        with pytest.raises(etops.KernelAborted) as caught:
            op(t, 1.0, 1, 1, 1, t, 1.0, 1, 1, 1, 1.0, 1, 1, 1, out=torch.empty(2, 3))
        error = caught.value
        assert error.op == "quantized_decomposed::add.out" and error.error_name == "Aborted"
        assert "Unhandled dtype" in str(error) and error.site.startswith("op_add.cpp:")
        x = torch.randn(4)
        assert torch.equal(add(x, x, out=torch.empty(4)), x + x)


def test_an_abort_the_optimized_wrapper_catches_is_still_an_abort():
    """The optimized library's boxed wrappers catch the unwinding abort and fail the
    context (Error::Internal); etops still reports it as the abort it was."""
    narrow = etops.as_program("aten::narrow_copy.out")
    with pytest.raises(etops.KernelAborted, match="Dimension out of range"):
        narrow(torch.randn(3, 4), -1, 0, 2, out=torch.empty(3, 2))
    assert torch.equal(narrow(torch.arange(12.0).view(3, 4), 1, 0, 2, out=torch.empty(3, 2)), torch.arange(12.0).view(3, 4)[:, :2])


def test_direct_calls_keep_the_workarounds_the_judge_does_not():
    x = torch.arange(12.0).view(3, 4)
    direct = etops.registry().get_kernel("aten::narrow_copy.out")
    assert torch.equal(direct(x, -1, 1, 2, out=torch.empty(3, 2)), x[:, 1:3])  # normalized to dim 1
    judged = etops.as_program(direct)
    assert judged is etops.as_program("aten::narrow_copy.out") and judged is not direct
    assert judged._info.policy is ops.PROGRAM and direct._info.policy is ops.DIRECT
    with pytest.raises(etops.KernelAborted):
        judged(x, -1, 1, 2, out=torch.empty(3, 2))
    assert "normalizer" in judged._info.workaround(judged._info.bind((x, -1, 1, 2), {}))
    # a guard that names the argument in direct calls is not part of the judge's call
    unfold = etops.registry().get_kernel("aten::unfold_copy.out")
    with pytest.raises(ValueError, match="'self'"):
        unfold(torch.tensor(1.0), 0, 1, 1)
    with pytest.raises(etops.KernelAborted):
        etops.as_program(unfold)(torch.tensor(1.0), 0, 1, 1)


def test_memory_rules_refuse_for_the_judge_and_never_work_around():
    """An entry's safety part keeps what kills the process by a signal or corrupts
    memory away from the kernel for the judge too, by refusing it: a workaround's
    result (no_work's torch-sized outs, contiguous_only's copy) would read as the
    kernel's pass. The direct part does not apply."""
    assert rules_for("aten::max_pool2d_with_indices_backward.grad_input").calls(ops.PROGRAM).guards
    for name in ("aten::topk.values", "aten::_log_softmax.out"):
        judged = rules_for(name).calls(ops.PROGRAM)
        assert not judged.contiguous_only and judged.no_work is None and not judged.normalize and judged.guards
    assert not rules_for("aten::unfold_copy.out").calls(ops.PROGRAM).guards
    empty = torch.empty(0)
    assert etops.get_kernel("aten::_log_softmax.out")(empty, -1, False).shape == (0,)  # direct: worked around
    with pytest.raises(ValueError, match="not called as a program calls it.*divides by the size of an empty"):
        etops.as_program("aten::_log_softmax.out")(empty, -1, False)
    x = torch.randn(1, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    values, _ = etops.get_kernel("aten::topk.values")(x, 2)
    assert torch.equal(values, torch.topk(x, 2).values)  # direct: a contiguous copy
    with pytest.raises(ValueError, match="not called as a program calls it.*not contiguous"):
        etops.as_program("aten::topk.values")(x, 2)
    assert not rules_for("aten::narrow_copy.out").calls(ops.PROGRAM).normalize
    assert rules_for("aten::narrow_copy.out").calls(ops.DIRECT).normalize


def test_check_reports_aborts_as_findings(tmp_path):
    """etops check judges the kernels as a program calls them: the aborts the rules
    table works around in direct calls are findings, one per kernel and check."""
    report = tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "etops", "check", "aten::narrow_copy.out", "aten::unfold_copy.out", "aten::sum.IntList_out",
         "--dtype", "float32", "--no-progress", "--report-only", "--report-dir", str(tmp_path), "--json", str(report)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(report.read_text())
    aborts = [c for c in data["findings"] if c["kind"] == "abort"]
    assert sorted(c["kernel"] for c in aborts) == ["aten::narrow_copy.out", "aten::sum.IntList_out", "aten::unfold_copy.out"], aborts
    for cluster in aborts:
        assert "Dimension out of range" in cluster["summary"], cluster
        assert "etops' direct calls" in cluster["summary"], cluster
        assert cluster["reproducer"], cluster
        repro = subprocess.run([sys.executable, cluster["reproducer"]], capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert repro.returncode == 1 and "KernelAborted" in repro.stderr, repro.stderr[-2000:]
    assert "abort" in result.stdout
