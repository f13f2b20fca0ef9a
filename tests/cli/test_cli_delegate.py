"""``etops bench --delegate FILE.py:FUNCTION``: a model from examples/ lowered to
XNNPACK and its delegate timed on three sides, run as a user runs it (a fresh
interpreter, started at import time in the background). Mistakes on the command
line are one line and exit code 2. No assertion on speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import etops
from fresh_python import in_background

SRC = str(Path(etops.__file__).resolve().parent.parent)
ROOT = Path(__file__).resolve().parents[2]
MODELS = str(ROOT / "examples" / "delegate_models.py")
TMP = tempfile.mkdtemp(prefix="etops-cli-delegate-")
REPORT = os.path.join(TMP, "delegates.md")


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("FORCE_COLOR", None)
    try:
        return subprocess.run([sys.executable, "-m", "etops", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT))
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, -9, exc.stdout or "", f"timed out\n{exc.stderr or ''}")


BENCH_JSON = in_background(_run, "bench", "--delegate", "examples/delegate_models.py:linear_relu", "--repeats", "2", "--warmup", "0",
                          "--target", "0.0005", "--threads", "1", "--report", REPORT, "--json")


def test_bench_delegate_json():
    proc = BENCH_JSON.result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    (row,) = data["rows"]
    assert (row["model"], row["name"], row["backend"], row["error"]) == ("linear_relu", "lowered_module_0", "XnnpackBackend", None)
    assert row["ops"] == ["linear", "relu", "linear", "relu"]
    for side in ("delegate", "executorch", "aten"):
        assert 0 < row[side]["min"] <= row[side]["median"] and len(row[side]["samples"]) == 2, (side, row[side])
    assert set(row["ratios"]) == {"delegate/aten", "executorch/aten", "delegate/executorch"}
    assert all(r["median"] > 0 for r in row["ratios"].values())
    assert row["agree"] == {"delegate": True, "executorch": True}
    assert data["threads"] == {"torch": 1, "executorch": 1}
    assert data["settings"]["repeats"] == 2
    with open(REPORT) as f:
        md = f.read()
    assert md.startswith("## delegate vs the same subgraph") and "| `linear_relu` | lowered_module_0 |" in md
    assert os.path.exists(os.path.splitext(REPORT)[0] + ".json")


@pytest.mark.parametrize("argv, message", [
    (["bench", "--delegate", "no/such/file.py:f"], "no file no/such/file.py"),
    (["bench", "--delegate", f"{MODELS}:nope"], "has no function 'nope'"),
    (["bench", "aten::add.out", "--delegate", f"{MODELS}:linear_relu"], "--delegate takes model functions"),
    (["bench", "--all", "--delegate", f"{MODELS}:linear_relu"], "--delegate takes model functions"),
    (["bench", "--delegate", f"{MODELS}:linear_relu", "--sizes", "4k"], "--sizes goes with kernel names"),
    (["bench", "--delegate", f"{MODELS}:linear_relu", "--threads", "0"], "--threads must be at least 1"),
])
def test_mistakes_are_one_line_exit_2(argv, message, capsys):
    from etops.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("etops: error: ") and message in lines[0], err


def test_help_names_the_delegate_option(capsys):
    from etops.cli import main

    assert main(["bench", "--help"]) == 0
    assert "--delegate FILE.py:FUNCTION" in capsys.readouterr().out
