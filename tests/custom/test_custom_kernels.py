"""The custom-kernel tests (tests/custom/inprocess/check_*.py), run in a fresh
interpreter: they register, override and deregister kernels in ExecuTorch's
process-wide registry, which the foundation's tests expect to find as the wheel
left it (259 fallback kernels). Run them directly while developing:

    PYTHONPATH=src .venv/bin/python -m pytest -o 'python_files=check_*.py' tests/custom/inprocess
"""

from __future__ import annotations

from pathlib import Path

from fresh_python import run_check_files


def test_custom_kernels_in_a_fresh_interpreter():
    run_check_files(Path(__file__).resolve().parent / "inprocess")
