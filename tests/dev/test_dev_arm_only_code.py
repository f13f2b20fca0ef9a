"""etops dev on x86_64 of a kernel file with ARM-only code (minigelu.py's
op_gelu.cpp, a NEON loop inside ``#if defined(__aarch64__)``): a bug planted in that
branch is not compiled here, so the edit introduces no finding (exit 0); the same
plant in the portable branch is a new finding (exit 1). On aarch64 the first exits 1
(tests/aarch64/lane_dev.py, in the lane's root)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

import minigelu

#: what dev keeps fast: the reference cases only, no axis, no timing, no upstream test
QUICK = ["--dtype", "float32", "--no-timing", "--no-gtest", "--no-dim-orders", "--no-numerics", "--no-generated"]

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the x86_64 half (tests/aarch64/lane_dev.py: aarch64's)")


def _dev(path, report) -> tuple[int, dict]:
    """`etops dev` of `path` in a new process: its exit code and its JSON result."""
    done = subprocess.run([sys.executable, "-m", "etops", "dev", str(path), *QUICK, "--json", str(report)],
                          capture_output=True, text=True, timeout=900)
    assert report.exists(), done.stdout + done.stderr
    return done.returncode, json.loads(report.read_text())


def _gating(result: dict) -> list:
    return [x["category"] for f in result["files"] for x in f["findings"] if x["gating"]]


def test_a_bug_in_the_aarch64_branch_is_not_compiled_on_x86_64(tmp_path):
    checkout = minigelu.write(tmp_path)
    planted = minigelu.plant(checkout, "aarch64")
    assert minigelu.PLANTED in planted.read_text()
    code, result = _dev(planted, tmp_path / "aarch64.json")
    [f] = result["files"]
    assert f["cases"]["aten::gelu.out"] > 0 and f["base"]["kind"] == "git"
    assert (code, _gating(result)) == (0, [])
    code, result = _dev(minigelu.plant(checkout, "portable"), tmp_path / "portable.json")  # where x86_64 compiles it
    assert (code, _gating(result)) == (1, ["wrong"])
