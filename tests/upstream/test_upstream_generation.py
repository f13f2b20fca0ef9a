"""The tests etops report upstream writes, by kind of finding (no kernel runs: the
specs come from ATen's calls): a float64 sum accumulating in float32, a wrong
integer value, an abort where ATen refuses the inputs too, a refusal; their names,
expectations, tolerances and issue text; bad inputs named."""

from __future__ import annotations

import json

import pytest
import torch

from etops.conformance.case import CaseResult
from etops.upstream.cpp import test_name as name_of
from etops.upstream.cpp import test_source as source_of
from etops.upstream.issue import issue_text
from etops.upstream.source import read_report
from etops.upstream.spec import FAILURE, VALUES, NotTestable, test_spec as spec_of

SUM = torch.ops.aten.sum.dim_IntList


def _case(kernel, dtype, kind, **figures):
    return CaseResult(kernel, "", "x", dtype, 0, 0, kind, **figures)


def _finding(kernel, kind, category):
    return {"kernel": kernel, "kind": kind, "category": category}


def test_a_float64_sum_in_float32_is_a_close_expectation_at_the_verdicts_bound():
    args = [torch.tensor([1e8, 1.0, -1e8], dtype=torch.float64), [0]]
    case = _case("aten::sum.IntList_out", "float64", "mismatch", ulps=4.5e15, aten_ulps=0.0, reason="computes float64 in float32")
    spec = spec_of(_finding("aten::sum.IntList_out", "mismatch", "wrong"), case, SUM, args, {})
    assert spec.expect == VALUES and spec.shipped == "value" and spec.reference == "longdouble"
    assert spec.tolerance == [(0.0, 1024 * torch.finfo(torch.float64).eps)]  # 16 x ATen's 0 ulps + 1024, at the scale 1.0
    name = name_of(spec)
    assert name == "Float64AccumulatesInFloat64"
    text, ranges = source_of(spec, "OpSumOutTest", name, "using executorch::aten::Tensor;\n")
    assert text.startswith("TEST_F(OpSumOutTest, Float64AccumulatesInFloat64) {\n")
    assert "torch::executor::testing::TensorFactory<executorch::aten::ScalarType::Double> tf_float64;" in text
    assert "  Tensor self = tf_float64.make({3}, {100000000.0, 1.0, -100000000.0});" in text  # Tensor: the file's using
    assert "torch::executor::aten::sum_outf(\n      context_,\n      /*self=*/self,\n      /*dim=*/executorch::aten::ArrayRef<int64_t>(dim, 1)," in text
    assert "/*keepdim=*/false,\n      /*dtype=*/std::nullopt,\n      out);" in text
    assert "tf_float64.make({}, {1.0})" in text and "/*atol=*/0x1p-42);" in text
    lines = text.splitlines()
    [(first, last)] = ranges
    assert lines[first - 1].strip() == "EXPECT_TENSOR_CLOSE_WITH_TOL(" and lines[last - 1].endswith(");")


def test_a_wrong_integer_value_is_an_exact_expectation():
    func = torch.ops.aten.remainder.Tensor
    args = [torch.tensor(-7, dtype=torch.int8), torch.tensor(3, dtype=torch.int64)]
    spec = spec_of(_finding("aten::remainder.Tensor_out", "mismatch", "wrong"), _case("aten::remainder.Tensor_out", "int8", "mismatch"),
                   func, args, {})
    assert spec.tolerance is None and name_of(spec) == "Int8ZeroDimMatchesReference"
    text, ranges = source_of(spec, "OpRemainderOutTest", name_of(spec))
    assert "  EXPECT_TENSOR_EQ(out, tf_int64.make({}, {2}));" in text  # two 0-d operands: int64 wins
    assert "tf_int64.make({}, {3})" in text and len(ranges) == 1


def test_an_abort_on_inputs_aten_refuses_expects_a_kernel_failure():
    func = torch.ops.aten.embedding.default
    args = [torch.tensor([[1.0, 2.0]]), torch.tensor([0.0])]  # float indices: ATen refuses, the kernel aborts
    spec = spec_of(_finding("aten::embedding.out", "abort", "abort"), _case("aten::embedding.out", "float32", "abort"), func, args, {})
    assert spec.expect == FAILURE and spec.shipped == "abort"
    assert name_of(spec) == "Float32FailsInsteadOfAborting"
    text, ranges = source_of(spec, "OpEmbeddingOutTest", name_of(spec))
    assert "  ET_EXPECT_KERNEL_FAILURE(\n      context_,\n      torch::executor::aten::embedding_outf(" in text
    assert "EXPECT_TENSOR" not in text and len(ranges) == 1


