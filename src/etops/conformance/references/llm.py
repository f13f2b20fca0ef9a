"""References of ExecuTorch's LLM custom ops (``llama::*``, ``preprocess::*``),
checked only when their library is loaded (``etops check --llm-custom-ops``
imports ``executorch.extension.llm.custom_ops.custom_ops``, the module of
upstream's package that loads libcustom_ops_aot_lib.so): the ATen implementations
the same library registers for torch (``torch.ops.llama.*``,
``torch.ops.preprocess.*``), on inputs shaped like the models that use them:
attention heads (grouped-query included), KV caches longer than the sequence,
start positions inside the cache, per-token quantized caches, delta-rule
states, image tiles."""

from __future__ import annotations

import torch

from .spec import Reference, Sample, invalid, torch_op

#: the module whose import loads the library (ExecuTorch kernels and torch ops)
LIBRARY = "executorch.extension.llm.custom_ops.custom_ops"
_MODULES = (LIBRARY,)  # its .so defines the preprocess ops for torch too
_B, _D, _MAX = 1, 16, 32  # batch, head dim, cache length


def _ref(namespace, name):
    return torch_op(namespace, name, "default", _MODULES)


def _attention_shapes():
    """(query heads, kv heads, seq len, start pos): decode and prefill steps, GQA."""
    return ((4, 4, 1, 0), (4, 4, 5, 0), (4, 2, 1, 9), (4, 2, 6, 7))


def _sdpa_samples(dtype):
    for heads, kv_heads, seq, start in _attention_shapes():
        q = torch.randn(_B, seq, heads, _D)
        k, v = torch.randn(_B, _MAX, kv_heads, _D), torch.randn(_B, _MAX, kv_heads, _D)
        yield Sample((q, k, v, start), {"is_causal": True})


def _kv_cache_samples(dtype):
    for heads, kv_heads, seq, start in _attention_shapes():
        q = torch.randn(_B, seq, heads, _D)
        k, v = torch.randn(_B, seq, kv_heads, _D), torch.randn(_B, seq, kv_heads, _D)
        caches = torch.randn(_B, _MAX, kv_heads, _D), torch.randn(_B, _MAX, kv_heads, _D)
        yield Sample((q, k, v, *caches, start, seq), {"is_causal": True})


def _quantized_per_token(x):
    from . import quantized  # noqa: F401 - the quantized_decomposed ops for torch

    qd = torch.ops.quantized_decomposed
    scale, zero_point = qd.choose_qparams_per_token_asymmetric.default(x, torch.int8)
    q = qd.quantize_per_token.default(x, scale, zero_point, -128, 127, torch.int8)
    return q, zero_point.to(torch.int8), scale.to(torch.float32)


def _quantized_sdpa_samples(dtype):
    import importlib

    for module in _MODULES[:1] + ("torch.ao.quantization.fx._decomposed",):
        importlib.import_module(module)
    for heads, kv_heads, seq, start in ((4, 4, 1, 0), (4, 4, 4, 3)):
        q, qz, qs = _quantized_per_token(torch.rand(_B, seq, heads, _D) * 4 - 2)
        k, kz, ks = _quantized_per_token(torch.rand(_B, _MAX, kv_heads, _D) * 4 - 2)
        v, vz, vs = _quantized_per_token(torch.rand(_B, _MAX, kv_heads, _D) * 4 - 2)
        yield Sample((q, k, v, start), {"is_causal": True, "q_zero_points": qz, "q_scales": qs, "k_zero_points": kz,
                                        "k_scales": ks, "v_zero_points": vz, "v_scales": vs})


def _update_cache_samples(dtype):
    for kv_heads, seq, start in ((4, 1, 0), (2, 5, 3), (2, 1, _MAX - 1)):
        yield Sample((torch.randn(_B, seq, kv_heads, _D), torch.zeros(_B, _MAX, kv_heads, _D), start))


