"""The fast subset `make test` runs: a fixed list of kernels at two dtypes, every
OpInfo that reaches them, in two worker processes (aten::sum.IntList_out aborts on
some samples). It checks the machinery on real kernels; what the kernels get wrong
is reported (printed with -s), not asserted away."""

from __future__ import annotations

from etops import conformance

FAST_KERNELS = [
    "aten::add.out",
    "aten::mul.out",
    "aten::relu.out",
    "aten::convolution.out",
    "aten::mm.out",
    "aten::sum.IntList_out",
    "aten::index.Tensor_out",
    "aten::cat.out",
    "aten::where.self_out",
    "aten::permute_copy.out",
]
FAST_DTYPES = ["float32", "int64"]


def test_fast_subset(tmp_path):
    report = conformance.run(FAST_KERNELS, dtypes=FAST_DTYPES, progress=False, report_dir=tmp_path, isolated=True, jobs=2)
    print()
    print(conformance.terminal(report))
    assert report.coverage()["reached"] == len(FAST_KERNELS), report.coverage()["unreached"]
    for row in report.kernel_rows():
        assert row["cases"] > 0
        assert set(row["dtypes"]) <= set(FAST_DTYPES)
    totals = report.totals()
    assert totals["cases"] == sum(totals[s] for s in conformance.STATUSES) > 100
    for case in report.cases("mismatch") + report.cases("crash"):
        assert case.reproducer is not None
