"""A/B timing (etops.bench.ab.time_ab) of two kernels of one operator: they trade
their outs call by call, so that where an out lies in memory (a 4k alias with an
input) weighs on both alike. With outs of their own for the whole run, an unchanged
copy kernel read 0.91x and 1.07x of itself from one run to the next."""

from __future__ import annotations

import torch

from etops.bench import core
from etops.bench.ab import ab_sample, time_ab


def test_time_calls_runs_a_names_calls_in_turn_call_by_call():
    seen = []
    calls = {"a": [(lambda: seen.append("a0"), (), {}), (lambda: seen.append("a1"), (), {})],
             "b": (lambda: seen.append("b"), (), {})}
    samples, counts = core.time_calls(calls, repeats=3, warmup=0, target=1e-5, same_count=True)
    assert len(samples["a"]) == len(samples["b"]) == 3
    timed = [x for x in seen[-(3 * 2 * counts["a"]):] if x != "b"]  # the timed loops, after the calibration
    assert timed[:4] == ["a0", "a1", "a0", "a1"] and timed.count("a0") - timed.count("a1") in (0, 1, 2, 3)


def test_the_two_kernels_of_an_ab_timing_write_into_each_others_outs_in_turn(reg):
    kernel = reg.aten.add.out
    sample = ab_sample(kernel, "1k")
    used = []

    def previous(*args, **kwargs):
        used.append(kwargs["out"].data_ptr())
        return kernel(*args, **kwargs)

    row = time_ab(kernel, previous, sample, repeats=4, warmup=0, aten=False, same_count=True, target=1e-4)
    assert row["agree_builtin"] and row["repeats"] == 4
    assert len(set(used)) == 2  # its own out and the new kernel's, in turn
    assert isinstance(row["vs_builtin"]["median"], float) and torch.is_tensor(sample.args[0])
