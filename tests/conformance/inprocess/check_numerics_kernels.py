"""Kernels of our own through the judge (run in a fresh interpreter: they register
kernels in ExecuTorch's process-wide registry). A float64 kernel accumulating in
float32 is wrong, "computes float64 in float32", though OpInfo's tolerance passes
it; a float32 variance in one pass (E[x^2] - E[x]^2) passes the samples as they
are and is wrong on the numerics axis' offset; the same kernels done right, and
ATen's own kernel standing in for aten::sum, give no such finding."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

import etops
import etops.testing
from etops import custom
from etops.conformance.numerics import AXIS_TRANSFORMS
from etops.conformance.values import WRONG

_MEMO: dict = {}

#: a sum over the last dim, accumulated in ACC (replaced per variant)
ROWSUM = r"""
Tensor& rowsum_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  ET_KERNEL_CHECK(ctx, x.dim() >= 1 && x.scalar_type() == out.scalar_type(), InvalidArgument, out);
  const ssize_t n = x.size(x.dim() - 1);
  ET_KERNEL_CHECK(ctx, n > 0 && out.numel() * n == x.numel(), InvalidArgument, out);
  ET_SWITCH_FLOAT_TYPES(x.scalar_type(), ctx, "rowsum.out", CTYPE, [&]() {
    const CTYPE* in = x.const_data_ptr<CTYPE>();
    CTYPE* o = out.mutable_data_ptr<CTYPE>();
    for (ssize_t r = 0; r < out.numel(); r++) {
      ACC acc = 0;
      for (ssize_t i = 0; i < n; i++) acc += static_cast<ACC>(in[r * n + i]);
      o[r] = static_cast<CTYPE>(acc);
    }
  });
  return out;
}
"""

#: the population variance over the last dim of float32 rows: ONE_PASS 1 is the
#: naive E[x^2] - E[x]^2, 0 two passes (the mean first)
ROWVAR = r"""
Tensor& rowvar_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  ET_KERNEL_CHECK(ctx, x.dim() >= 1 && x.scalar_type() == ScalarType::Float && out.scalar_type() == ScalarType::Float,
                  InvalidArgument, out);
  const ssize_t n = x.size(x.dim() - 1);
  ET_KERNEL_CHECK(ctx, n > 0 && out.numel() * n == x.numel(), InvalidArgument, out);
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t r = 0; r < out.numel(); r++) {
    const float* row = in + r * n;
    float sum = 0, squares = 0;
    for (ssize_t i = 0; i < n; i++) { sum += row[i]; squares += row[i] * row[i]; }
    const float mean = sum / n;
    if (ONE_PASS) {
      o[r] = squares / n - mean * mean;
    } else {
      float deviations = 0;
      for (ssize_t i = 0; i < n; i++) deviations += (row[i] - mean) * (row[i] - mean);
      o[r] = deviations / n;
    }
  }
  return out;
}
"""


@pytest.fixture(scope="module", autouse=True)
def cache():
    custom.set_cache_dir(Path(tempfile.mkdtemp(prefix="etops-kernel-cache-")))


def _op(name: str, source: str, function: str, **defines) -> str:
    """ns::name(Tensor x) -> Tensor (the last dim reduced) made once; its out kernel's name."""
    if name not in _MEMO:
        text = "".join(f"#define {k} {v}\n" for k, v in defines.items()) + source
        _MEMO[name] = etops.custom_op(f"numlib::{name}(Tensor x) -> Tensor", text, function=function,
                                      shape=lambda x: x.shape[:-1])
    return f"numlib::{name}.out"


def _rows(dtype):
    torch.manual_seed(0)
    return [(torch.rand(3, 64, dtype=dtype) + 0.5,), (torch.randn(4, 8, dtype=dtype),)]


def _mismatches(result):
    return [d for d in result.details if d.status == "mismatch"]


def _run(cases, hooks=None):
    out = []
    for case in cases:
        case.hooks = hooks
        out.append(case.run())
    return out


