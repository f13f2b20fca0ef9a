"""References of ExecuTorch's LLM custom ops (``llama::*``, ``preprocess::*``),
checked when their library is loaded (``etops check --llm-custom-ops`` imports
``executorch.extension.llm.custom_ops.custom_ops``, the module of upstream's
package that loads libcustom_ops_aot_lib.so).

Each kernel is judged against its math (llm_math.py: float64, written from the
definitions) and, as a second witness, against the ATen implementation the same
library registers for torch (``torch.ops.llama.*``: it wraps the same ExecuTorch
function, so alone it cannot disagree with the kernel's math). The inputs are
shaped like the models that use them: decode (one token) and prefill steps,
caches at their start, middle and last position, grouped-query ratios 1, 2, 4
and 8, head dims 64 and 128 (and one off the vector widths), batch 2, every
dtype each kernel takes; invalid calls (a sequence past the cache's end, head
counts that do not divide, mismatched dtypes, indices outside the cache) must
be refused.

``quantized_moe_ffn``'s expert weights are packed by torchao's kernel library
(its own layout of int4 values and scales); without that library no valid input
can be made, so the kernel gets invalid calls only, judged against the op's
contract (llm_math.moe_arguments; docs/llm.md)."""

from __future__ import annotations

import torch

from ...llm_library import LIBRARY
from . import llm_math as m
from .spec import Reference, Sample, invalid, torch_op

_MODULES = (LIBRARY,)  # its .so defines the preprocess ops for torch too
_FLOATS = ("float32", "bfloat16", "float16")
#: (rtol, atol) per dtype against the float64 math rounded once to the dtype
_ATTENTION_TOL = {"float32": (1e-4, 1e-5), "bfloat16": (1.6e-2, 1e-2), "float16": (2e-3, 2e-3)}
_EXACT = {"float32": (0.0, 0.0), "bfloat16": (0.0, 0.0), "float16": (0.0, 0.0)}

#: (batch, query heads, kv heads, seq len, start pos, head dim, cache length):
#: decode at the cache's start, middle and last position; prefill from the start,
#: the middle and up to the end; GQA ratios 1, 2, 4, 8; head dims 64, 128 and 40
ATTENTION_SHAPES = (
    (1, 4, 4, 1, 0, 64, 64), (1, 8, 4, 1, 31, 64, 64), (2, 8, 1, 1, 63, 128, 64),
    (1, 8, 2, 7, 0, 128, 64), (2, 4, 4, 5, 20, 64, 64), (1, 4, 2, 16, 48, 64, 64), (1, 2, 1, 3, 5, 40, 16),
)


def _ref(namespace, name):
    return torch_op(namespace, name, "default", _MODULES)


def _returning_writes(op, writes, placeholder):
    """A witness calling `op` (a torch op writing the arguments at positions
    `writes`) that returns what a Reference with those writes judges."""

    def call(*args, **kwargs):
        result = op(*args, **kwargs)
        written = tuple(args[i] for i in writes)
        return (written[0] if len(written) == 1 else written) if placeholder else (result, *written)

    call.__name__ = op.__name__
    return call


def _attention_inputs(dtype, batch, heads, kv_heads, seq, dim, cache):
    return (torch.randn(batch, seq, heads, dim, dtype=dtype), torch.randn(batch, cache, kv_heads, dim, dtype=dtype),
            torch.randn(batch, cache, kv_heads, dim, dtype=dtype))


