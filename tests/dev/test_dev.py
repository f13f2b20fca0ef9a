"""The etops dev tests (tests/dev/inprocess/check_*.py), run in a fresh interpreter:
they override, register and deregister kernels in ExecuTorch's process-wide registry
(deregistered entries stay as free slots), which the foundation's tests expect to
find as the wheel left it. Run them directly while developing:

    .venv/bin/python -m pytest -o 'python_files=check_*.py' tests/dev/inprocess
"""

from __future__ import annotations

from pathlib import Path

from fresh_python import run_check_files


def test_etops_dev_in_a_fresh_interpreter():
    run_check_files(Path(__file__).resolve().parent / "inprocess")
