"""A/B timing (etops.bench.ab): a verdict only where the whole interquartile range of
the paired ratios lies on one side of 1 (timing an override against the kernel it
replaced: tests/dev/inprocess/check_dev.py)."""

from __future__ import annotations

from etops.bench.ab import verdict


def _ratio(q1, median, q3):
    return {"q1": q1, "median": median, "q3": q3}


def test_verdict_only_beyond_the_noise():
    assert verdict(_ratio(0.70, 0.75, 0.80)) == "faster"
    assert verdict(_ratio(1.10, 1.20, 1.30)) == "slower"
    assert verdict(_ratio(0.90, 0.95, 1.02)) == "within noise"  # median below 1, the noise reaches past it
    assert verdict(_ratio(0.98, 1.05, 1.40)) == "within noise"
    assert verdict(None) == "not timed"
