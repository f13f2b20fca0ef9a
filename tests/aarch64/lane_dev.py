"""The aarch64 lane's `etops dev` (make test-aarch64, docs/aarch64.md): a kernel
file with ARM-only code (tests/dev/minigelu.py's op_gelu.cpp, a NEON loop inside
``#if defined(__aarch64__)``) built against the aarch64 executorch with the root's
g++ and judged there: unmodified, the edit introduces no finding (exit 0); a bug
planted in the aarch64 branch is a new finding (exit 1), where on x86_64 it exits 0
(tests/dev/test_dev_arm_only_code.py). Run in the lane's one pytest process (dev
in-process: one torch import under emulation); never by the x86_64 suite."""

from __future__ import annotations

import json
import pathlib
import sys

SRC = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(SRC / "tests" / "dev"))

import minigelu  # noqa: E402

#: what dev keeps short under emulation: float32, the reference cases only, no axis,
#: no timing, no upstream test (the same options as the x86_64 half)
QUICK = ["--dtype", "float32", "--no-timing", "--no-gtest", "--no-dim-orders", "--no-numerics", "--no-generated"]


def _dev(path, report) -> tuple[int, dict]:
    """`etops dev` of `path` in this process: its exit code and its JSON result."""
    from etops.cli import main

    code = main(["dev", str(path), *QUICK, "--json", str(report)])
    return code, json.loads(report.read_text())


def _gating(result: dict) -> list:
    return [x["category"] for f in result["files"] for x in f["findings"] if x["gating"]]


def test_dev_judges_the_aarch64_branch_of_a_kernel_file(tmp_path):
    checkout = minigelu.write(tmp_path)
    code, result = _dev(minigelu.plant(checkout, None), tmp_path / "unmodified.json")
    [f] = result["files"]
    assert f["error"] is None and f["cases"]["aten::gelu.out"] > 0 and f["base"]["kind"] == "git", f
    assert (code, _gating(result)) == (0, [])
    code, result = _dev(minigelu.plant(checkout, "aarch64"), tmp_path / "planted.json")
    assert (code, _gating(result)) == (1, ["wrong"]), result