def _update_cache_indices_samples(dtype):
    for kv_heads, seq in ((4, 1), (2, 5)):
        indices = torch.randperm(_MAX)[:seq].reshape(_B, seq)
        yield Sample((torch.randn(_B, seq, kv_heads, _D), torch.zeros(_B, _MAX, kv_heads, _D), 0, indices))


def _hadamard_samples(dtype):
    for shape in ((16,), (3, 8), (2, 4, 32), (1, 2)):
        yield Sample((torch.randn(shape).to(dtype),))


def _delta_rule_samples(channelwise: bool):
    def samples(dtype):
        for heads, state_heads, seq, dk, dv in ((2, 2, 3, 4, 6), (4, 2, 5, 8, 4), (2, 2, 1, 4, 4)):
            decay_shape = (_B, state_heads, seq) + ((dk,) if channelwise else ())
            yield Sample((torch.randn(_B, heads, seq, dk), torch.randn(_B, state_heads, seq, dk), torch.randn(_B, state_heads, seq, dv),
                          torch.rand(decay_shape), torch.sigmoid(torch.randn(_B, state_heads, seq)),
                          torch.randn(_B, state_heads, dk, dv)))

    return samples


def _tile_crop_samples(dtype):
    for channels, tiles_h, tiles_w, tile in ((3, 1, 1, 4), (3, 2, 3, 4), (1, 2, 2, 8)):
        yield Sample((torch.randn(channels, tiles_h * tile, tiles_w * tile).to(dtype), tile))


def _fallback_samples(dtype):
    for shape in ((), (4,), (2, 3)):
        yield Sample((torch.randn(shape).to(dtype),))


def _moe_samples(dtype):
    """Packed int4 expert weights need torchao's packing (not loadable here); an
    input of the wrong rank is refused by both (the reference checked on meta
    tensors: its CPU implementation is the ExecuTorch kernel, which aborts)."""
    yield invalid("argument 'x' must be 2-D (tokens, dim)", torch.randn(2, 2, 32), torch.randn(4, 32), torch.randn(4),
                  torch.zeros(4, 1, dtype=torch.uint8), torch.zeros(4, 1, dtype=torch.uint8), 2, 4, 32, 32, 32, 4, "softmax", 1.0)


def _llm(kernel, namespace, name, samples, dtypes=("float32",), **extra):
    return Reference(kernel, _ref(namespace, name), samples, dtypes, library=LIBRARY, **extra)


REFERENCES = [
    _llm("llama::custom_sdpa.out", "llama", "custom_sdpa", _sdpa_samples, tolerance=(1e-4, 1e-5)),
    _llm("llama::sdpa_with_kv_cache.out", "llama", "sdpa_with_kv_cache", _kv_cache_samples, tolerance=(1e-4, 1e-5)),
    _llm("llama::custom_quantized_sdpa.out", "llama", "custom_quantized_sdpa", _quantized_sdpa_samples, tolerance=(1e-3, 1e-4)),
    # the result of the update ops is a placeholder out (their work is the cache write): shapes and dtypes only
    _llm("llama::update_cache.out", "llama", "update_cache", _update_cache_samples, compare="metadata"),
    _llm("llama::update_cache_with_indices.out", "llama", "update_cache_with_indices", _update_cache_indices_samples, compare="metadata"),
    _llm("llama::fast_hadamard_transform.out", "llama", "fast_hadamard_transform", _hadamard_samples, tolerance=(1e-4, 1e-5)),
    _llm("llama::gated_delta_rule.out", "llama", "gated_delta_rule", _delta_rule_samples(False), tolerance=(1e-4, 1e-5)),
    _llm("llama::channelwise_gated_delta_rule.out", "llama", "channelwise_gated_delta_rule", _delta_rule_samples(True), tolerance=(1e-4, 1e-5)),
    _llm("llama::quantized_moe_ffn.out", "llama", "quantized_moe_ffn", _moe_samples, refusal_on_meta=True),
    _llm("llama::fallback.out", "llama", "fallback", _fallback_samples),
    _llm("preprocess::tile_crop.out", "preprocess", "tile_crop", _tile_crop_samples, outs_from_reference=True),
]
