"""The math of ExecuTorch's LLM custom ops (``llama::*``, ``preprocess::*``),
written from their definitions in torch, independently of the kernels and of
the ATen implementations their library registers: each function computes in
float64 and returns the kernel's dtype, so a reduced-precision kernel is judged
against exact values rounded once.

- attention: ``softmax(Q·Kᵀ·scale + mask)·V`` per head, grouped-query heads by
  repetition (query head h reads kv head ``h // (heads / kv_heads)``), the
  causal mask placed at ``start_pos`` (query row i sees keys ``0..start_pos+i``),
  or an explicit additive ``attn_mask`` over the keys given;
- the per-token int8 caches dequantized first (``(q - zero_point) · scale``);
- the KV-cache updates as indexed copies;
- the fast Hadamard transform as a product with a Sylvester Hadamard matrix
  scaled by ``1/sqrt(n)`` (an orthonormal transform);
- the gated delta rule as its recurrence over time steps;
- ``tile_crop`` as reshape and permute; ``fallback`` as a copy.

Imports torch only."""

from __future__ import annotations

import math

import torch

_WIDE = torch.float64


def attention(query, key, value, start_pos, attn_mask=None, drpout_p=0.0, is_causal=False, scale=None):
    """``llama::custom_sdpa``: query (B, S, H, D), key/value (B, N, Hkv, D) with
    H a multiple of Hkv. Without `attn_mask` the keys are the first
    ``start_pos + S`` positions (the kernel reads no further), causal or not;
    with one, all N keys and the additive (S, N) mask. Returns (B, S, H, D)."""
    if drpout_p:
        raise ValueError("attention: argument 'drpout_p' must be 0 (the kernels take no dropout)")
    if attn_mask is not None and is_causal:
        raise ValueError("attention: arguments 'attn_mask' and 'is_causal' cannot both be given")
    seq, heads, dim = query.shape[1], query.shape[2], query.shape[3]
    kv_heads = key.shape[2]
    if heads % kv_heads:
        raise ValueError(f"attention: the query's {heads} heads are not a multiple of the key's {kv_heads}")
    keys = key.shape[1] if attn_mask is not None else start_pos + seq
    if start_pos < 0 or keys > key.shape[1]:
        raise ValueError(f"attention: argument 'start_pos' is {start_pos}: start_pos + {seq} passes the {key.shape[1]} cached positions")
    if key.dtype != query.dtype or value.dtype != query.dtype:
        raise TypeError("attention: query, key and value must have one dtype")
    q = query.to(_WIDE).transpose(1, 2)  # B, H, S, D
    group = heads // kv_heads
    k = key[:, :keys].to(_WIDE).transpose(1, 2).repeat_interleave(group, dim=1)
    v = value[:, :keys].to(_WIDE).transpose(1, 2).repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(dim) if scale is None else scale)
    if attn_mask is not None:
        scores = scores + attn_mask.to(_WIDE)
    elif is_causal:
        rows = torch.arange(seq).unsqueeze(1) + start_pos
        scores = scores.masked_fill(torch.arange(keys).unsqueeze(0) > rows, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).to(query.dtype)


def write_cache(value, cache, start_pos):
    """``llama::update_cache``: the cache with positions ``start_pos..start_pos+S``
    (dim 1) replaced by `value`; `cache` itself unchanged."""
    seq = value.shape[1]
    if start_pos < 0 or start_pos + seq > cache.shape[1]:
        raise ValueError(f"write_cache: argument 'start_pos' is {start_pos}: {seq} positions from it pass the cache's {cache.shape[1]}")
    if value.dtype != cache.dtype:
        raise TypeError("write_cache: 'value' and 'cache' must have one dtype")
    out = cache.clone()
    out[:, start_pos:start_pos + seq] = value
    return out


