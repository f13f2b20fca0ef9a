"""How many rounds etops dev's timing runs: all `repeats` unless at least
MIN_ROUNDS decide the verdict beyond doubt (timing.decided), more while the
verdict is "too noisy" up to MAX_ROUNDS and ROUNDS_SECONDS (timing.more_rounds);
bench.core.time_calls stops when its ``enough`` says so."""

from __future__ import annotations

from etops.bench import core
from etops.dev import timing


def _ratio(*ratios):
    return core.ratio_summary(list(ratios))


def test_rounds_decide_only_when_the_interval_is_clearly_inside_or_clearly_beyond_the_effect():
    tight = (0.99, 1.01, 1.0, 1.0, 0.995)
    assert not timing.decided(_ratio(*tight[:4]))  # too few rounds, however tight
    assert timing.decided(_ratio(*tight))  # no difference, beyond doubt
    assert not timing.decided(_ratio(0.95, 1.09, 1.0, 1.0, 1.0))  # an interval past 1 ± NO_DIFFERENCE / 2
    assert not timing.decided(_ratio(1.10, 1.12, 1.11, 1.11, 1.11))  # slower? not beyond 1 + 2 MIN_EFFECT
    assert timing.decided(_ratio(1.9, 2.1, 2.0, 2.0, 2.0))  # a 2x slowdown
    assert timing.decided(_ratio(0.4, 0.5, 0.45, 0.45, 0.45))  # twice as fast
    assert not timing.decided(_ratio(0.05, 19.6, 1.3, 1.0, 2.0))  # too noisy
    assert not timing.decided(None)


def test_a_too_noisy_size_takes_more_rounds_up_to_the_most_and_the_time_cap():
    wide = _ratio(0.05, 19.6, 1.3, 1.0, 2.0, 0.5, 9.0, 0.8, 1.4, 3.0, 0.1)
    assert timing.verdict(wide) == "too noisy"
    assert timing.more_rounds(wide, 11, 11, 0.5)  # past the rounds asked for
    assert not timing.more_rounds(wide, timing.MAX_ROUNDS, 11, 0.5)
    assert not timing.more_rounds(wide, 20, 11, timing.ROUNDS_SECONDS + 0.1)
    settled = _ratio(0.88, 0.9, 0.92, 0.95, 1.0, 1.0, 1.05, 1.08, 1.1, 1.12, 1.13)  # interval 0.92-1.10
    assert timing.verdict(settled) == "no difference" and not timing.decided(settled)
    assert timing.more_rounds(settled, 10, 11, 0.5) and not timing.more_rounds(settled, 11, 11, 0.5)
    assert timing.more_rounds(None, 3, 11, 0.5) and not timing.more_rounds(None, 11, 11, 0.5)  # no base


def test_time_calls_stops_when_enough_says_so_and_runs_every_round_otherwise():
    calls = {"a": (len, ([1],), {}), "b": (len, ([1, 2],), {})}
    asked = []

    def enough(samples):
        asked.append(len(samples["a"]))
        return len(samples["a"]) == 3

    samples, _ = core.time_calls(calls, repeats=11, warmup=1, target=0.0005, enough=enough)
    assert [len(v) for v in samples.values()] == [3, 3] and asked == [1, 2, 3]
    samples, _ = core.time_calls(calls, repeats=4, warmup=1, target=0.0005, enough=lambda s: False)
    assert [len(v) for v in samples.values()] == [4, 4]
