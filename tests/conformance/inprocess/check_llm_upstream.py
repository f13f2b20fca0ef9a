"""Upstream's Python tests of the LLM ops (in the executorch wheel) run with
their torch ops routed to the registry's kernels: the wheel's kernels pass them,
a planted kernel (a Python kernel swapped in) fails them, and routing off runs
torch's own implementations (the wheel's ATen wrappers, blind to the plant). (Run in a fresh interpreter:
loading the library registers its kernels.)"""

from __future__ import annotations

import importlib

import pytest
import torch

import etops
from etops.conformance import llm_upstream
from etops.conformance.references import llm_math as m

importlib.import_module(llm_upstream.LIBRARY)


def test_routing_calls_the_registry_kernel_and_ends():
    q, k, v = torch.randn(1, 3, 4, 8), torch.randn(1, 8, 2, 8), torch.randn(1, 8, 2, 8)
    with llm_upstream.routed() as routing:
        out = torch.ops.llama.custom_sdpa(q, k, v, 2, None, 0.0, True)
    torch.testing.assert_close(out, m.attention(q, k, v, 2, is_causal=True), rtol=1e-4, atol=1e-5)
    assert routing.calls == {"llama::custom_sdpa.out": 1}
    with llm_upstream.routed(["llama::fallback.out"]) as routing:
        torch.ops.llama.custom_sdpa(q, k, v, 2, None, 0.0, True)  # not routed
        with pytest.raises(RuntimeError, match="fallback.out"):  # an etops refusal, as torch ops refuse
            torch.ops.llama.fallback.out(torch.randn(3), output=torch.empty(3, dtype=torch.int64))
    assert routing.calls == {"llama::fallback.out": 1}
    with pytest.raises(ValueError, match="'kernels'"):
        with llm_upstream.routed(["aten::add.out"]):
            pass


def _update_cache_one_late(value, cache, start_pos, out=None):
    start = min(start_pos + 1, cache.shape[1] - value.shape[1])
    cache.copy_(m.write_cache(value, cache, start))
    return out


def test_upstream_tests_judge_the_registered_kernel():
    """test_update_cache's test_update_kv_cache_simple: passes on the wheel's
    kernel, fails on a planted one when routed; unrouted it does not see it."""
    wanted = "test_update_kv_cache_simple"
    (wheel,) = llm_upstream.run_tests(["test_update_cache"], wanted)
    assert wheel.status == "passed" and wanted in wheel.test
    with etops.override("llama::update_cache.out", _update_cache_one_late):
        (planted,) = llm_upstream.run_tests(["test_update_cache"], wanted)
        (unrouted,) = llm_upstream.run_tests(["test_update_cache"], wanted, route=False)
    assert planted.status == "failed", planted
    assert unrouted.status == "passed"
    assert llm_upstream.summary([wheel, planted]) == "1 passed, 1 failed, 0 skipped"
    with pytest.raises(ValueError, match="'modules'"):
        llm_upstream.run_tests(["test_nothing"])
