"""The interval of a median (etops.bench.core.median_interval, the sign test's)
and the clocks time_calls may read (core.CLOCKS): the CPU clock leaves out the
time a call waits."""

from __future__ import annotations

import time

import pytest

from etops.bench import core


def test_the_interval_is_the_k_th_smallest_and_largest_at_90_percent_or_more():
    values = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 10.0, 4.0, 8.0, 6.0, 11.0]
    low, high, confidence = core.median_interval(values)
    assert (low, high) == (3.0, 9.0) and 0.93 < confidence < 0.94  # 11 values: the 3rd each side
    assert core.median_interval([1.0, 2.0, 3.0, 4.0, 5.0])[:2] == (1.0, 5.0)  # 5 values: the whole range, 93.75%
    assert core.median_interval([1.0, 2.0, 3.0, 4.0, 5.0])[2] == pytest.approx(0.9375)
    low, high, confidence = core.median_interval([1.0, 2.0, 3.0])
    assert (low, high, confidence) == (1.0, 3.0, 0.75)  # too few for 90%: the range, and its confidence
    many = [float(i) for i in range(41)]
    low, high, confidence = core.median_interval(many)
    assert (low, high) == (14.0, 26.0) and confidence >= core.CONFIDENCE


def test_a_value_far_off_moves_the_interval_by_one_rank_only():
    values = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.03, 0.97]
    low, high, _ = core.median_interval(values[:-1] + [1000.0])
    assert high <= 1.02


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="values"):
        core.median_interval([])
    with pytest.raises(ValueError, match="confidence"):
        core.median_interval([1.0], confidence=1.5)
    with pytest.raises(ValueError, match="clock"):
        core.time_calls({"a": (len, ([1],), {})}, repeats=1, warmup=0, target=1e-5, clock="sundial")


def test_the_cpu_clock_leaves_out_a_wait_the_wall_clock_counts():
    calls = {"sleep": (time.sleep, (0.004,), {})}
    wall, _ = core.time_calls(calls, repeats=1, warmup=0, target=1e-5, clock="wall")
    cpu, _ = core.time_calls(calls, repeats=1, warmup=0, target=1e-5, clock="cpu")
    assert wall["sleep"][0] >= 0.004 and cpu["sleep"][0] < 0.002