def _sdpa_samples(dtype):
    for batch, heads, kv_heads, seq, start, dim, cache in ATTENTION_SHAPES:
        q, k, v = _attention_inputs(dtype, batch, heads, kv_heads, seq, dim, cache)
        yield Sample((q, k, v, start), {"is_causal": True})
    q, k, v = _attention_inputs(dtype, 1, 4, 2, 6, 64, 16)
    yield Sample((q, k, v, 4), {"is_causal": False})  # not causal: every key up to start_pos + seq
    yield Sample((q, k, v, 4), {"is_causal": True, "scale": 0.3})
    mask = torch.randn(6, 16).masked_fill(torch.rand(6, 16) < 0.3, float("-inf"))  # float32 at every dtype (the kernel's contract)
    mask[:, 0] = 0  # every query row sees a key
    yield Sample((q, k, v, 0), {"attn_mask": mask})
    yield invalid("argument 'start_pos': 12 + the query's 6 positions pass the key's 16", q, k, v, 12, is_causal=True)
    yield invalid("argument 'query': 6 heads are not a multiple of the key's 4", torch.randn(1, 2, 6, 64, dtype=dtype),
                  *_attention_inputs(dtype, 1, 4, 4, 2, 64, 16)[1:], 0, is_causal=True)
    other = torch.float64 if dtype != torch.float64 else torch.float32
    yield invalid("argument 'key': its dtype differs from the query's", q, k.to(other), v, 0, is_causal=True)


def _kv_cache_samples(dtype):
    for batch, heads, kv_heads, seq, start, dim, cache in ATTENTION_SHAPES:
        q, k, v = _attention_inputs(dtype, batch, heads, kv_heads, seq, dim, seq)
        caches = [torch.randn(batch, cache, kv_heads, dim, dtype=dtype) for _ in range(2)]
        yield Sample((q, k, v, *caches, start, seq), {"is_causal": True})
    q, k, v = _attention_inputs(dtype, 1, 4, 2, 3, 64, 3)
    caches = [torch.randn(1, 16, 2, 64, dtype=dtype) for _ in range(2)]
    yield invalid("argument 'start_pos': 14 + 3 positions pass the caches' 16", q, k, v, *caches, 14, 3, is_causal=True)


def _quantized_per_token(x):
    """int8 values, int8 zero points and float32 scales of `x`, one per token
    (asymmetric, over the last dim), computed here from the definition."""
    low, high = x.amin(-1, keepdim=True).clamp(max=0), x.amax(-1, keepdim=True).clamp(min=0)
    scale = ((high - low) / 255).clamp(min=1e-6)
    zero = (-128 - torch.round(low / scale)).clamp(-128, 127)
    q = torch.clamp(torch.round(x / scale) + zero, -128, 127)
    return q.to(torch.int8), zero.to(torch.int8), scale.to(torch.float32)


def _quantized_sdpa_samples(dtype):
    for batch, heads, kv_heads, seq, start, dim, cache in ATTENTION_SHAPES[:4] + ((1, 4, 4, 4, 3, 16, 32),):
        parts = [_quantized_per_token(torch.rand(batch, n, h, dim) * 4 - 2) for n, h in ((seq, heads), (cache, kv_heads),
                                                                                      (cache, kv_heads))]
        names = ("q", "k", "v")
        kwargs = {f"{n}_{what}": p[i] for n, p in zip(names, parts) for i, what in ((1, "zero_points"), (2, "scales"))}
        yield Sample((parts[0][0], parts[1][0], parts[2][0], start), {"is_causal": True, **kwargs})
        if seq > 1 and heads == kv_heads * 4:  # the (B, H, S, D) layout
            t = [tuple(x.transpose(1, 2).contiguous() for x in p) for p in parts]
            kw = {f"{n}_{what}": p[i] for n, p in zip(names, t) for i, what in ((1, "zero_points"), (2, "scales"))}
            yield Sample((t[0][0], t[1][0], t[2][0], start), {"is_causal": True, "is_seq_at_dim_2": True, **kw})


def _update_cache_samples(dtype):
    for batch, kv_heads, seq, start, dim in ((1, 4, 1, 0, 64), (2, 2, 5, 30, 128), (1, 1, 1, 63, 64), (2, 8, 16, 48, 64)):
        yield Sample((torch.randn(batch, seq, kv_heads, dim, dtype=dtype), torch.randn(batch, 64, kv_heads, dim, dtype=dtype), start))
    yield invalid("argument 'start_pos': 63 + 2 positions pass the cache's 64", torch.randn(1, 2, 2, 8, dtype=dtype),
                  torch.zeros(1, 64, 2, 8, dtype=dtype), 63)
    other = torch.float64 if dtype != torch.float64 else torch.float32
    yield invalid("argument 'cache': its dtype differs from the value's", torch.randn(1, 2, 2, 8, dtype=dtype),
                  torch.zeros(1, 64, 2, 8, dtype=other), 0)


