"""The verdict of ``etops dev``'s timing (etops.dev.timing.verdict) from the
per-round ratios edit / base, fed synthetic ratios (no timing here): tight
around 2.0 is "slower" and a finding beyond --max-slowdown; tight around 1.0 is
"no difference"; a spread too wide to tell (a loaded machine) is "too noisy",
never "slower" or "faster" and never a finding, and the text, markdown and JSON
rows say so with the spread."""

from __future__ import annotations

import json

import pytest

from etops.bench import core
from etops.dev import timing
from etops.dev.report import DevResult, FileResult


def _ratio(ratios):
    out = core.ratio_summary(list(ratios))
    out["of_mins"] = min(ratios)
    return out


#: 11 rounds each
TIGHT_2X = [1.93, 2.05, 1.98, 2.01, 1.96, 2.08, 2.0, 1.97, 2.03, 1.99, 2.02]
TIGHT_1X = [0.98, 1.01, 1.0, 1.03, 0.99, 1.02, 0.97, 1.0, 1.01, 0.99, 1.02]
#: the docs' old row: median 1.32, IQR 0.05-19.62, read "no difference"
WIDE = [0.05, 0.06, 19.62, 1.32, 0.9, 19.0, 0.05, 1.6, 19.5, 0.3, 18.0]
#: a 2x slowdown that read 14.5x on a loaded machine, its rounds 0.8-25x; an
#: unchanged file that read 0.78x "faster", its rounds 0.45-1.3x
LOADED_2X = [1.7, 25.5, 0.8, 20.9, 0.9, 20.4, 14.5, 14.4, 1.0, 15.3, 14.6]
LOADED_1X = [0.78, 0.5, 1.2, 0.7, 0.78, 0.45, 1.3, 0.8, 0.6, 0.77, 1.1]


def test_a_tight_2x_is_slower_and_a_finding_beyond_max_slowdown():
    r = _ratio(TIGHT_2X)
    assert timing.verdict(r) == "slower"
    assert timing.slowdown_finding(r, 1.3) and not timing.slowdown_finding(r, 2.5)
    assert not timing.slowdown_finding(r, 2.0)  # the interval (1.97-2.03) reaches 2.0: not beyond it
    assert not timing.slowdown_finding(r, None)


def test_a_tight_half_is_faster_and_never_a_finding():
    r = _ratio([x / 2 for x in TIGHT_1X])
    assert timing.verdict(r) == "faster" and not timing.slowdown_finding(r, 1.01)


def test_a_tight_1x_is_no_difference():
    r = _ratio(TIGHT_1X)
    assert timing.verdict(r) == "no difference" and not timing.slowdown_finding(r, 1.01)


@pytest.mark.parametrize("ratios", [WIDE, LOADED_2X, LOADED_1X], ids=["wide", "loaded-2x", "loaded-1x"])
def test_a_spread_too_wide_to_tell_is_too_noisy_never_slower_faster_or_a_finding(ratios):
    r = _ratio(ratios)
    assert timing.verdict(r) == "too noisy"
    assert not timing.slowdown_finding(r, 1.01)


def test_a_slowdown_whose_size_the_rounds_cannot_tell_gates_only_beyond_its_whole_interval():
    """Every round's ratio past 1.1 but spread 1.1-25x: slower for sure, by how much
    unknown (median 14.5x): a finding under --max-slowdown 1.3, not under 3."""
    r = _ratio([1.7, 25.5, 1.1, 20.9, 1.2, 20.4, 14.5, 14.4, 2.0, 15.3, 14.6])
    assert timing.verdict(r) == "slower" and r["median"] == 14.5 and r["low"] == 1.7
    assert timing.slowdown_finding(r, 1.3) and not timing.slowdown_finding(r, 3.0)
    said = timing.verdict_text({"verdict": "slower", "vs_builtin": r})
    assert said == "slower: ratio 1.70-20.40x, too noisy to tell how much"
    assert timing.verdict_text({"verdict": "slower", "vs_builtin": _ratio(TIGHT_2X)}) == "slower"


def test_a_few_rounds_far_off_do_not_spoil_the_verdict():
    """Two rounds of eleven a process preempted (ratio 20): the interval of the
    median moves by a rank each, the verdict holds."""
    assert timing.verdict(_ratio(TIGHT_2X[:9] + [20.0, 20.0])) == "slower"
    assert timing.verdict(_ratio(TIGHT_1X[:9] + [0.05, 20.0])) == "no difference"


