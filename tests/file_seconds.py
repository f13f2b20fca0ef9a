"""How long each of the suite's slower test files took in a measured ``make test``
(its tests' seconds summed: a check file's fresh interpreter included), so that
pytest-xdist hands out the longest files first (conftest.py); for the order only, so
a stale figure costs balance, never a result. A file not listed counts as 0: after
the listed ones, in collection order.

Refresh after a measured run (``make test``'s pytest with ``--junitxml=PATH`` added):
``python tests/file_seconds.py PATH`` prints SECONDS' entries, longest first.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

#: test file (relative to the repository) -> seconds, the files of LISTED seconds or more
#: (make test at fb76580, 6 December, under a load average of 10-15; check_gate.py and
#: check_verdicts.py scaled by their own wall time alone after the suite branch's cuts,
#: benchmarks/README.md "make test's CPU: the etops dev checks"; test_dev_self_registering.py
#: and test_dev_llm_timing.py by their CPU alone after the llmdev branch's, "make test's
#: CPU, the etops dev test files")
SECONDS: dict[str, float] = {
    'tests/dev/inprocess/check_gate.py': 544,
    'tests/dev/inprocess/check_verdicts.py': 426,
    'tests/reliability/test_fuzz.py': 303,
    'tests/custom/inprocess/check_after_a_fault.py': 294,
    'tests/gtest/inprocess/check_gtest.py': 271,
    'tests/cli/test_cli.py': 258,
    'tests/dev/test_dev_self_registering.py': 258,
    'tests/dev/inprocess/check_dev.py': 227,
    'tests/test_snippet.py': 210,
    'tests/conformance/test_conformance_references.py': 194,
    'tests/needs/test_needs.py': 182,
    'tests/reliability/test_crash_classes.py': 172,
    'tests/conformance/test_conformance_clusters.py': 162,
    'tests/test_schema_cache.py': 161,
    'tests/dev/inprocess/check_first_run.py': 147,
    'tests/custom/inprocess/check_custom_registry.py': 127,
    'tests/custom/inprocess/check_aborts.py': 127,
    'tests/edge/test_delegates.py': 125,
    'tests/conformance/inprocess/check_llm_math.py': 123,
    'tests/custom/inprocess/check_faults.py': 118,
    'tests/conformance/test_conformance_generated.py': 112,
    'tests/reliability/test_aborts.py': 106,
    'tests/dev/inprocess/check_warm.py': 103,
    'tests/delegate/test_example.py': 101,
    'tests/conformance/test_conformance_statuses.py': 98,
    'tests/test_layering.py': 98,
    'tests/custom/inprocess/check_custom_pte.py': 98,
    'tests/docs/test_docs_code.py': 95,
    'tests/custom/inprocess/check_handler_chain.py': 94,
    'tests/reliability/test_sequences.py': 77,
    'tests/cli/test_cli_delegate.py': 76,
    'tests/conformance/inprocess/check_numerics_kernels.py': 74,
    'tests/custom/inprocess/check_guard.py': 74,
    'tests/conformance/inprocess/check_logged_errors.py': 70,
    'tests/edge/test_compare.py': 70,
    'tests/gtest/test_gtest_self_registering.py': 70,
    'tests/custom/inprocess/check_probes.py': 62,
    'tests/edge/test_models.py': 60,
    'tests/conformance/inprocess/check_llm_upstream.py': 60,
    'tests/upstream/inprocess/check_upstream.py': 59,
    'tests/dev/test_dev_arm_only_code.py': 57,
    'tests/dev/inprocess/check_checkout.py': 57,
    'tests/delegate/test_lifetime.py': 55,
    'tests/custom/inprocess/check_stack_overflow.py': 55,
    'tests/custom/inprocess/check_custom_build.py': 53,
    'tests/guard/test_guard_never_hangs.py': 52,
    'tests/custom/inprocess/check_custom_library.py': 51,
    'tests/conformance/test_conformance_numerics.py': 50,
    'tests/bench/test_bench_delegate.py': 50,
    'tests/dev/test_dev_llm_timing.py': 31,
    'tests/custom/inprocess/check_guard_reach.py': 48,
    'tests/test_errors.py': 45,
    'tests/reliability/test_fuzz_classes.py': 42,
    'tests/delegate/test_fuzz_delegate.py': 41,
    'tests/packaging/test_version_guard.py': 41,
    'tests/delegate/test_backends_and_errors.py': 40,
    'tests/edge/test_edge_ops.py': 36,
    'tests/reliability/test_leaks.py': 26,
    'tests/delegate/test_delegate_models.py': 26,
    'tests/conformance/test_conformance_fast.py': 25,
    'tests/test_call_memo.py': 24,
    'tests/packaging/test_import_portable.py': 24,
    'tests/conformance/test_conformance_report.py': 23,
    'tests/test_arguments.py': 22,
    'tests/test_fresh_checks.py': 22,
    'tests/guard/test_found_kernels.py': 21,
    'tests/conformance/test_conformance_mapping.py': 21,
    'tests/conformance/test_conformance_precision.py': 21,
    'tests/test_meta_safety.py': 21,
    'tests/test_selection.py': 20,
}

#: the shortest file SECONDS lists
LISTED = 20.0


def file_seconds(path: Path, root: Path) -> float:
    """The measured seconds of the test file `path` (0 when not listed)."""
    try:
        return SECONDS.get(path.relative_to(root).as_posix(), 0.0)
    except ValueError:  # outside the repository
        return 0.0


def from_junit(xml: str) -> dict[str, float]:
    """Test file -> its tests' seconds summed, from pytest's JUnit XML (a test's
    classname is its module's dotted path, then its class)."""
    seconds: dict[str, float] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        module = next((i for i, p in enumerate(parts) if p.startswith(("test_", "check_"))), None)
        if module is not None:
            path = "/".join(parts[: module + 1]) + ".py"
            seconds[path] = seconds.get(path, 0.0) + float(case.get("time", 0))
    return seconds


if __name__ == "__main__":
    for path, took in sorted(from_junit(sys.argv[1]).items(), key=lambda kv: -kv[1]):
        if took >= LISTED:
            print(f"    {path!r}: {took:.0f},")
