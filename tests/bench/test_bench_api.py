"""etops.bench as a Python API (notebooks): numbers positive on both sides, the
result's renderings, the threadpool size. No assertion on speed."""

from __future__ import annotations

import json

import pytest
import torch

import etops
from etops.bench import inputs


def _add_inputs(size, dtype):
    n = size or 8
    return (torch.randn(n, dtype=dtype or torch.float32), torch.randn(n, dtype=dtype or torch.float32)), {"alpha": 2}


@pytest.fixture(scope="module")
def result():
    return etops.bench("aten::add.out", sizes=[16, "1k"], inputs=_add_inputs, repeats=3, warmup=1, target=2e-4)


def test_both_sides_measured(result):
    assert len(result.rows) == 2
    for row in result.rows:
        assert row["error"] is None and row["agree"] is True
        for side in ("etops", "aten", "etops_zero", "aten_zero"):
            s = row[side]
            assert 0 < s["min"] <= s["median"] and len(s["samples"]) == 3
        assert row["ratio"]["median"] > 0 and row["ratio"]["q1"] <= row["ratio"]["q3"]
    assert [r["size"] for r in result.rows] == [16, 1024]
    assert result.threads["torch"] == result.threads["executorch"] >= 1


def test_renderings(result, tmp_path):
    text = result.text()
    assert "aten::add.out" in text and "ratio (ET/ATen)" in text and "threads: torch" in text
    assert "| `aten::add.out` |" in result.markdown(title="add")
    assert json.loads(result.to_json())["rows"][0]["kernel"] == "aten::add.out"
    assert result.table().row_count == 2
    png = result.plot(str(tmp_path / "p.png"))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert result.ranked()[0]["kernel"] == "aten::add.out"


def test_opinfo_sample_at_a_size():
    r = etops.bench(etops.registry().aten.mul.out, sizes=["4k"], repeats=3, warmup=0, target=2e-4, threads=1)
    (row,) = r.rows
    assert row["error"] is None, row
    assert "OpInfo 'mul'" in row["input"]
    assert row["size"] == pytest.approx(4096, rel=0.1)
    assert row["etops"]["median"] > 0 and row["aten"]["median"] > 0
    assert r.threads == {"torch": 1, "executorch": 1}


def test_derive_maps_view_ops_to_copy_kernels():
    reg = etops.registry()
    found = inputs.derive([reg.get_kernel("aten::select_copy.int_out")], only_named=True)
    sample = found["aten::select_copy.int_out"]
    assert sample.functional == "aten::select.int"
    out = reg.get_kernel("aten::select_copy.int_out")(*sample.args, **sample.kwargs)
    assert torch.equal(out, torch.select_copy(*sample.args, **sample.kwargs))


def test_an_empty_first_sample_is_passed_over_for_one_that_can_be_sized():
    """The first OpInfo sample reaching ``_adaptive_avg_pool2d`` (adaptive_avg_pool1d's
    first) has no element: nothing to time and nothing to scale. The timing input
    comes from a later OpInfo's sample, at about the size asked for."""
    from etops.bench.ab import ab_sample

    sample = ab_sample(etops.registry().get_kernel("aten::_adaptive_avg_pool2d.out"), "64k", "float32")
    assert sample is not None
    assert sample.size == pytest.approx(65536, rel=0.2), sample.shapes()


def test_a_list_out_is_never_given_more_tensors_instead_of_bigger_ones():
    """unbind's input scaled (or flattened) to a million elements asks for a million
    0-d outs: that times the allocation of outs, and took a quarter of an hour."""
    from etops.bench.sampling import list_outs, sized
    from etops.bench.core import Pair

    unbind = etops.get_kernel("aten::unbind_copy.int_out")
    assert sized(unbind, inputs.Sample(unbind.name, (torch.randn(5),), {"dim": 0}, "test"), 65536) is None
    split = etops.get_kernel("aten::split_copy.Tensor_out")
    sample = inputs.Sample(split.name, (torch.randn(4, 5), 4), {"dim": 1}, "test")
    bigger = sized(split, sample, 4096)
    assert bigger is not None and bigger.size >= 1024
    assert list_outs(Pair(split, bigger)) == list_outs(Pair(split, sample))


def test_set_num_threads_round_trip():
    before = etops.get_num_threads()
    try:
        assert etops.set_num_threads(1) == 1 and etops.get_num_threads() == 1
        assert etops.set_num_threads(3) == 3
    finally:
        etops.set_num_threads(before)
    assert etops.get_num_threads() == before
    with pytest.raises(ValueError):
        etops.set_num_threads(0)
    with pytest.raises(TypeError):
        etops.set_num_threads(1.5)


