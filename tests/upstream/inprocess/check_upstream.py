"""``etops report upstream`` end to end on a miniature checkout (upstream_mini.py):
the tests written for a planted float64-in-float32 kernel and for a kernel that
aborts on a 0-d input are built and run with etops' gtest machinery: each fails on
the planted kernel for the finding's reason (a failed expectation of its own, an
abort) and passes on ATen's kernel; with the fixed kernel in place (the same
checkout's source, fixed, built by etops.custom) each passes, so the report drops
it; --apply appends the verified tests to the checkout's file; the generated code compiles with its warnings as errors (-Wall
-Werror), a warning in it fails the build."""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

import pytest
import torch

import etops
import upstream_mini
from etops.conformance.case import CaseResult
from etops.conformance.clusters import Cluster
from etops.gtest import find_googletest
from etops.upstream.report import UpstreamReport, apply, patch, written_test
from etops.upstream.source import Finding
from etops.upstream.verify import MARKER, run_tests

pytestmark = pytest.mark.skipif(find_googletest(None) is None, reason="no googletest (apt-get install googletest)")


def _finding(kind: str, category: str, dtype: str, **figures) -> Finding:
    case = CaseResult(upstream_mini.OP, "aten::sum.dim_IntList", "sum", dtype, 0, 0, kind, **figures)
    data = {"kernel": upstream_mini.OP, "kind": kind, "category": category, "summary": f"planted {category}"}
    return Finding(data, Cluster(upstream_mini.OP, kind, "", None, [case]), {"executorch": "mini"})


ACCUMULATION = (_finding("mismatch", "wrong", "float64", ulps=4.5e15, aten_ulps=0.0, reason="computes float64 in float32"),
                (torch.ops.aten.sum.dim_IntList, [torch.tensor([1e8, 1.0, -1e8], dtype=torch.float64), [0]], {}))
ABORT = (_finding("abort", "abort", "float32"), (torch.ops.aten.sum.dim_IntList, [torch.tensor(1.5), [0], True], {}))


@pytest.fixture(scope="module")
def mini():
    root = upstream_mini.write(Path(tempfile.gettempdir()) / f"etops-test-upstream-{os.getuid()}" / "checkout")
    with etops.override(upstream_mini.OP, upstream_mini.KERNEL, function="sum_dim_out"):
        yield root


def _written(root):
    taken: dict = {}
    entries = [written_test(f, call, root, taken) for f, call in (ACCUMULATION, ABORT)]
    assert all(e.generated is not None for e in entries), [e.why_not for e in entries]
    return entries


def test_generated_tests_fail_on_the_planted_kernel_and_pass_on_atens(mini):
    entries = _written(mini)
    assert [e.generated.name for e in entries] == ["Float64AccumulatesInFloat64", "Float32ZeroDimDoesNotAbort"]
    run_tests([e.generated for e in entries], mini, mini.parent / "work")
    accumulation, abort = entries
    assert accumulation.generated.verdict == "verified", accumulation.generated.results
    assert accumulation.generated.results["shipped"].status == "failed"
    assert accumulation.generated.results["reference"].status == "passed"
    assert abort.generated.verdict == "verified", abort.generated.results
    assert abort.generated.results["shipped"].signal == signal.SIGABRT
    assert abort.generated.results["reference"].status == "passed"
    report = UpstreamReport(mini.resolve(), entries)
    text = patch(report)
    assert "+TEST_F(OpSumOutTest, Float64AccumulatesInFloat64) {" in text and "+TEST_F(OpSumOutTest, Float32ZeroDimDoesNotAbort) {" in text
    target = mini.parent / "applied"
    upstream_mini.write(target)
    [changed] = apply(report, target)
    assert MARKER in changed.read_text() and changed.read_text().startswith((target / "kernels/test/op_sum_test.cpp").read_text()[:50])
    assert apply(report, target) == []  # applied once


def test_a_warning_in_generated_code_fails_its_build(mini):
    [entry] = [written_test(*ABORT, mini)]
    entry.generated.text = entry.generated.text.replace("{\n", "{\n  int unused_here = 0;\n", 1)
    run_tests([entry.generated], mini, mini.parent / "work-warning", reference=False)
    assert entry.generated.verdict.startswith("does not build: ") and "unused_here" in entry.generated.verdict


def test_a_test_that_passes_on_the_shipped_kernel_is_dropped(mini):
    entries = _written(mini)
    with etops.override(upstream_mini.OP, upstream_mini.FIXED_KERNEL, function="sum_dim_out"):
        run_tests([e.generated for e in entries], mini, mini.parent / "work", reference=False)
    assert [e.generated.verdict for e in entries] == ["passes on the shipped kernel"] * 2
    assert [e.outcome for e in entries] == ["dropped: passes on the shipped kernel"] * 2
