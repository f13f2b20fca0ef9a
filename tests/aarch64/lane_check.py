"""The aarch64 lane's `etops check` (make test-aarch64, docs/aarch64.md): the kernels
of tests/aarch64/lane_kernels.txt (those with ARM-only code, the LLM library's
``llama::*``, then a fixed sample) judged against ATen on aarch64, in this process (one torch import under emulation),
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
    """The kernels the lane checks, in the file's order; a line ``NAMESPACE::*`` of
    the LLM library's namespaces (``llama::*``) stands for every kernel registered
    there once the library loads (etops.llm_library), and for none when it does not
    load on this platform (library_loads says which)."""
    lines = (SRC / "tests" / "aarch64" / "lane_kernels.txt").read_text().splitlines()
    kernels = []
    for line in (line.strip() for line in lines):
        if not line or line.startswith("#"):
            continue
        if line.endswith("::*"):
            kernels.extend(llm_kernels(line[:-1]))
        else:
            kernels.append(line)
    return kernels


def library_loads() -> bool:
    """Whether upstream's LLM custom-ops library loads here (its ImportError: no)."""
    from etops.llm_library import load_llm_custom_ops

    try:
        load_llm_custom_ops()
    except ImportError:
        return False
    return True


def llm_kernels(namespace: str) -> list[str]:
    """Every kernel of `namespace` (``llama::``, one of etops.llm_library's) registered
    once the LLM library loaded, sorted; [] when it does not load."""
    from etops.llm_library import LLM_NAMESPACES

    if namespace not in LLM_NAMESPACES:
        raise ValueError(f"lane_kernels.txt: '{namespace}*' is not one of the LLM library's namespaces {LLM_NAMESPACES}")
    if not library_loads():
        return []
    import etops

    return sorted(n for n in etops.registry().operator_names if n.startswith(namespace))


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
    assert library_loads(), "upstream's LLM custom-ops library does not load on aarch64"
    assert any(k.startswith("llama::") for k in kernels)
    assert not report["coverage"]["unreached"] and report["totals"]["cases"] > 0, report["coverage"]
    assert not report["totals"]["error"] and not report["task_errors"] and not report["samples_failed"]
    judged = {row["kernel"] for row in report["kernels"] if row["cases"] > 0}
    assert judged == set(kernels), f"no case for {sorted(set(kernels) - judged)}"


def judged_on_one_platform(first: pathlib.Path, second: pathlib.Path) -> list[str]:
    """The kernels with cases in one of two check reports and not in the other."""
    judged = [{row["kernel"] for row in json.loads(p.read_text())["kernels"] if row["cases"] > 0} for p in (first, second)]
    return sorted(judged[0] ^ judged[1])


if __name__ == "__main__":  # lane.sh, on the host
    import sys

    if sys.argv[1:2] == ["--same-kernels"]:  # both platforms' reports judged the same kernels
        only = judged_on_one_platform(pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3]))
        sys.exit(f"test-aarch64: kernels judged on one platform only: {only}" if only else 0)
    # the x86_64 reference: the same check
    sys.exit(0 if run_check(pathlib.Path(sys.argv[1])) in (0, 1) else 1)