def write_cache_at(value, cache, start_pos, indices):
    """``llama::update_cache_with_indices``: ``cache[b, indices[b, s]] = value[b, s]``
    (`start_pos` unused); `cache` itself unchanged."""
    if indices.shape != value.shape[:2] or indices.dtype != torch.int64:
        raise ValueError("write_cache_at: argument 'indices' must be int64 of the value's (batch, seq) shape")
    if bool(((indices < 0) | (indices >= cache.shape[1])).any()):
        raise IndexError(f"write_cache_at: argument 'indices' has a position outside the cache's {cache.shape[1]}")
    out = cache.clone()
    for b in range(value.shape[0]):
        out[b, indices[b]] = value[b]
    return out


def attention_with_cache(query, key, value, key_cache, value_cache, start_pos, seq_len, attn_mask=None, drpout_p=0.0,
                         is_causal=False, scale=None):
    """``llama::sdpa_with_kv_cache``: key/value written into the caches at
    `start_pos`, then ``attention`` over the caches (the first ``start_pos +
    seq_len`` positions without a mask). Returns (output, key cache, value cache) after the call."""
    if seq_len != query.shape[1] or seq_len != key.shape[1]:
        raise ValueError(f"attention_with_cache: argument 'seq_len' ({seq_len}) must be the query's and key's sequence length")
    k_cache, v_cache = write_cache(key, key_cache, start_pos), write_cache(value, value_cache, start_pos)
    return attention(query, k_cache, v_cache, start_pos, attn_mask, drpout_p, is_causal, scale), k_cache, v_cache


def dequantize_per_token(values, zero_points, scales):
    """int8 `values` (..., D) as float64: ``(values - zero_point) · scale`` with one
    zero point and scale per token (their last dim 1)."""
    return (values.to(_WIDE) - zero_points.to(_WIDE)) * scales.to(_WIDE)


def quantized_attention(query, key, value, start_pos, attn_mask=None, drpout_p=0.0, is_causal=False, scale=None,
                        q_zero_points=None, q_scales=None, k_zero_points=None, k_scales=None, v_zero_points=None,
                        v_scales=None, is_seq_at_dim_2=False):
    """``llama::custom_quantized_sdpa``: attention on the dequantized int8 query
    and caches (float32 result). ``is_seq_at_dim_2``: the tensors are (B, H, S, D)."""
    if any(t is None for t in (q_zero_points, q_scales, k_zero_points, k_scales, v_zero_points, v_scales)):
        raise ValueError("quantized_attention: every zero point and scale must be given")
    parts = [dequantize_per_token(*t) for t in ((query, q_zero_points, q_scales), (key, k_zero_points, k_scales),
                                                 (value, v_zero_points, v_scales))]
    if is_seq_at_dim_2:
        parts = [p.transpose(1, 2) for p in parts]
    out = attention(*parts, start_pos, attn_mask, drpout_p, is_causal, scale)
    return (out.transpose(1, 2) if is_seq_at_dim_2 else out).to(torch.float32)


