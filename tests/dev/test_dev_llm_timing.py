"""etops dev times the LLM attention and KV-cache kernels at a model's steps
(a decode step of one token against a full cache, prefills of 128 and 512 tokens,
grouped-query heads, head dims 128 and 64), not at element counts; the rows say
the shapes. No time is asserted (one round each), in a fresh interpreter (the LLM
library's registrations stay for the process)."""

from __future__ import annotations

import json

import pytest

from etops.dev.llm_timing import STEPS, model_samples
from fresh_python import run_python


def test_the_llm_kernels_are_timed_at_decode_and_prefill_steps():
    proc = run_python("""
        import json
        from etops.dev.timing import describe, time_edit
        from etops.llm_library import load_llm_custom_ops
        from etops.registry import as_program, registry

        load_llm_custom_ops()
        out = {}
        for kernel in ("llama::update_cache.out", "llama::custom_sdpa.out"):
            rows = time_edit(as_program(registry().get_kernel(kernel)), None, repeats=1)
            out[kernel] = [{"label": r["label"], "shape": r.get("shape"), "error": r["error"], "text": describe(r)} for r in rows]
        print(json.dumps(out))
    """)
    assert proc.returncode == 0, proc.stderr
    # the library's ATen wrappers, timed beside the kernels, run ExecuTorch's kernels
    # without a temp allocator and log an error each call: theirs (DEBUG), never an
    # error of the next ExecuTorch call's on the terminal
    assert "temp allocator" not in proc.stderr, proc.stderr[-2000:]
    for kernel, rows in json.loads(proc.stdout.splitlines()[-1]).items():
        assert [(r["label"], r["shape"]["seq"], r["shape"]["dim"]) for r in rows] == [
            ("decode", 1, 128), ("prefill 128", 128, 128), ("prefill 512", 512, 64)], kernel
        assert all(r["error"] is None and r["shape"]["heads"] == 4 * r["shape"]["kv_heads"] for r in rows), kernel
        assert "seq 1 from 1023 of a 1024 cache, 32 heads over 8, dim 128" in rows[0]["text"]


def test_other_kernels_keep_the_element_count_sizes_and_a_bad_dtype_is_refused():
    assert model_samples("llama::fast_hadamard_transform.out", "float32") is None
    assert len(model_samples("llama::custom_quantized_sdpa.out", "float32")) == len(STEPS)
    with pytest.raises(ValueError, match="argument 'dtype'"):
        model_samples("llama::update_cache.out", "half-precision")
