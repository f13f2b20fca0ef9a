"""Kernels of our own through the judge's numerics (tests/conformance/numerics_kernels/
check_*.py), run in a fresh interpreter: they register kernels in ExecuTorch's
process-wide registry, which the other tests expect as the wheel left it. Run them
directly while developing:

    PYTHONPATH=src .venv/bin/python -m pytest -o 'python_files=check_*.py' tests/conformance/numerics_kernels
"""

from __future__ import annotations

from pathlib import Path

from fresh_python import run_check_files


def test_numerics_of_kernels_of_our_own_in_a_fresh_interpreter():
    run_check_files(Path(__file__).resolve().parent / "numerics_kernels")
