"""The timing inputs of the LLM attention and KV-cache kernels, shaped like a
model's steps rather than scaled to element counts: a **decode** step (one query
token against a full 1024-position cache), a **prefill** of 128 tokens and one of
512 tokens, with grouped-query heads (32 query heads over 8 kv heads; 8 over 2 for
the quantized attention's prefills, QUANTIZED_STEPS) and head dims 128 and 64
(``model_samples``). etops dev's timing (timing.time_edit) times
these instead of its small / medium / large sizes for the kernels listed in
SHAPED; every row carries its ``shape`` (batch, seq, heads, kv_heads, dim,
cache, start_pos). Imports torch and etops.bench.inputs.
"""

from __future__ import annotations

import torch

#: (label, batch, seq, query heads, kv heads, head dim, cache length, start_pos)
STEPS = (
    ("decode", 1, 1, 32, 8, 128, 1024, 1023),
    ("prefill 128", 1, 128, 32, 8, 128, 1024, 0),
    ("prefill 512", 1, 512, 32, 8, 64, 1024, 0),
)
#: the quantized attention's prefills with 8 query heads over 2 kv heads and head dim 64:
#: its int8 path takes 1.9 s a call at STEPS' prefill 512 (32 heads), the timing's rounds
#: of both sides past its 90 s limit
QUANTIZED_STEPS = (
    STEPS[0],
    ("prefill 128", 1, 128, 8, 2, 64, 1024, 0),
    ("prefill 512", 1, 512, 8, 2, 64, 1024, 0),
)


def _sample(kernel: str, args: tuple, kwargs: dict, label: str, dtype):
    from ..bench.inputs import Sample

    return Sample(kernel, args, kwargs, f"a model's {label} step, {str(dtype).replace('torch.', '')}")


def _per_token(batch, seq, heads, dim):
    """int8 values, int8 zero points and float32 scales, one per token (the quantized caches' layout)."""
    return (torch.randint(-128, 128, (batch, seq, heads, dim), dtype=torch.int8),
            torch.randint(-8, 8, (batch, seq, heads, 1), dtype=torch.int8), torch.rand(batch, seq, heads, 1) / 64 + 1e-3)


def _inputs(kernel: str, dtype, batch, seq, heads, kv_heads, dim, cache, start):
    """(args, kwargs) of `kernel` at one step."""
    q = torch.randn(batch, seq, heads, dim, dtype=dtype)
    if kernel == "llama::custom_sdpa.out":
        kv = [torch.randn(batch, cache, kv_heads, dim, dtype=dtype) for _ in range(2)]
        return (q, *kv, start), {"is_causal": True}
    if kernel == "llama::sdpa_with_kv_cache.out":
        new = [torch.randn(batch, seq, kv_heads, dim, dtype=dtype) for _ in range(2)]
        caches = [torch.randn(batch, cache, kv_heads, dim, dtype=dtype) for _ in range(2)]
        return (q, *new, *caches, start, seq), {"is_causal": True}
    if kernel == "llama::custom_quantized_sdpa.out":
        parts = [_per_token(batch, n, h, dim) for n, h in ((seq, heads), (cache, kv_heads), (cache, kv_heads))]
        kwargs = {f"{name}_{what}": p[i] for name, p in zip("qkv", parts) for i, what in ((1, "zero_points"), (2, "scales"))}
        return (parts[0][0], parts[1][0], parts[2][0], start), {"is_causal": True, **kwargs}
    value = torch.randn(batch, seq, kv_heads, dim, dtype=dtype)
    kv_cache = torch.zeros(batch, cache, kv_heads, dim, dtype=dtype)
    if kernel == "llama::update_cache.out":
        return (value, kv_cache, start), {}
    indices = torch.stack([torch.arange(start, start + seq) for _ in range(batch)])  # update_cache_with_indices.out
    return (value, kv_cache, 0, indices), {}


#: the kernels timed at a model's steps
SHAPED = ("llama::custom_sdpa.out", "llama::sdpa_with_kv_cache.out", "llama::custom_quantized_sdpa.out",
          "llama::update_cache.out", "llama::update_cache_with_indices.out")


def model_samples(kernel: str, dtype: str) -> list | None:
    """[(label, shape, bench.inputs.Sample)] of `kernel` at each of STEPS at `dtype`
    (a dtype name; the quantized attention's are int8 whatever it is), None for a
    kernel not in SHAPED."""
    if kernel not in SHAPED:
        return None
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise ValueError(f"model_samples: argument 'dtype' is no torch dtype name: {dtype!r}")
    out = []
    for label, batch, seq, heads, kv_heads, dim, cache, start in (QUANTIZED_STEPS if kernel == "llama::custom_quantized_sdpa.out" else STEPS):
        args, kwargs = _inputs(kernel, torch_dtype, batch, seq, heads, kv_heads, dim, cache, start)
        shape = {"batch": batch, "seq": seq, "heads": heads, "kv_heads": kv_heads, "dim": dim, "cache": cache,
                 "start_pos": start}
        out.append((label, shape, _sample(kernel, args, kwargs, label, torch_dtype)))
    return out