def _update_cache_indices_samples(dtype):
    for batch, kv_heads, seq, dim in ((1, 4, 1, 64), (2, 2, 5, 128), (2, 8, 16, 64)):
        indices = torch.stack([torch.randperm(64)[:seq] for _ in range(batch)])
        yield Sample((torch.randn(batch, seq, kv_heads, dim, dtype=dtype), torch.randn(batch, 64, kv_heads, dim, dtype=dtype), 0, indices))
    yield invalid("argument 'indices': position 64 is outside the cache's 64", torch.randn(1, 2, 2, 8, dtype=dtype),
                  torch.zeros(1, 64, 2, 8, dtype=dtype), 0, torch.tensor([[3, 64]]))


def _hadamard_samples(dtype):
    for shape in ((16,), (3, 8), (2, 4, 32), (1, 2), (4, 1), (5, 128), (2, 1024)):
        yield Sample((torch.randn(shape).to(dtype),))


def _delta_rule_samples(channelwise: bool):
    def samples(dtype):
        # (batch, heads, state heads, tokens, key dim, value dim): decode, prefill within and across chunks, grouped
        for batch, heads, state_heads, seq, dk, dv in ((1, 2, 2, 1, 4, 4), (2, 2, 2, 3, 4, 6), (1, 4, 2, 5, 8, 4),
                                                       (2, 4, 2, 35, 16, 8), (1, 8, 2, 70, 32, 16)):
            decay_shape = (batch, state_heads, seq) + ((dk,) if channelwise else ())
            yield Sample((torch.randn(batch, heads, seq, dk) / dk ** 0.5, torch.randn(batch, state_heads, seq, dk) / dk ** 0.5,
                          torch.randn(batch, state_heads, seq, dv), 0.5 + 0.5 * torch.rand(decay_shape),
                          torch.sigmoid(torch.randn(batch, state_heads, seq)), torch.randn(batch, state_heads, dk, dv)))
        yield invalid("argument 'query': 3 heads are not a multiple of the key's 2", torch.randn(1, 3, 2, 4), torch.randn(1, 2, 2, 4),
                      torch.randn(1, 2, 2, 4), torch.rand((1, 2, 2) + ((4,) if channelwise else ())), torch.rand(1, 2, 2),
                      torch.randn(1, 2, 4, 4))

    return samples


def _tile_crop_samples(dtype):
    for channels, tiles_h, tiles_w, tile in ((3, 1, 1, 4), (3, 2, 3, 4), (1, 2, 2, 8), (3, 4, 4, 16)):
        yield Sample((torch.randn(channels, tiles_h * tile, tiles_w * tile).to(dtype), tile))
    yield invalid("argument 'tile_size': 5 does not divide the image's 8x8", torch.randn(3, 8, 8).to(dtype), 5)


def _fallback_samples(dtype):
    for shape in ((), (4,), (2, 3), (2, 3, 64)):
        yield Sample((torch.randn(shape).to(dtype),))


