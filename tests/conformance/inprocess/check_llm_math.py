"""The LLM custom ops (``llama::*``, ``preprocess::*``) judged against their math
(etops.conformance.references.llm_math) with the ATen implementations of their
library as a second witness: the 1.5.1 wheel's kernels pass where they should
and the findings are the known ones; a planted wrong kernel per family is found
by the math while a witness wrapping the same (wrong) function agrees with it. (Run in a fresh interpreter:
loading the library registers its kernels.)"""

from __future__ import annotations

import dataclasses
import importlib

import pytest
import torch

import etops
from etops.conformance import references
from etops.conformance.references import llm, llm_math as m
from etops.conformance.runner import TaskRunner, default_kmap

importlib.import_module(llm.LIBRARY)

KERNELS = ("llama::custom_sdpa.out", "llama::custom_quantized_sdpa.out", "llama::sdpa_with_kv_cache.out", "llama::update_cache.out",
           "llama::update_cache_with_indices.out", "llama::fast_hadamard_transform.out", "llama::gated_delta_rule.out",
           "llama::channelwise_gated_delta_rule.out", "llama::quantized_moe_ffn.out", "llama::fallback.out", "preprocess::tile_crop.out")


def _run(ref, dtype):
    """The TaskResult of `ref`'s samples at `dtype` and every case of it (passing ones too)."""
    references.add(ref)
    result = TaskRunner(default_kmap(), [ref.kernel], keep_cases=True).run(ref.task_id, getattr(torch, dtype))
    return result, list(result.every_case.values())


def _statuses(cases, judge=None):
    out: dict = {}
    for c in cases:
        if judge is None or c.aten_op.split("::")[1].split(".")[0] == judge:
            out[c.status] = out.get(c.status, 0) + 1
    return out


def test_every_llm_kernel_has_a_math_reference_and_cases():
    """Each of the 11 kernels has a reference that is not the ATen wrapper (for
    quantized_moe_ffn its contract: judged on refusals only) and cases at every dtype."""
    refs = references.references()
    for kernel in KERNELS:
        ref = refs[kernel]
        assert ref.library == llm.LIBRARY
        assert ref.reference.__module__ == m.__name__, kernel
        for dtype in ref.dtypes:
            assert any(True for _ in ref.samples(getattr(torch, dtype))), (kernel, dtype)
    assert refs["llama::custom_sdpa.out"].dtypes == ("float32", "bfloat16", "float16")
    moe = refs["llama::quantized_moe_ffn.out"]
    assert all(not s.valid for s in moe.samples(torch.float32))


@pytest.mark.parametrize("kernel", [k for k in KERNELS if k != "llama::quantized_moe_ffn.out"])
def test_the_wheels_kernel_against_its_math(kernel):
    """Valid samples pass against the math and against the ATen witness; the
    failures are exactly the 1.5.1 wheel's known findings (docs/findings.md)."""
    ref = references.find(kernel)
    for dtype in ref.dtypes:
        result, cases = _run(ref, dtype)
        assert not result.sample_error and result.samples_failed == 0, (dtype, result.sample_error)
        math = [c for c in cases if c.aten_op.split("::")[1].split(".")[0] == ref.reference.__name__]
        assert math, (kernel, dtype)
        failing = {(c.status, c.sample) for c in cases if c.status != "pass"}
        if kernel == "llama::custom_sdpa.out":  # head counts that do not divide: ET_CHECK, not a refusal
            assert {s for s, _ in failing} == {"abort"} and len(failing) == 1, failing
        elif kernel == "llama::update_cache_with_indices.out":  # an index past the cache: ET_CHECK
            assert {s for s, _ in failing} == {"abort"} and len(failing) == 1, failing
        elif kernel == "llama::fast_hadamard_transform.out" and dtype == "float16":  # fp16 butterflies, 1024 wide
            assert {s for s, _ in failing} <= {"mismatch"}, failing
        else:
            assert not failing, (kernel, dtype, failing)
        if ref.witnesses:
            assert _statuses(cases, ref.reference.__name__).get("pass", 0) > 0


def test_quantized_moe_ffn_refuses_or_aborts():
    """No valid call can be made (torchao's packing): 7 invalid calls, 5 refused,
    2 aborting (an expert bias with softmax scores, packed weights too small)."""
    ref = references.find("llama::quantized_moe_ffn.out")
    with pytest.raises(NotImplementedError, match="torchao"):
        m.moe_arguments(torch.randn(2, 32), torch.randn(4, 32), torch.randn(4), torch.zeros(4, 1024, dtype=torch.uint8),
                        torch.zeros(4, 512, dtype=torch.uint8), 2, 4, 32, 32, 32, 4, "sigmoid", 1.0)
    _, cases = _run(ref, "float32")
    assert sorted(c.status for c in cases) == ["abort"] * 2 + ["pass"] * 5
    assert {c.sample for c in cases if c.status == "abort"} == {5, 6}


# -- planted wrong kernels: (kernel, wrong implementation as a Python kernel, dtype) --


def _late_causal_mask(query, key, value, start_pos, attn_mask=None, drpout_p=0.0, is_causal=False, scale=None, out=None):
    """The causal mask placed one position late (start_pos + 1) where the cache allows it."""
    shift = 1 if attn_mask is None and start_pos + 1 + query.shape[1] <= key.shape[1] else 0
    return m.attention(query, key, value, start_pos + shift, attn_mask, drpout_p, is_causal, scale)


