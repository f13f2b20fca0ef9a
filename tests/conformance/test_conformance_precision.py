"""Precision against wrongness: a floating-point mismatch is judged against a
higher-precision reference (ATen on the inputs widened to float64/complex128):
within ATen's own error, a precision loss within the dtype's tolerance, or wrong."""

from __future__ import annotations

import torch

from etops import conformance
from etops.conformance.effective import judge, wrong_by_ulps
from etops.conformance.runner import CaseResult
from etops.conformance.values import AS_PRECISE, PRECISION_LOSS, WRONG, precision_verdict, reported_errors

ADD = torch.ops.aten.add.Tensor
MM = torch.ops.aten.mm.default


def test_float16_rounding_no_worse_than_atens_own_is_within_atens_error_and_worse_is_not():
    """The label says what the numbers beside it say: within ATen's error only when
    ExecuTorch's error is no larger than ATen's (a float16 sum off by 6x ATen's
    error, though within one ulp of the largest element, is a precision loss)."""
    torch.manual_seed(0)
    x, y = torch.randn(8, 8, dtype=torch.float16), torch.randn(8, 8, dtype=torch.float16)
    expected = ADD(x, y, alpha=-3.125)
    exact = (x.double() - 3.125 * y.double())
    rounded_otherwise = torch.where(exact > 0, exact.half(), expected)  # ATen's rounding where exact > 0, itself elsewhere
    verdict, et_err, aten_err = precision_verdict(ADD, (x, y), {"alpha": -3.125}, rounded_otherwise, expected)
    assert verdict == AS_PRECISE and et_err <= aten_err
    one_ulp_off = expected + torch.sign(exact).half() * torch.finfo(torch.float16).eps * expected.abs().max() * 0.75
    verdict, et_err, aten_err = precision_verdict(ADD, (x, y), {"alpha": -3.125}, one_ulp_off.half(), expected)
    assert et_err > aten_err and verdict == PRECISION_LOSS


def test_an_ill_conditioned_product_off_as_much_as_atens_is_not_wrong():
    torch.manual_seed(0)
    a = torch.randn(6, 40) * 1e4
    b = torch.randn(40, 6) * 1e4
    expected = MM(a, b)
    other_order = (a.double() @ b.double()).float() * (1 + 2e-7)  # float32 rounding of its own
    verdict, _, _ = precision_verdict(MM, (a, b), {}, other_order, expected)
    assert verdict in (AS_PRECISE, PRECISION_LOSS)


def test_float64_computed_in_float32_is_wrong_and_so_is_an_offset():
    x = torch.linspace(0.1, 3.0, 12, dtype=torch.float64).reshape(3, 4)
    expected = torch.ops.aten.sum.dim_IntList(x, [1])
    in_float32 = torch.ops.aten.sum.dim_IntList(x.float(), [1]).double()
    # within torch.testing's float64 tolerance, and about 10^8 ulps of float64: a float32 computation
    torch.testing.assert_close(in_float32, expected, rtol=1e-6, atol=1e-6)
    why = wrong_by_ulps(torch.ops.aten.sum.dim_IntList, (x, [1]), {}, in_float32, expected)
    assert why and why.endswith(": computes float64 in float32") and "(longdouble; ATen: " in why
    assert wrong_by_ulps(torch.ops.aten.sum.dim_IntList, (x, [1]), {}, expected, expected) is None
    result = CaseResult("k", "aten::sum.dim_IntList", "sum", "float64", 0, 0)
    assert judge(result, torch.ops.aten.sum.dim_IntList, (x, [1]), {}, in_float32, expected, None) == why
    assert (result.verdict, result.reason, result.reference) == (WRONG, "computes float64 in float32", "longdouble")
    assert result.ulps > 1e6 and result.aten_ulps < 4
    assert precision_verdict(torch.ops.aten.sum.dim_IntList, (x, [1]), {}, expected + 0.5, expected)[0] == WRONG
    # garbage where the reference is zero, a non-finite value, an integer difference: wrong
    zeros = torch.zeros(3, 5)
    assert precision_verdict(MM, (torch.ones(3, 0), torch.ones(0, 5)), {}, zeros + 1e-6, zeros)[0] == WRONG
    assert precision_verdict(ADD, (x, x), {}, torch.full_like(x, float("inf")), ADD(x, x))[0] == WRONG
    i = torch.arange(4)
    assert precision_verdict(ADD, (i, i), {}, ADD(i, i) + 1, ADD(i, i))[0] == WRONG


def test_a_sweep_finds_float64_kernels_computing_in_float32():
    """ExecuTorch's sum and remainder on float64 compute in float32 (an error of
    about 10^8 ulps of float64, as the float32 computation's): wrong, with that
    reason; remainder on int64 rounds the division toward zero: wrong."""
    report = conformance.run(["aten::sum.IntList_out", "aten::remainder.Tensor_out"], dtypes=["float64", "int64"],
                             opinfo_filter={"sum", "remainder"}, progress=False)
    verdicts = {(c.kernel, c.dtype, c.verdict, c.reason) for c in report.details if c.status == "mismatch"}
    assert ("aten::sum.IntList_out", "float64", WRONG, "computes float64 in float32") in verdicts
    assert ("aten::remainder.Tensor_out", "float64", WRONG, "computes float64 in float32") in verdicts
    assert ("aten::remainder.Tensor_out", "int64", WRONG, None) in verdicts
    for c in report.details:
        if c.status == "mismatch" and c.dtype == "float64":
            assert c.ulps > 1e6 and c.aten_ulps < 16, c
    sums = report.tallies[("aten::sum.IntList_out", "float64")].ulps
    assert sums["worst"] > 1e6 and sums["aten"] < 16 and sums["longdouble"] == sums["cases"] > 0


def test_the_errors_reported_are_those_of_the_message():
    a = torch.tensor([1.0, 2.0, 10.0078125], dtype=torch.float16)
    e = torch.tensor([1.0, 2.0009765625, 10.0], dtype=torch.float16)
    message = ("Tensor-likes are not close!\n\nMismatched elements: 1 / 3 (33.3%)\nGreatest absolute difference: 0.0009765625 at "
               "index (1,) (up to 1e-05 allowed)\nGreatest relative difference: 0.00048804283142089844 at index (1,) (up to 0.001 allowed)")
    assert reported_errors(message, a, e) == (0.0009765625, 0.00048804283142089844)
    assert reported_errors("shape [2] vs [3]", a, e)[0] == 0.0078125


def test_a_findings_figures_are_those_of_the_input_it_shows(tmp_path):
    """The finding's max abs error is what its own reproducer (the shrunk input)
    reports, not the figure of the larger case it was found on."""
    import re
    import subprocess
    import sys

    from etops.conformance.clusters import build

    report = conformance.run(["aten::add.out"], dtypes=["float16"], opinfo_filter={"add"}, progress=False, report_dir=tmp_path)
    clusters = [c for c in build(report, report_dir=tmp_path) if c.kind == "mismatch"]
    assert clusters
    for c in clusters:
        run = subprocess.run([sys.executable, c.reproducer], capture_output=True, text=True, timeout=120)
        assert run.returncode == 1, run.stdout + run.stderr
        greatest = re.search(r"Greatest absolute difference: (\S+) at", run.stdout + run.stderr)
        assert greatest and float(greatest.group(1)) == c.to_json()["max_abs_error"]
        assert f"max abs err {float(greatest.group(1)):.3g}" in c.summary
