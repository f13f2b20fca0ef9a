"""Every status from a real case, the reproducers, and isolated mode surviving a
worker that is killed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import etops
from etops import conformance

HERE = Path(__file__).resolve().parent
SRC = str(Path(etops.__file__).resolve().parent.parent)


def _run_script(path: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300, env=env)


def _only(report, status):
    return [c for c in report.details if c.status == status]


def test_pass():
    report = conformance.run(["aten::add.out"], dtypes=["float32"], opinfo_filter={"add"}, progress=False)
    totals = report.totals()
    assert totals["pass"] > 0
    assert totals["cases"] == sum(totals[s] for s in conformance.STATUSES)
    assert report.coverage() == {"registered": 1, "reached": 1, "fraction": 1.0, "unreached": []}


def test_unsupported_is_a_kernel_refusing_what_aten_accepts():
    # ExecuTorch's add refuses mixed complex / real operands that ATen promotes
    report = conformance.run(["aten::add.out"], dtypes=["complex64"], opinfo_filter={"add"}, progress=False)
    cases = _only(report, "unsupported")
    assert cases, report.totals()
    assert all(c.message.startswith(("KernelError", "NoMatchingKernelError")) for c in cases)


@pytest.mark.parametrize("kernel, opinfo, dtype, words", [
    # ExecuTorch's Scalar holds bool, int or float only: complex fill values cannot be passed
    ("aten::full.out", "full", "complex64", "argument 'fill_value': ExecuTorch Scalars cannot be complex"),
    # ExecuTorch's MemoryFormat has contiguous and preserve only
    ("aten::_to_copy.out", "to", "float32", "argument 'memory_format' got torch.channels_last; ExecuTorch accepts one of"),
])
def test_what_executorch_cannot_express_is_unsupported_with_the_reason(kernel, opinfo, dtype, words):
    report = conformance.run([kernel], dtypes=[dtype], opinfo_filter={opinfo}, progress=False)
    assert report.totals()["error"] == 0, _only(report, "error")[:1]
    cases = [c for c in _only(report, "unsupported") if words in c.message]
    assert cases and cases[0].message.startswith("UnrepresentableError"), report.totals()


def test_error_is_etops_unable_to_make_the_call():
    import types

    def invoke(kernel, args, kwargs):
        raise RuntimeError("etops itself failed here")

    report = conformance.run(["aten::add.out"], dtypes=["float32"], opinfo_filter={"add"}, progress=False,
                             hooks=types.SimpleNamespace(invoke=invoke))
    cases = _only(report, "error")
    assert cases and report.totals()["unsupported"] == 0
    assert cases[0].message.startswith("RuntimeError: etops itself failed here")


def test_mismatch_and_its_reproducer(tmp_path):
    report = conformance.run(["aten::add.out"], dtypes=["float32"], opinfo_filter={"add"}, progress=False,
                             hooks=str(HERE / "mismatch_hooks.py"), report_dir=tmp_path)
    planted = [c for c in _only(report, "mismatch") if c.opinfo == "add" and c.sample == 1]
    assert len(planted) == 1
    case = planted[0]
    assert case.max_abs_error == pytest.approx(1.0)
    assert case.reproducer and Path(case.reproducer).is_file() and Path(case.reproducer).with_suffix(".pt").is_file()
    assert Path(case.reproducer).parent == tmp_path / "reproducers"
    proc = _run_script(case.reproducer)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "MISMATCH" in proc.stdout
    assert "ExecuTorch:" in proc.stdout and "ATen:" in proc.stdout


def test_crash_in_isolated_mode_is_recorded_and_the_sweep_goes_on(tmp_path):
    report = conformance.run(["aten::add.out"], dtypes=["float32"], opinfo_filter={"add"}, progress=False,
                             isolated=True, jobs=1, hooks=str(HERE / "crash_hooks.py"), report_dir=tmp_path)
    crashes = _only(report, "crash")
    assert len(crashes) == 1, report.totals()
    crash = crashes[0]
    assert (crash.kernel, crash.opinfo, crash.sample) == ("aten::add.out", "add", 2)
    assert "SIGKILL" in crash.message
    # the samples after the crash ran in a new worker
    samples = report.samples
    assert report.totals()["pass"] == report.totals()["cases"] - 1 and samples > 3
    # its reproducer rebuilds the inputs (the hook is not in it, so the kernel runs fine)
    assert crash.reproducer and Path(crash.reproducer).is_file()
    assert "Tensor" in crash.inputs
    proc = _run_script(crash.reproducer)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no mismatch" in proc.stdout


def test_isolated_results_equal_in_process():
    kwargs = dict(dtypes=["float32", "int64"], opinfo_filter={"add", "mul", "sub"}, progress=False)
    inproc = conformance.run(["aten::add.out", "aten::mul.out"], **kwargs)
    pooled = conformance.run(["aten::add.out", "aten::mul.out"], isolated=True, jobs=2, **kwargs)
    assert inproc.totals() == pooled.totals()


def test_guarded_sweep_gives_the_same_statuses():
    """etops check --guard: the same cases through etops.guard.call."""
    plain = conformance.run(["aten::mul.out"], dtypes=["float32"], opinfo_filter={"mul"}, progress=False)
    guarded = conformance.run(["aten::mul.out"], dtypes=["float32"], opinfo_filter={"mul"}, progress=False,
                              hooks="etops.guard.hooks:guarded")
    assert guarded.totals() == plain.totals() and guarded.totals()["pass"] > 0
