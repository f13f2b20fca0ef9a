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


def test_a_death_outside_every_kernel_call_blames_no_kernel(tmp_path):
    """The worker dies while ATen's side of sample 2 is computed (no kernel call in
    flight, the case clock says): no case is a crash of the kernel (the last case
    whose kernel ran, sample 1's, passed), and the task says what happened."""
    report = conformance.run(["aten::add.out"], dtypes=["float32"], opinfo_filter={"add"}, progress=False,
                             isolated=True, jobs=1, hooks=str(HERE / "reference_death_hooks.py"), report_dir=tmp_path)
    assert _only(report, "crash") == [], [c.message for c in _only(report, "crash")]
    errors = [t["error"] for t in report.task_errors]
    assert any("outside any kernel call" in e for e in errors), errors


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


#: aten::relu.out that never returns on a (5, 5) input (one sample of OpInfo
#: nn.functional.relu at float32), and is right on every other
SPINNING_RELU = r'''
import etops

SOURCE = r"""
Tensor& spinning_relu_out(KernelRuntimeContext& ctx, const Tensor& in, Tensor& out) {
  ET_KERNEL_CHECK(ctx, in.scalar_type() == ScalarType::Float && out.scalar_type() == ScalarType::Float, InvalidArgument, out);
  ET_KERNEL_CHECK(ctx, executorch::runtime::resize_tensor(out, in.sizes()) == Error::Ok, InvalidArgument, out);
  if (in.dim() == 2 && in.size(0) == 5 && in.size(1) == 5) {
    volatile bool spin = true;
    while (spin) {
    }
  }
  const float* x = in.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < in.numel(); i++) o[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return out;
}
"""


def load():
    return etops.override("aten::relu.out", SOURCE, function="spinning_relu_out")
'''


def test_a_kernel_that_never_returns_is_a_hang_finding_and_the_isolated_sweep_completes(tmp_path):
    """etops check --isolated over a custom kernel that spins forever on one input: its
    worker is killed once the case is past its limit (a small floor here), the case is
    a hang naming the input and the limit, every other case is judged, the sweep ends
    with exit 1 and its JSON."""
    (tmp_path / "spinning.py").write_text(SPINNING_RELU)
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
               ETOPS_CASE_TIMEOUT_FLOOR="1", ETOPS_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-m", "etops", "check", "aten::relu.out", "--dtype", "float32", "--opinfo",
                           "nn.functional.relu", "--isolated", "--load", "spinning.py:load", "--json", "report.json",
                           "--no-progress"], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    import json

    data = json.loads((tmp_path / "report.json").read_text())
    [hang] = data["hangs"]
    assert (hang["status"], hang["sample"], hang["inputs"], hang["limit_seconds"]) == ("hang", 2, "Tensor[5, 5]:float32", 1.0)
    assert data["totals"]["hang"] == 1 and data["totals"]["pass"] == data["totals"]["cases"] - 1 >= 3
    [finding] = data["findings"]
    assert (finding["kind"], finding["category"], finding["inputs"], finding["limit_seconds"]) == ("hang", "hang", "Tensor[5, 5]:float32", 1.0)
    assert "relu.out does not return within 1 s" in proc.stdout
