"""Regression tests for kernels that corrupted memory or aborted under adversarial
calls (issue 15): refused before the kernel, naming the argument; correct calls
still run."""

import os
import subprocess
import sys

import pytest
import torch

import etops
from fresh_python import SRC


def test_div_complex_into_float_out_is_refused_naming_out():
    a = torch.ones(4, dtype=torch.complex64)
    b = torch.ones(4, dtype=torch.float32)
    out = torch.empty(4, dtype=torch.float32)
    with pytest.raises(TypeError, match="'out'"):
        etops.registry().aten.div.out(a, b, out=out)


def test_div_float_still_runs():
    a = torch.full((4,), 6.0)
    b = torch.full((4,), 2.0)
    out = torch.empty(4)
    etops.registry().aten.div.out(a, b, out=out)
    assert torch.equal(out, torch.full((4,), 3.0))


def test_embedding_float_indices_refused_naming_indices():
    weight = torch.ones(5, 3)
    indices = torch.zeros(2, dtype=torch.float32)
    out = torch.empty(2, 3)
    with pytest.raises(TypeError, match="'indices'"):
        etops.registry().aten.embedding.out(weight, indices, out=out)


def test_embedding_long_indices_still_run():
    weight = torch.arange(15.0).reshape(5, 3)
    indices = torch.tensor([1, 4])
    out = torch.empty(2, 3)
    etops.registry().aten.embedding.out(weight, indices, out=out)
    assert torch.equal(out, weight[indices])


MALLOC_CHECK = "/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"

_TOPK_CHANNELS_LAST = """
import torch, etops
reg = etops.registry()
x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
for dim in (-1, 1, 2):
    values, indices = reg.aten.topk.values(x, 2, dim)
    want = torch.topk(x, 2, dim)
    assert torch.equal(values, want.values), dim
with etops.layout("preserve"):
    values, _ = reg.aten.topk.values(torch.randn(5, 7).t(), 3)
    assert values.shape == (7, 3)
print("TOPK-OK")
"""


@pytest.mark.skipif(not os.path.exists(MALLOC_CHECK), reason="needs libc6's malloc debug library")
@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""), reason="ASan's allocator replaces glibc's malloc checking")
def test_topk_channels_last_input_under_malloc_checking():
    """ExecuTorch's topk computed wrong values on a channels-last input (a layout
    programs give kernels) and freed an invalid pointer; the rules table marks it
    contiguous_only, so every tensor reaches it contiguous, in any layout mode."""
    env = dict(os.environ, LD_PRELOAD=MALLOC_CHECK, GLIBC_TUNABLES="glibc.malloc.check=3")
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", _TOPK_CHANNELS_LAST], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "TOPK-OK" in proc.stdout, proc.stderr[-3000:]


def test_topk_explain_says_its_inputs_are_copied():
    op = etops.registry().aten.topk.values
    text = op.explain(torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last), 2, 1)
    assert "contiguous_only" in text


# Found by the guarded fuzz campaign (make fuzz): run guarded here, so a rule that
# stopped holding shows as KernelCrashed, not as a dead test process.

def test_quantize_per_token_with_scales_not_float64_is_refused_naming_scales():
    q = etops.registry().quantized_decomposed
    x = torch.rand(2, 3)
    with pytest.raises(TypeError, match="'scales'"):
        etops.guard.call(q.quantize_per_token.out, x, torch.ones(2, 1), torch.zeros(2, 1, dtype=torch.int64), -128, 127,
                         torch.int8, out=torch.empty(2, 3, dtype=torch.int8))
    with pytest.raises(TypeError, match="'zero_points'"):
        etops.guard.call(q.quantize_per_channel.out, x, torch.ones(2, dtype=torch.float64), torch.zeros(2, dtype=torch.int32), 0,
                         -128, 127, torch.int8, out=torch.empty(2, 3, dtype=torch.int8))
    out = torch.empty(2, 3, dtype=torch.int8)
    etops.guard.call(q.quantize_per_token.out, x, torch.full((2, 1), 0.01, dtype=torch.float64), torch.zeros(2, 1, dtype=torch.int64),
                     -128, 127, torch.int8, out=out)
    assert torch.equal(out, torch.clamp(torch.round(x / 0.01), -128, 127).to(torch.int8))


def test_choose_qparams_of_an_empty_input_is_refused_naming_input():
    q = etops.registry().quantized_decomposed
    scale, zero_point = torch.empty(1, dtype=torch.float64), torch.empty(1, dtype=torch.int64)
    with pytest.raises(ValueError, match="'input' is empty"):
        etops.guard.call(q.choose_qparams.Tensor_out, torch.rand(0, 0, 1, 0, 0), -128, 127, 0.001, torch.float32,
                         scale_out=scale, zero_point_out=zero_point)
    etops.guard.call(q.choose_qparams.Tensor_out, torch.rand(8), -128, 127, 0.001, torch.float32, scale_out=scale, zero_point_out=zero_point)
    assert scale.item() > 0


def test_max_pool2d_backward_indices_beyond_a_plane_are_refused_naming_indices():
    """Found by the conformance sweep's shrinking (the search died: double free),
    located by etops.guard.call: read past the end of 'grad_input'."""
    op = etops.registry().aten.max_pool2d_with_indices_backward.grad_input
    x = torch.rand(1, 2, 4, 4)
    out, idx = torch.ops.aten.max_pool2d_with_indices(x, [2, 2], [2, 2])
    grad = torch.rand_like(out)
    args = (grad, x, [2, 2], [2, 2], [0, 0], [1, 1], False)
    bad = idx.clone()
    bad[0, 0, 0, 0] = 1000
    with pytest.raises(IndexError, match="'indices' has values in \\[.*, 1000\\], outside \\[0, 16\\)"):
        etops.guard.call(op, *args, bad, grad_input=torch.empty_like(x))
    # zeros: ExecuTorch's kernel adds into grad_input without clearing it first
    # (torch's out= overwrites it), a mismatch the conformance sweep reports
    got = etops.guard.call(op, *args, idx, grad_input=torch.zeros_like(x))
    assert torch.allclose(got, torch.ops.aten.max_pool2d_with_indices_backward(*args, idx))
