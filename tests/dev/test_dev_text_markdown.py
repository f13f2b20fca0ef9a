"""The terminal text and the ``--markdown`` comment of an ``etops dev`` round say the
same things: the verdict, every finding, every upstream test regression, item by
item; the markdown names no absolute path (the checkout's files relative to it)."""

from __future__ import annotations

import re

from etops.conformance.clusters import group
from etops.conformance.runner import CaseResult
from etops.dev.verdict import Finding
from etops.dev.report import DevResult, FileResult

CHECKOUT = "/home/dev/src/executorch"
REPORTS = "/home/dev/work/etops-dev"


def _finding(inputs: str, category: str, in_base: bool, reproducer: str) -> Finding:
    case = CaseResult("aten::mul.out", "aten::mul", "mul", "float32", 0, 0, "mismatch",
                      message="Tensor-likes are not close!", inputs=inputs, verdict="wrong")
    [cluster] = group([case])
    cluster.reproducer = reproducer
    cluster.summary = f"mul.out gives wrong values on float32 inputs; smallest input: {inputs}"
    return Finding(cluster, category, in_base, "git")


def _round() -> DevResult:
    f = FileResult(f"{CHECKOUT}/kernels/portable/cpu/op_mul.cpp", ops=["aten::mul.out"], replaced=["aten::mul.out"],
                   checkout=CHECKOUT, yamls=[f"{CHECKOUT}/kernels/portable/functions.yaml"],
                   build={"seconds": 2.5, "compiled": True, "flags": ["-O3", "-DNDEBUG"]},
                   base={"kind": "git", "describe": "the file at HEAD (0123456789)"},
                   helpers=[f"{CHECKOUT}/kernels/portable/cpu/util/mini_times.cpp"],
                   report_dir=f"{REPORTS}/op_mul")
    f.checked = True
    f.cases, f.base_cases, f.sources = {"aten::mul.out": 12}, {"aten::mul.out": 12}, {"aten::mul.out": ["mul"]}
    f.findings = [_finding("Tensor[5, 1]:float32, Tensor[5]:float32", "wrong", False, f"{REPORTS}/op_mul/findings/000_wrong.py"),
                  _finding("Tensor[2]:float32, Tensor[2]:float32", "wrong", True, f"{REPORTS}/op_mul/findings/001_wrong.py")]
    regressions = [{"name": "OpMulOutTest.BroadcastA", "status": "failed",
                    "message": f"{CHECKOUT}/kernels/test/op_mul_test.cpp:120: Failure\nValue of: out"},
                   {"name": "OpMulOutTest.BroadcastB", "status": "crashed", "message": "SIGSEGV"}]
    f.gtest = {"base": "git", "wall_seconds": 1.5, "regressions": regressions,
               "files": [{"file": "kernels/test/op_mul_test.cpp", "counts": {"passed": 40, "failed": 2},
                          "kernel_set": "portable", "regressions": regressions, "base_failing": ["OpMulOutTest.Old"]}],
               "not_run": [{"file": "kernels/portable/test/op_mul_test.cpp",
                            "why": f"does not build: {CHECKOUT}/kernels/portable/test/op_mul_test.cpp:3: error"}]}
    f.timing = []
    return DevResult([f], 12.5, [], ["--changed HEAD: 1 changed file, 0 kernel files, 1 helper source, 0 headers"])


def test_the_markdown_holds_the_verdict_findings_and_gtest_regressions_of_the_text():
    result = _round()
    text, md = result.text(), result.markdown()
    assert result.exit_code == 1
    # the verdict: the text's last line is the markdown's headline
    verdict = text.splitlines()[-1]
    assert verdict.startswith("verdict: the edit introduces 3 findings [exit 1")
    assert md.splitlines()[0] == f"### etops dev {verdict}"
    # each finding, in the same group
    text_findings = [line.strip() for line in text.splitlines() if line.startswith("    ") and "recorded case" in line]
    md_findings = [line[2:] for line in md.splitlines() if line.startswith("- ") and "recorded case" in line]
    assert len(text_findings) == 2 and md_findings == text_findings
    assert md.index("**New findings (1)**") < md.index(text_findings[0]) < md.index("**Also in base (1)**") < md.index(text_findings[1])
    # each upstream test regression, the checkout's paths relative to it
    text_regressions = [line.strip() for line in text.splitlines() if line.strip().startswith("finding: ")]
    md_regressions = [line[2:] for line in md.splitlines() if line.startswith("- finding: ")]
    assert len(text_regressions) == 2
    assert md_regressions == [r.replace(CHECKOUT + "/", "") for r in text_regressions]
    assert "kernels/test/op_mul_test.cpp:120: Failure" in md_regressions[0]
    assert "OpMulOutTest.Old" in md and "40 passed, 2 failed" in md
    # each upstream test file not run, with why, in both
    assert "gtest kernels/portable/test/op_mul_test.cpp not run: does not build:" in text
    assert "- `kernels/portable/test/op_mul_test.cpp`: does not build: kernels/portable/test/op_mul_test.cpp:3: error" in md
    # paths: relative to the checkout, reproducers under the report folder's name
    assert "`kernels/portable/cpu/op_mul.cpp`" in md and "`kernels/portable/cpu/util/mini_times.cpp`" in md
    assert "`etops-dev/op_mul/findings/000_wrong.py`" in md
    assert not re.search(r"(^|[\s`(\[])/\w", md, re.M), md


def test_a_file_that_did_not_build_names_its_diagnostics_relative_to_the_checkout():
    f = FileResult(f"{CHECKOUT}/kernels/portable/cpu/op_mul.cpp", checkout=CHECKOUT,
                   error=f"{CHECKOUT}/kernels/portable/cpu/op_mul.cpp:3:1: error: expected ';'\n"
                         "(build folder /root/.cache/etops/0123abcd)")
    result = DevResult([f], 1.0)
    text, md = result.text(), result.markdown()
    assert md.splitlines()[0] == f"### etops dev {text.splitlines()[-1]}" and "[exit 2" in md.splitlines()[0]
    assert "kernels/portable/cpu/op_mul.cpp:3:1: error: expected ';'" in md
    assert not re.search(r"(^|[\s`(\[])/\w", md, re.M), md


def test_a_change_touching_no_kernel_file_says_so_in_both():
    result = DevResult([], 0.5, [], ["--changed HEAD: 1 changed file, 0 kernel files, 0 helper sources, 1 header"], "HEAD")
    assert result.verdict().startswith("verdict: the change since HEAD touches no kernel file [exit 2")
    assert result.markdown().splitlines()[0] == "### etops dev " + result.text().splitlines()[-1]
