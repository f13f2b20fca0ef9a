"""Rules of ExecuTorch's LLM custom ops (``llama::*``, registered when
executorch.extension.llm.custom_ops.custom_ops loads its library): guards
against the aborts the reference sweep found."""

from __future__ import annotations

from . import guards as g
from .parts import Direct, Safety
from .rules import Rule
from ..errors import refusing

_LIBRARY = "executorch.extension.llm.custom_ops.custom_ops"


def _causal_keys_fit(bound, info):
    """start_pos + the query's sequence (dim 1) must not pass the cache's length:
    cpu_flash_attention ET_CHECKs num_keys_for_causal_attention <= kvSize."""
    q, k, start = g.shape_dtype(bound.get("query")), g.shape_dtype(bound.get("key")), bound.get("start_pos")
    if q is None or k is None or not isinstance(start, int) or len(q[0]) != 4 or len(k[0]) != 4:
        return
    if bound.get("is_seq_at_dim_2"):
        seq, keys = q[0][2], k[0][2]
    else:
        seq, keys = q[0][1], k[0][1]
    if start < 0 or start + seq > keys:
        raise refusing(ValueError, "start_pos", f"{info.name}: argument 'start_pos' is {start}: start_pos + the query's {seq} positions must lie "
                         f"within the {keys} positions of 'key' (the kernel aborts otherwise)")


RULES = [
    # found by the reference sweep: query (1, 2, 4, 16), key/value (1, 32, 4, 16), start_pos 32 aborted in
    # cpu_flash_attention (num_keys_for_causal_attention must be <= kvSize); no Finding record: the table's
    # findings are replayed without the library loaded. The check runs inside the kernel's parallel_for, where
    # an abort on a worker thread cannot be unwound (docs/reliability.md): the safety part keeps the guard for the judge
    Rule(("llama::custom_sdpa.out", "llama::custom_quantized_sdpa.out"), safety=Safety(guards=(_causal_keys_fit,)), optional=_LIBRARY),
    # the kernel ET_CHECKs its shapes; x is (tokens, dim)
    Rule(("llama::quantized_moe_ffn.out",), direct=Direct(guards=(g.exact_dim(2, "x"),)), optional=_LIBRARY),
]