def test_sizes_parse():
    assert [inputs.parse_size(s) for s in ("16", "4k", "1M", "16M")] == [16, 4096, 1 << 20, 16 << 20]
    assert inputs.format_size(16 << 20) == "16M"
    with pytest.raises(ValueError):
        inputs.parse_size("lots")


def test_unknown_kernel_raises():
    with pytest.raises(etops.KernelNotFoundError):
        etops.bench("aten::add.Tensor")


def test_ranked_puts_the_slowest_ratio_first():
    from etops.bench.result import BenchResult

    def row(name, kernel_ratio=None, ratio=None, error=None):
        s = lambda m: {"min": m, "median": m, "q1": m, "q3": m, "samples": [m]}  # noqa: E731
        r = {"kernel": name, "dtype": "float32", "size": 1, "size_label": "1", "error": error}
        if ratio is not None:
            r.update(etops=s(1.0), aten=s(1.0), ratio=s(ratio), kernel_ratio=s(kernel_ratio) if kernel_ratio else None)
        return r

    rows = [row("a", 0.5, 0.6), row("b", error="x"), row("c", 3.0, 2.0), row("d", None, 9.0), row("e", 1.0, 1.0)]
    result = BenchResult(rows, {"torch": 1, "executorch": 1}, {}, {"budget": 1})
    assert [r["kernel"] for r in result.ranked()] == ["c", "e", "a", "d", "b"]
    assert "5 rows: 4 measured, 1 failed" in result.summary()


def test_one_thread_each_by_default(result):
    assert result.threads == {"torch": 1, "executorch": 1}
    assert "threads: torch 1, ExecuTorch 1 (one each by default" in result.header()


def _summary(median, q1, q3):
    return {"min": q1, "median": median, "q1": q1, "q3": q3, "samples": [median]}


def test_a_ratio_within_its_noise_has_no_verdict():
    from etops.bench.result import fmt_ratio, verdict

    assert verdict(_summary(1.05, 0.95, 1.2)) == "no verdict" and fmt_ratio(_summary(1.05, 0.95, 1.2)) == "no verdict"
    assert verdict(_summary(0.8, 0.6, 1.0)) == "no verdict"  # the spread (±0.2) reaches 1
    assert verdict(_summary(0.5, 0.3, 0.75)) == "faster"  # ±0.225 against a difference of 0.5
    assert verdict(_summary(2.0, 1.9, 2.1)) == "slower" and fmt_ratio(_summary(2.0, 1.9, 2.1)) == "2.00 ±0.10"
    assert verdict(_summary(0.5, 0.45, 0.6)) == "faster"
    assert verdict(_summary(1.9, 0.8, 2.4)) == "no verdict"  # ±0.8 < 0.9, but a quarter of the rounds below 1
    assert verdict(None) is None and fmt_ratio(None) == "-"


def test_a_row_whose_ratios_disagree_says_which_answers():
    from etops.bench.result import BenchResult, row_verdict

    s = _summary
    agree = {"ratio": s(2.0, 1.9, 2.1), "kernel_ratio": s(1.5, 1.4, 1.6)}
    assert row_verdict(agree) == "ET kernel slower"
    disagree = {"ratio": s(0.5, 0.45, 0.55), "kernel_ratio": s(1.5, 1.4, 1.6)}
    text = row_verdict(disagree)
    assert text.startswith("ET kernel slower") and "the kernel ratio answers" in text and "says faster" in text
    assert row_verdict({"ratio": s(0.5, 0.45, 0.55), "kernel_ratio": None}) == "ET faster per call"
    assert row_verdict({"ratio": s(1.0, 0.9, 1.1), "kernel_ratio": None}) == "no verdict"
    row = {"kernel": "k", "dtype": "float32", "size": 1, "size_label": "1", "error": None, "etops": s(1, 1, 1),
           "aten": s(1, 1, 1), "agree": True, **disagree}
    result = BenchResult([row], {"torch": 1, "executorch": 1}, {})
    for rendering in (result.text(), result.markdown()):
        assert "kernel ratio: the same with each side's zero-size call subtracted" in rendering
        assert "it answers 'which kernel is faster'" in rendering and "no verdict" in rendering
        assert "the kernel ratio answers" in rendering