def test_an_abort_on_inputs_aten_accepts_expects_atens_values():
    args = [torch.tensor(1.5), [0], True]
    spec = spec_of(_finding("aten::sum.IntList_out", "abort", "abort"), _case("aten::sum.IntList_out", "float32", "abort"), SUM, args, {})
    assert spec.expect == VALUES and spec.tolerance == [(1.3e-6, 1e-5)]  # torch.testing's float32 default (no case tolerance)
    assert name_of(spec) == "Float32ZeroDimDoesNotAbort"


def test_a_refusal_expects_the_values_and_a_context_left_ok():
    func = torch.ops.aten.neg.default
    spec = spec_of(_finding("aten::neg.out", "unsupported", "unsupported"),
                   _case("aten::neg.out", "float64", "unsupported", atol=1e-7, rtol=1e-7), func, [torch.tensor([2.0], dtype=torch.float64)], {})
    assert spec.shipped == "refusal" and name_of(spec) == "Float64IsSupported"
    assert spec.tolerance == [(1e-7, 1e-7)]


def test_findings_without_a_test_form_are_named():
    with pytest.raises(NotTestable, match="a guarded finding"):
        spec_of(_finding("aten::sum.IntList_out", "guarded", "guarded"), None, SUM, [], {})
    with pytest.raises(NotTestable, match="torch has no operator aten::nope.out"):
        spec_of(_finding("aten::nope.out", "mismatch", "wrong"), None, SUM, [], {})


def test_the_issue_text_says_what_a_maintainer_needs():
    args = [torch.tensor([1e8, 1.0, -1e8], dtype=torch.float64), [0]]
    case = _case("aten::sum.IntList_out", "float64", "mismatch", ulps=4.5e15, aten_ulps=0.0, reason="computes float64 in float32")
    spec = spec_of(_finding("aten::sum.IntList_out", "mismatch", "wrong"), case, SUM, args, {})
    text = issue_text(spec, "Float64AccumulatesInFloat64", "TEST_F(...)\n", where="kernels/optimized/cpu/op_sum.cpp:132",
                      test_file="kernels/test/op_sum_test.cpp", versions={"executorch": "1.5.1", "torch": "2.13"},
                      computed="[] [0.0]", reproducer="etops gtest ...", summary="sum.IntList_out is wrong")
    assert text.startswith("# sum.IntList_out: computes float64 in float32 (float64)\n")
    for part in ("kernels/optimized/cpu/op_sum.cpp:132", "[3] float64 [100000000.0, 1.0, -100000000.0]", "- `out`: [] float64 [1.0] (rtol 0, atol 2.27e-13)",
                 "The shipped kernel: [] [0.0]", "effective precision: that of float32", "executorch 1.5.1",
                 "accumulation type", "```cpp\nTEST_F(...)\n```"):
        assert part in text, part


def test_a_report_that_is_not_one_is_named(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"kernels": []}))
    with pytest.raises(ValueError, match="argument 'report': .*no 'findings' list"):
        read_report(bad)
    with pytest.raises(ValueError, match="argument 'report': .*not a readable JSON"):
        read_report(tmp_path / "missing.json")


def test_each_out_gets_the_verdicts_bound_at_its_own_scale():
    func = torch.ops.aten.native_layer_norm.default
    x = torch.tensor([[1.0, 3.0]], dtype=torch.float64)
    case = _case("aten::native_layer_norm.out", "float64", "mismatch", ulps=1e8, aten_ulps=0.0, reason="computes float64 in float32")
    spec = spec_of(_finding("aten::native_layer_norm.out", "mismatch", "wrong"), case, func, [x, [2], None, None, 1e-5], {})
    assert spec.outs == ["out0", "out1", "out2"]
    eps = torch.finfo(torch.float64).eps
    scales = [float(spec.values[o].abs().max()) for o in spec.outs]  # ~1 (normalized), 2 (mean), ~1 (rstd)
    assert spec.tolerance == [(0.0, 1024 * eps * s) for s in scales]
    text, ranges = source_of(spec, "OpNativeLayerNormTest", name_of(spec))
    assert name_of(spec) == "Float64ComputesInFloat64" and len(ranges) == 3
    assert "/*weight=*/std::nullopt," in text and "/*eps=*/0x1.4f8b588e368f1p-17," in text


def test_an_etops_dev_report_gives_each_files_findings(tmp_path):
    dev = tmp_path / "dev.json"
    finding = {"kernel": "aten::sum.IntList_out", "kind": "mismatch", "category": "wrong", "signature": "values differ: wrong",
               "example": "aten::sum.IntList_out|sum|float64|s3c1"}
    dev.write_text(json.dumps({"files": [{"path": "op_sum.cpp", "ops": ["aten::sum.IntList_out", "aten::sum.out"],
                                          "findings": [finding]}]}))
    [f] = read_report(dev)
    case = f.cluster.cases[0]
    assert (case.opinfo, case.dtype, case.sample, case.call) == ("sum", "float64", 3, 1)
    assert f.selected == ["aten::sum.IntList_out", "aten::sum.out"] and f.versions["executorch"]
