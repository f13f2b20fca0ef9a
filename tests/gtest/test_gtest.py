"""The etops gtest tests that register a kernel (tests/gtest/inprocess/check_*.py),
run in a fresh interpreter: deregistered entries stay as free slots in ExecuTorch's
process-wide registry, which the foundation's tests expect as the wheel left it.
Run them directly while developing:

    .venv/bin/python -m pytest -o 'python_files=check_*.py' tests/gtest/inprocess
"""

from __future__ import annotations

from pathlib import Path

from fresh_python import run_check_files


def test_etops_gtest_in_a_fresh_interpreter():
    run_check_files(Path(__file__).resolve().parent / "inprocess")