def sylvester_hadamard(n: int) -> torch.Tensor:
    """The n×n Sylvester Hadamard matrix (n a power of 2), float64 entries ±1."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"sylvester_hadamard: argument 'n' must be a power of 2, got {n}")
    h = torch.ones(1, 1, dtype=_WIDE)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


def hadamard(mat):
    """``llama::fast_hadamard_transform``: each row of the last dim times the
    Sylvester matrix, divided by sqrt(n)."""
    n = mat.shape[-1]
    return (mat.to(_WIDE) @ sylvester_hadamard(n) / math.sqrt(n)).to(mat.dtype)


def gated_delta_rule(query, key, value, decay, beta, initial_state):
    """``llama::gated_delta_rule``: per (batch, state head) the state S (Dk, Dv)
    runs over the tokens t: ``S ← diag(g_t)·S`` (g_t the decay, one per key
    channel, or one scalar per token), ``S ← S + β_t·k_t·(v_t − Sᵀk_t)ᵀ``, and
    query head h reads its state head's ``Sᵀq_t`` (heads grouped by repetition).
    Returns (output (B, H, T, Dv), final state (B, Hs, Dk, Dv))."""
    heads, state_heads = query.shape[1], key.shape[1]
    if heads % state_heads:
        raise ValueError(f"gated_delta_rule: the query's {heads} heads are not a multiple of the key's {state_heads}")
    q, k, v, g, b = (t.to(_WIDE) for t in (query, key, value, decay, beta))
    if g.dim() == 3:  # a scalar decay per token: the same factor on every key channel
        g = g.unsqueeze(-1).expand(*g.shape, k.shape[-1])
    state = initial_state.to(_WIDE).clone()
    steps = []
    for t in range(q.shape[2]):
        state = state * g[:, :, t].unsqueeze(-1)
        predicted = torch.einsum("bhkv,bhk->bhv", state, k[:, :, t])
        correction = (v[:, :, t] - predicted) * b[:, :, t].unsqueeze(-1)
        state = state + torch.einsum("bhk,bhv->bhkv", k[:, :, t], correction)
        read = state.repeat_interleave(heads // state_heads, dim=1)
        steps.append(torch.einsum("bhkv,bhk->bhv", read, q[:, :, t]))
    return torch.stack(steps, dim=2).to(query.dtype), state.to(initial_state.dtype)


def tile_crop(input, tile_size):
    """``preprocess::tile_crop``: a (C, H, W) image cut into (H/t)·(W/t) tiles of
    (C, t, t), row by row."""
    channels, height, width = input.shape
    if tile_size <= 0 or height % tile_size or width % tile_size:
        raise ValueError(f"tile_crop: argument 'tile_size' ({tile_size}) must divide the image's {height}x{width}")
    rows, cols = height // tile_size, width // tile_size
    tiles = input.reshape(channels, rows, tile_size, cols, tile_size).permute(1, 3, 0, 2, 4)
    return tiles.reshape(rows * cols, channels, tile_size, tile_size).clone()


def moe_arguments(x, gate_weight, expert_bias, packed_w13, packed_w2, num_activated_experts, num_experts, hidden_dim, dim,
                  group_size, weight_nbit, score_func, route_scale):
    """``llama::quantized_moe_ffn``'s contract, not its values: raises ValueError
    naming the argument a call breaks (x (tokens, dim) float32, softmax or
    sigmoid scores, an expert bias only with sigmoid, int4 weights packed in uint8
    with at least the bytes their values take). A valid call raises
    NotImplementedError: the weights are packed in torchao's layout, which only its
    kernel library makes, so no value is computed here."""
    if x.dim() != 2 or x.shape[1] != dim or x.dtype != torch.float32:
        raise ValueError("moe_arguments: argument 'x' must be float32 (tokens, dim)")
    if score_func not in ("softmax", "sigmoid"):
        raise ValueError("moe_arguments: argument 'score_func' must be 'softmax' or 'sigmoid'")
    if expert_bias.numel() and score_func != "sigmoid":
        raise ValueError("moe_arguments: argument 'expert_bias' is only for score_func 'sigmoid'")
    if weight_nbit != 4:
        raise ValueError("moe_arguments: argument 'weight_nbit' must be 4")
    if not 1 <= num_activated_experts <= num_experts:
        raise ValueError("moe_arguments: argument 'num_activated_experts' must be within 1..num_experts")
    for name, packed, values in (("packed_w13", packed_w13, 2 * hidden_dim * dim), ("packed_w2", packed_w2, dim * hidden_dim)):
        if packed.dtype != torch.uint8 or packed.shape[0] != num_experts:
            raise ValueError(f"moe_arguments: argument '{name}' must be uint8, one row per expert")
        if packed[0].numel() * 2 < values:
            raise ValueError(f"moe_arguments: argument '{name}' holds {packed[0].numel()} bytes an expert, fewer than its "
                             f"{values} int4 values take")
    raise NotImplementedError("moe_arguments: the packed weights' layout is torchao's; values are not computed")


def copy(input):
    """``llama::fallback``: the input copied (the kernel is ExecuTorch's clone)."""
    return input.clone()
