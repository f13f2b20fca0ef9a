"""The aarch64 lane's `etops check` (make test-aarch64, docs/aarch64.md): the kernels
of tests/aarch64/lane_kernels.txt (those with ARM-only code, then a fixed sample)
judged against ATen on aarch64, in this process (one torch import under emulation),
the report written to $ETOPS_LANE_OUT/check-aarch64.json for
benchmarks/compare_platforms.py. Run by tests/aarch64/lane.sh inside the arm64 root,
never by the x86_64 suite (the file name is not test_*.py)."""

from __future__ import annotations

import json
import os
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[2]
OUT = pathlib.Path(os.environ.get("ETOPS_LANE_OUT", SRC / "build" / "aarch64"))


def lane_kernels() -> list[str]:
    """The kernels the lane checks, in the file's order."""
    lines = (SRC / "tests" / "aarch64" / "lane_kernels.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


#: the same on both platforms: OpInfo's samples and the references (no generated
#: cases, no shrinking: every case costs tens of times more under emulation)
CHECK_OPTIONS = ["--no-progress", "--no-generated", "--no-shrink"]


def run_check(report_path: pathlib.Path) -> int:
    """`etops check` of the lane's kernels in this process, its JSON report at
    `report_path`: the exit status (0, or 1 with findings)."""
    from etops.cli import main

    return main(["check", *CHECK_OPTIONS, "--report-dir", str(report_path.with_suffix("")), "--json", str(report_path),
                 *lane_kernels()])


def test_check_judges_every_lane_kernel_on_aarch64():
    kernels = lane_kernels()
    report_path = OUT / "check-aarch64.json"
    status = run_check(report_path)
    assert status in (0, 1), f"etops check exited {status}"  # 1: findings, which the comparison lists
    report = json.loads(report_path.read_text())
    assert not report["coverage"]["unreached"] and report["totals"]["cases"] > 0, report["coverage"]
    assert not report["totals"]["error"] and not report["task_errors"] and not report["samples_failed"]
    judged = {row["kernel"] for row in report["kernels"] if row["cases"] > 0}
    assert judged == set(kernels), f"no case for {sorted(set(kernels) - judged)}"


if __name__ == "__main__":  # lane.sh, on the host: the x86_64 reference, the same check
    import sys

    sys.exit(0 if run_check(pathlib.Path(sys.argv[1])) in (0, 1) else 1)
