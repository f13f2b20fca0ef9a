"""A/B timing (etops.bench.ab): a verdict only where the whole interquartile range of
the paired ratios lies on one side of 1; the rows carry all three sides."""

from __future__ import annotations

import torch

import etops
from etops.bench.ab import ab_sample, time_ab, verdict


def _ratio(q1, median, q3):
    return {"q1": q1, "median": median, "q3": q3}


def test_verdict_only_beyond_the_noise():
    assert verdict(_ratio(0.70, 0.75, 0.80)) == "faster"
    assert verdict(_ratio(1.10, 1.20, 1.30)) == "slower"
    assert verdict(_ratio(0.90, 0.95, 1.02)) == "within noise"  # median below 1, the noise reaches past it
    assert verdict(_ratio(0.98, 1.05, 1.40)) == "within noise"
    assert verdict(None) == "not timed"


def test_time_ab_against_the_kernel_an_override_replaced():
    def slow_add(self, other, alpha=1, out=None):  # a Python kernel: much slower than the built-in
        return self + alpha * other

    with etops.override("aten::add.out", slow_add) as o:
        kernel = etops.registry().get_kernel("aten::add.out")
        sample = ab_sample(kernel, "1k")
        row = time_ab(kernel, o.previous.kernel, sample, repeats=5, warmup=1, target=0.002)
    assert row["error"] is None and row["threads"] == 1
    assert row["agree_aten"] and row["agree_builtin"]
    assert row["vs_builtin"]["median"] > 1 and row["verdict_builtin"] == "slower", row["vs_builtin"]
    assert torch.get_num_threads() >= 1  # restored