def test_an_interval_straddling_the_band_is_too_noisy_and_fewer_than_5_rounds_never_decide():
    # beyond 1 + MIN_EFFECT at the median, but the interval reaches back past it and beyond 1 + NO_DIFFERENCE
    assert timing.verdict(_ratio([1.02, 1.2, 1.1, 1.25, 1.05, 1.12, 1.3, 1.0, 1.15, 1.09, 1.18])) == "too noisy"
    # within 1 ± NO_DIFFERENCE though not within 1 ± MIN_EFFECT: no difference the rounds can tell
    assert timing.verdict(_ratio([1.02, 1.1, 1.05, 1.12, 1.06, 1.09, 1.04, 1.11, 1.07, 1.03, 1.08])) == "no difference"
    assert timing.verdict(_ratio([2.0, 2.01, 1.99, 2.0])) == "too noisy"  # 4 rounds: the interval is 87.5%
    assert timing.verdict(_ratio([2.0, 2.01, 1.99, 2.0, 2.02])) == "slower"
    assert timing.verdict(None) == "not timed"


def _row(ratios, threads=1, max_slowdown=None, monkeypatch=None):
    """time_edit's row of one size, its time_ab replaced by synthetic rounds: the
    edit's seconds `ratios[i]` times the base's, round after round, as long as
    time_edit's ``enough`` asks for more."""
    from etops.bench import ab

    seen = {}

    def fake_time_ab(kernel, base, sample, *, repeats, enough, clock, **_):
        seen["clock"], seen["most"] = clock, repeats
        new, old = [], []
        for i in range(repeats):
            new.append(ratios[i % len(ratios)] * 1e-5)
            old.append(1e-5)
            if enough({"new": new, "builtin": old}):
                break
        return {"kernel": kernel.name, "size": 1024, "dtype": "float32", "threads": threads, "clock": clock,
                "new": core._summary(new), "builtin": core._summary(old), "vs_builtin": core.paired_ratio(new, old),
                "repeats": len(new)}

    class Kernel:
        name = "aten::mul.out"

    monkeypatch.setattr(ab, "time_ab", fake_time_ab)
    monkeypatch.setattr(timing, "timing_sample", lambda *a, **k: object())
    [row] = timing.time_edit(Kernel(), object(), sizes=(("small", "1k"),), threads=threads, max_slowdown=max_slowdown)
    return row, seen


def _file(rows):
    return FileResult("kernels/portable/cpu/op_mul.cpp", ops=["aten::mul.out"], replaced=["aten::mul.out"], timing=rows)


def test_a_2x_row_is_slower_decided_in_5_rounds_on_the_cpu_clock_and_gates(monkeypatch):
    row, seen = _row(TIGHT_2X, max_slowdown=1.3, monkeypatch=monkeypatch)
    assert seen["clock"] == "cpu" and row["repeats"] == timing.MIN_ROUNDS
    assert row["verdict"] == "slower" and row["slowdown_finding"]
    f = _file([row])
    assert f.exit_code == 1
    line = timing.describe(row)
    assert "1.98x the base's time (94% interval 1.93-2.05, fastest rounds 1.93x, 5 rounds)" in line and line.endswith(": slower"), line
    assert "<- slowdown finding" in DevResult([f]).text()


def test_a_wide_row_is_too_noisy_after_more_rounds_never_gates_and_every_output_says_so(monkeypatch):
    row, seen = _row(WIDE, max_slowdown=1.01, monkeypatch=monkeypatch)
    assert row["repeats"] == timing.MAX_ROUNDS == seen["most"]  # rounds past the 11 asked for, up to the most
    assert row["verdict"] == "too noisy" and not row["slowdown_finding"]
    result = DevResult([_file([row])])
    assert result.exit_code == 0
    low, high, _ = timing.interval(row["vs_builtin"])
    assert low < 0.5 and high > 1.5
    said = f"too noisy: ratio {low:.2f}-{high:.2f}x"
    assert timing.describe(row).endswith(said)
    text = result.text()
    assert said in text and "slowdown finding" not in text and "slower" not in text and "faster" not in text
    assert f"| {low:.2f}-{high:.2f} | {said} |" in result.markdown()
    [json_row] = json.loads(json.dumps(result.to_dict()))["files"][0]["timing"]
    assert json_row["verdict"] == "too noisy" and json_row["slowdown_finding"] is False
    assert (json_row["vs_builtin"]["low"], json_row["vs_builtin"]["high"]) == (low, high)


def test_a_1x_row_is_no_difference_and_more_threads_read_the_wall_clock(monkeypatch):
    row, seen = _row(TIGHT_1X, threads=2, monkeypatch=monkeypatch)
    assert seen["clock"] == "wall" and row["verdict"] == "no difference" and not row["slowdown_finding"]
    assert "| 0.98-1.03 | no difference |" in DevResult([_file([row])]).markdown()
