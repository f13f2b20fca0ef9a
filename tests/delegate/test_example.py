"""examples/delegates.py runs as the README says and shows what it claims."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import etops

ROOT = Path(__file__).resolve().parents[2]
SRC = str(Path(etops.__file__).resolve().parent.parent)


def test_delegates_example_runs():
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "delegates.py")], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "XnnpackBackend (available)" in out
    assert "ExecuTorch delegate XnnpackBackend::lowered_module_0" in out
    assert "etops.edge.run vs the .pte: bit-identical" in out
    assert "7 delegate calls" in out and "delegate (XnnpackBackend)" in out