def _gqa_modulo(query, key, value, start_pos, attn_mask=None, drpout_p=0.0, is_causal=False, scale=None, out=None):
    """Query head h reads kv head h % kv_heads instead of h // (heads / kv_heads)."""
    index = [h % key.shape[2] for h in range(query.shape[2])]
    return m.attention(query, key[:, :, index], value[:, :, index], start_pos, attn_mask, drpout_p, is_causal, scale)


def _bf16_rounding(query, key, value, start_pos, attn_mask=None, drpout_p=0.0, is_causal=False, scale=None, out=None):
    """Right in float32; bfloat16 results off by 8 of their ulps at 1 (a bfloat16-only rounding constant bug)."""
    result = m.attention(query, key, value, start_pos, attn_mask, drpout_p, is_causal, scale)
    if result.dtype == torch.bfloat16:
        result = (result.float() * (1 + 2 ** -4)).to(torch.bfloat16)
    return result


def _cache_one_late(value, cache, start_pos, out=None):
    """update_cache writing one position late (clamped at the cache's end)."""
    start = min(start_pos + 1, cache.shape[1] - value.shape[1])
    cache.copy_(m.write_cache(value, cache, start))
    return out


def _indices_ignored(value, cache, start_pos, indices, out=None):
    """update_cache_with_indices writing sequentially from start_pos."""
    cache.copy_(m.write_cache(value, cache, start_pos))
    return out


def _kv_cache_no_write(query, key, value, key_cache, value_cache, start_pos, seq_len, attn_mask=None, drpout_p=0.0,
                       is_causal=False, scale=None, out=None):
    """sdpa_with_kv_cache attending over caches it never wrote."""
    return m.attention(query, key_cache, value_cache, start_pos, attn_mask, drpout_p, is_causal, scale)


def _zero_points_ignored(query, key, value, start_pos, attn_mask=None, drpout_p=0.0, is_causal=False, scale=None, q_zero_points=None,
                         q_scales=None, k_zero_points=None, k_scales=None, v_zero_points=None, v_scales=None, is_seq_at_dim_2=False,
                         out=None):
    """Quantized attention dequantizing without the zero points."""
    zeros = [torch.zeros_like(z) for z in (q_zero_points, k_zero_points, v_zero_points)]
    return m.quantized_attention(query, key, value, start_pos, attn_mask, drpout_p, is_causal, scale, zeros[0], q_scales, zeros[1],
                                 k_scales, zeros[2], v_scales, is_seq_at_dim_2)


def _hadamard_unnormalized(mat, out=None):
    return (m.hadamard(mat).double() * mat.shape[-1] ** 0.5).to(mat.dtype)


def _no_decay(query, key, value, decay, beta, initial_state, out=None, final_state_out=None):
    return m.gated_delta_rule(query, key, value, torch.ones_like(decay), beta, initial_state)


def _tiles_transposed(input, tile_size, out=None):
    tiles = m.tile_crop(input, tile_size)
    return tiles.transpose(-1, -2).contiguous()


def _copy_perturbed(input, output=None):
    return input + 1e-3 if input.numel() else input.clone()


PLANTS = [
    ("llama::custom_sdpa.out", _late_causal_mask, "float32"),
    ("llama::custom_sdpa.out", _gqa_modulo, "float32"),
    ("llama::custom_sdpa.out", _bf16_rounding, "bfloat16"),
    ("llama::sdpa_with_kv_cache.out", _kv_cache_no_write, "float32"),
    ("llama::custom_quantized_sdpa.out", _zero_points_ignored, "float32"),
    ("llama::update_cache.out", _cache_one_late, "float32"),
    ("llama::update_cache_with_indices.out", _indices_ignored, "float32"),
    ("llama::fast_hadamard_transform.out", _hadamard_unnormalized, "float32"),
    ("llama::gated_delta_rule.out", _no_decay, "float32"),
    ("llama::channelwise_gated_delta_rule.out", _no_decay, "float32"),
    ("preprocess::tile_crop.out", _tiles_transposed, "float32"),
    ("llama::fallback.out", _copy_perturbed, "float32"),
]


@pytest.mark.parametrize("kernel,plant,dtype", PLANTS, ids=[f"{k.split('::')[1]}-{p.__name__}" for k, p, _ in PLANTS])
def test_a_planted_kernel_is_found_by_the_math(kernel, plant, dtype):
    """The plant swapped in for the kernel: its math cases mismatch; a witness
    wrapping the same wrong function (as torch.ops.llama.* wraps the kernel's
    own) passes every case, so it alone would miss the plant."""
    ref = references.find(kernel)

    def witness(*args, **kwargs):
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        result = plant(*args, **kwargs)
        if ref.writes:
            names = [a.name for a in etops.get_kernel(kernel)._info._schema.arguments if not a.is_out]
            written = tuple(args[names.index(n)] for n in ref.writes)
            return (written[0] if len(written) == 1 else written) if ref.placeholder else (result, *written)
        return result

    witness.__name__ = "same_function"
    planted_ref = dataclasses.replace(ref, witnesses=(witness,))
    with etops.override(kernel, plant):
        try:
            _, cases = _run(planted_ref, dtype)
        finally:
            references.add(ref)
    valid_math = _statuses([c for c in cases if c.aten_op.split("::")[1].split(".")[0] == ref.reference.__name__])
    assert valid_math.get("mismatch", 0) > 0, valid_math
    assert _statuses(cases, "same_function") == {"pass": _statuses(cases, "same_function").get("pass", 0)}
    assert _statuses(cases, "same_function").get("pass", 0) > 0