def _moe_samples(dtype):
    """Invalid calls only (no valid packed weights without torchao's kernel
    library), against the op's contract (llm_math.moe_arguments)."""
    x, gate, bias, w = torch.randn(2, 32), torch.randn(4, 32), torch.randn(4), torch.zeros(4, 1, dtype=torch.uint8)
    yield invalid("argument 'x' must be 2-D (tokens, dim)", torch.randn(2, 2, 32), gate, bias, w, w, 2, 4, 32, 32, 32, 4, "sigmoid", 1.0)
    yield invalid("argument 'score_func' must be 'softmax' or 'sigmoid'", x, gate, bias, w, w, 2, 4, 32, 32, 32, 4, "relu", 1.0)
    yield invalid("argument 'weight_nbit' must be 4", x, gate, bias, w, w, 2, 4, 32, 32, 32, 3, "sigmoid", 1.0)
    yield invalid("argument 'num_activated_experts' must be at least 1", x, gate, bias, w, w, 0, 4, 32, 32, 32, 4, "sigmoid", 1.0)
    yield invalid("argument 'packed_w13' must be uint8", x, gate, bias, w.float(), w, 2, 4, 32, 32, 32, 4, "sigmoid", 1.0)
    yield invalid("argument 'expert_bias' is only for score_func 'sigmoid'", x, gate, bias, w, w, 2, 4, 32, 32, 32, 4, "softmax", 1.0)
    yield invalid("argument 'packed_w13': 1 byte an expert, fewer than its 2048 int4 values take", x, gate, torch.empty(0), w, w,
                  2, 4, 32, 32, 32, 4, "softmax", 1.0)


def _llm(kernel, reference, witness, samples, dtypes=("float32",), **extra):
    return Reference(kernel, reference, samples, dtypes, library=LIBRARY, witnesses=(witness,) if witness else (), **extra)


_KV_WRITES = {"writes": ("key_cache", "value_cache")}
_CACHE_WRITES = {"writes": ("cache",), "placeholder": True}

REFERENCES = [
    _llm("llama::custom_sdpa.out", m.attention, _ref("llama", "custom_sdpa"), _sdpa_samples, _FLOATS, tolerance=_ATTENTION_TOL),
    _llm("llama::sdpa_with_kv_cache.out", m.attention_with_cache, _returning_writes(_ref("llama", "sdpa_with_kv_cache"), (3, 4), False),
         _kv_cache_samples, _FLOATS, tolerance=_ATTENTION_TOL, **_KV_WRITES),
    _llm("llama::custom_quantized_sdpa.out", m.quantized_attention, _ref("llama", "custom_quantized_sdpa"), _quantized_sdpa_samples,
         tolerance=(1e-4, 1e-5)),
    _llm("llama::update_cache.out", m.write_cache, _returning_writes(_ref("llama", "update_cache"), (1,), True),
         _update_cache_samples, _FLOATS, tolerance=_EXACT, **_CACHE_WRITES),
    _llm("llama::update_cache_with_indices.out", m.write_cache_at, _returning_writes(_ref("llama", "update_cache_with_indices"), (1,), True),
         _update_cache_indices_samples, _FLOATS, tolerance=_EXACT, **_CACHE_WRITES),
    _llm("llama::fast_hadamard_transform.out", m.hadamard, _ref("llama", "fast_hadamard_transform"), _hadamard_samples,
         ("float32", "float16"), tolerance={"float32": (1e-5, 1e-5), "float16": (2e-3, 2e-3)}),
    _llm("llama::gated_delta_rule.out", m.gated_delta_rule, _ref("llama", "gated_delta_rule"), _delta_rule_samples(False), tolerance=(1e-4, 1e-5)),
    _llm("llama::channelwise_gated_delta_rule.out", m.gated_delta_rule, _ref("llama", "channelwise_gated_delta_rule"), _delta_rule_samples(True),
         tolerance=(1e-4, 1e-5)),
    _llm("llama::quantized_moe_ffn.out", m.moe_arguments, None, _moe_samples),
    _llm("llama::fallback.out", m.copy, _ref("llama", "fallback"), _fallback_samples, _FLOATS, tolerance=_EXACT),
    # no ATen witness: torch.ops.preprocess.tile_crop (op_tile_crop_aot.cpp) gives the kernel a float32 out of 4 tiles, so it
    # returns that out unchanged for another dtype or more tiles (docs/findings.md)
    _llm("preprocess::tile_crop.out", m.tile_crop, None, _tile_crop_samples, _FLOATS, tolerance=_EXACT, outs_from_reference=True),
]