def test_a_float64_sum_accumulated_in_float32_is_wrong_not_precision_loss():
    kernel = _op("rowsum32", ROWSUM, "rowsum_out", ACC="float")
    [result] = _run(etops.testing.reference_cases(kernel, lambda x: x.sum(-1), _rows, dtypes=["float64"]))
    found = _mismatches(result)
    assert found, "a float32 accumulator in a float64 kernel went unnoticed"
    for d in found:
        assert (d.verdict, d.reason) == (WRONG, "computes float64 in float32"), d
        assert d.ulps > 1e6, d.ulps  # about 10^8 ulps of float64, not rounding
    tally = result.tallies[(kernel, "float64")]
    assert tally.ulps["worst"] > 1e6


def test_the_same_sum_accumulated_in_double_passes_with_a_few_ulps():
    kernel = _op("rowsum64", ROWSUM, "rowsum_out", ACC="double")
    [result] = _run(etops.testing.reference_cases(kernel, lambda x: x.sum(-1), _rows, dtypes=["float64"]))
    assert not _mismatches(result), result.details
    assert result.tallies[(kernel, "float64")].ulps["worst"] < 64


def _var_cases(kernel):
    return etops.testing.reference_cases(kernel, lambda x: torch.var(x, -1, correction=0), _rows, dtypes=["float32"])


def test_a_one_pass_variance_passes_opinfo_like_samples_and_the_numerics_axis_catches_it():
    kernel = _op("rowvar_naive", ROWVAR, "rowvar_out", ONE_PASS=1)
    [plain] = _run(_var_cases(kernel))
    assert not _mismatches(plain), "values near zero: the one-pass variance looks right"
    [offset] = _run(_var_cases(kernel), AXIS_TRANSFORMS["offset"])
    found = _mismatches(offset)
    assert found and all(d.verdict == WRONG for d in found), offset.details


def test_a_two_pass_variance_is_wrong_only_where_its_squares_overflow():
    """Cancellation, denormals and long rows: right. Values near sqrt(max): its
    float32 squares overflow to inf where ATen's result is finite (the "huge"
    transform is there for that)."""
    kernel = _op("rowvar_two_pass", ROWVAR, "rowvar_out", ONE_PASS=0)
    for name, hooks in AXIS_TRANSFORMS.items():
        [result] = _run(_var_cases(kernel), hooks)
        wrong = [d for d in _mismatches(result) if d.verdict == WRONG]
        if name == "huge":
            assert wrong and all(d.max_abs_error == float("inf") for d in wrong), result.details
        else:
            assert not wrong, (name, result.details)


SUM_SCHEMA = ("numlib::{name}.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None, "
              "Tensor(a!) out) -> Tensor(a!)")


def _sum_kernel(name: str, fn) -> str:
    if name not in _MEMO:
        def kernel(self, dim, keepdim=False, dtype=None, out=None):
            return fn(self, dim, keepdim, dtype)
        _MEMO[name] = etops.register_python_kernel(f"numlib::{name}.IntList_out", kernel, SUM_SCHEMA.format(name=name))
    return f"numlib::{name}.IntList_out"


def _sum_cases(kernel):
    return etops.testing.opinfo_cases(kernel, op="sum", aten="aten::sum.dim_IntList", dtypes=["float64"])


def test_atens_own_sum_through_the_same_judge_has_no_finding_on_any_transform():
    """The control: ATen's kernel standing in for aten::sum on OpInfo's float64
    samples, as they are and on every transform of the numerics axis."""
    kernel = _sum_kernel("aten_sum", lambda x, dim, keepdim, dtype: torch.sum(x, dim, keepdim, dtype=dtype))
    for hooks in [None, *AXIS_TRANSFORMS.values()]:
        for result in _run(_sum_cases(kernel), hooks):
            assert result.tallies and not _mismatches(result), (hooks, result.details)


def test_a_sum_in_float32_on_opinfo_samples_is_computes_float64_in_float32():
    kernel = _sum_kernel("sum_in_float32", lambda x, dim, keepdim, dtype: torch.sum(x.float(), dim, keepdim).double())
    found = [d for r in _run(_sum_cases(kernel)) for d in _mismatches(r)]
    assert found and all((d.verdict, d.reason) == (WRONG, "computes float64 in float32") for d in found), found
