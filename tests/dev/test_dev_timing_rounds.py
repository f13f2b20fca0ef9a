"""How many rounds etops dev's timing runs: all of them unless at least MIN_ROUNDS
decide the verdict beyond doubt (timing.decided), and bench.core.time_calls stops
when its ``enough`` says so."""

from __future__ import annotations

from etops.bench import core
from etops.dev import timing


def _ratio(q1, q3, of_mins):
    return {"q1": q1, "q3": q3, "median": (q1 + q3) / 2, "of_mins": of_mins}


def test_rounds_decide_only_when_clearly_inside_or_clearly_beyond_the_effect():
    few = timing.MIN_ROUNDS - 1
    assert not timing.decided(_ratio(0.99, 1.01, 1.0), few)  # too few rounds, however tight
    assert timing.decided(_ratio(0.99, 1.01, 1.0), timing.MIN_ROUNDS)  # no difference, beyond doubt
    assert not timing.decided(_ratio(0.95, 1.06, 1.0), timing.MIN_ROUNDS)  # a range past 1 ± MIN_EFFECT / 2
    assert not timing.decided(_ratio(1.10, 1.12, 1.11), timing.MIN_ROUNDS)  # slower? not beyond 1 + 2 MIN_EFFECT
    assert timing.decided(_ratio(1.9, 2.1, 2.0), timing.MIN_ROUNDS)  # a 2x slowdown
    assert timing.decided(_ratio(0.4, 0.5, 0.45), timing.MIN_ROUNDS)  # twice as fast
    assert not timing.decided(_ratio(0.99, 1.01, 1.3), timing.MIN_ROUNDS)  # the fastest rounds disagree
    assert not timing.decided(None, 11)


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
