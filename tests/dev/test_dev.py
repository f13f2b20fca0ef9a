"""The etops dev tests (tests/dev/inprocess/check_*.py), run in a fresh interpreter:
they override, register and deregister kernels in ExecuTorch's process-wide registry
(deregistered entries stay as free slots), which the foundation's tests expect to
find as the wheel left it. Run them directly while developing:

    .venv/bin/python -m pytest -o 'python_files=check_*.py' tests/dev/inprocess
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import etops

HERE = Path(__file__).resolve().parent
SRC = str(Path(etops.__file__).resolve().parent.parent)


def test_etops_dev_in_a_fresh_interpreter():
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:warnings",
         "-o", "python_files=check_*.py", str(HERE / "inprocess")],
        capture_output=True, text=True, env=env, cwd=str(HERE.parent.parent), timeout=900,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    print(result.stdout[-20000:])
    assert result.returncode == 0, f"{summary}\n{result.stdout[-20000:]}\n{result.stderr[-5000:]}"
    assert " passed" in summary and "failed" not in summary
