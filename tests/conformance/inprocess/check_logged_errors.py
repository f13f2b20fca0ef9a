"""What kernels log during a check (run in a fresh interpreter: they register
kernels in ExecuTorch's process-wide registry).

- A kernel called through etops gets a temp allocator, as a Method gives one: a
  kernel that needs scratch memory takes the path it takes in a program and logs
  nothing.
- A kernel that logs at Error level in a call that returns is no silent pass: its
  case keeps the message (``CaseResult.logged``), the report's headline counts it
  and the terminal lists it; an Info message does not count.
- What ExecuTorch logs outside etops' calls while a reference runs (the LLM ops'
  ATen wrappers call the kernels with a context that has no temp allocator) is the
  reference's: logged at DEBUG under its name, never as the kernel's error."""

from __future__ import annotations

import importlib
import logging
import tempfile
from pathlib import Path

import pytest
import torch

import etops
import etops.testing
from etops import custom
from etops.conformance import references
from etops.conformance.clusters import headline
from etops.conformance.references import llm
from etops.conformance.report import terminal
from etops.conformance.runner import TaskRunner, default_kmap
from etops.conformance.sweep import Report

_MEMO: dict = {}

#: out = x, through scratch memory from the context (NaN when it gives none)
SCRATCH_COPY = r"""
Tensor& scratchcopy_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  ET_KERNEL_CHECK(ctx, x.scalar_type() == ScalarType::Float && out.scalar_type() == ScalarType::Float &&
                  x.numel() == out.numel(), InvalidArgument, out);
  executorch::runtime::Result<void*> scratch = ctx.allocate_temp(x.nbytes() + 1, 64);
  float* o = out.mutable_data_ptr<float>();
  if (!scratch.ok()) {
    for (ssize_t i = 0; i < out.numel(); i++) o[i] = NAN;
    return out;
  }
  float* tmp = static_cast<float*>(scratch.get());
  const float* in = x.const_data_ptr<float>();
  for (ssize_t i = 0; i < x.numel(); i++) tmp[i] = in[i];
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = tmp[i];
  return out;
}
"""

#: out = x, logging at LEVEL on the way (a kernel that "recovers" from an error)
LOGGING_COPY = r"""
Tensor& loggingcopy_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  ET_KERNEL_CHECK(ctx, x.scalar_type() == ScalarType::Float && out.scalar_type() == ScalarType::Float &&
                  x.numel() == out.numel(), InvalidArgument, out);
  ET_LOG(LEVEL, "loggingcopy: fell back to the slow path");
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = in[i];
  return out;
}
"""


@pytest.fixture(scope="module", autouse=True)
def cache():
    custom.set_cache_dir(Path(tempfile.mkdtemp(prefix="etops-kernel-cache-")))


def _kernel(name: str, source: str, function: str, **defines) -> str:
    """logtest::<name>.out registered once; its name."""
    if name not in _MEMO:
        text = "".join(f"#define {k} {v}\n" for k, v in defines.items()) + source
        _MEMO[name] = etops.register_kernel(f"logtest::{name}.out", text, function=function,
                                            schema=f"{name}.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    return f"logtest::{name}.out"


def _report_of(kernel: str, reference, samples) -> Report:
    ref = references.Reference(kernel, reference, samples)
    references.add(ref)
    report = Report([kernel], None, False, 1)
    report.add(TaskRunner(default_kmap(), [kernel]).run(ref.task_id, torch.float32))
    return report


def test_a_kernel_gets_a_temp_allocator(caplog):
    name = _kernel("scratchcopy", SCRATCH_COPY, "scratchcopy_out")
    x = torch.randn(5, 7)
    with caplog.at_level(logging.DEBUG, logger="etops.executorch"):
        out = etops.get_kernel(name)(x, out=torch.empty_like(x))
    torch.testing.assert_close(out, x, rtol=0, atol=0)  # NaN had the context no temp allocator
    assert not [r for r in caplog.records if r.levelno >= logging.INFO]


def test_a_kernel_logging_an_error_is_no_silent_pass(caplog):
    name = _kernel("loggingerror", LOGGING_COPY, "loggingcopy_out", LEVEL="Error")
    with caplog.at_level(logging.ERROR, logger="etops.executorch"):
        report = _report_of(name, lambda x: x.clone(), lambda dtype: [references.Sample((torch.randn(3, 4),)),
                                                                       references.Sample((torch.randn(2),))])
    (tally,) = report.tallies.values()
    assert tally.counts["pass"] == 2  # right values: a pass, but not a silent one
    assert len(report.logged) == 2
    assert all("loggingcopy: fell back to the slow path" in c.logged and c.status == "pass" for c in report.logged.values())
    assert headline(report, []).endswith("; 2 passing cases whose kernel logged an error")
    assert "[logged an error] logtest::loggingerror.out" in terminal(report, clusters=[])
    assert [r for r in caplog.records if r.levelno == logging.ERROR and "loggingerror" in r.getMessage()]


def test_etops_testing_warns_of_a_passing_case_that_logged_an_error():
    name = _kernel("loggingerror", LOGGING_COPY, "loggingcopy_out", LEVEL="Error")
    (case,) = etops.testing.reference_cases(name, lambda x: x.clone(), lambda dtype: [(torch.randn(3),)])
    with pytest.warns(etops.testing.KernelLoggedError, match="fell back to the slow path"):
        case.check()


def test_an_info_message_is_not_an_error():
    name = _kernel("logginginfo", LOGGING_COPY, "loggingcopy_out", LEVEL="Info")
    report = _report_of(name, lambda x: x.clone(), lambda dtype: [references.Sample((torch.randn(3, 4),))])
    assert not report.logged and "logged an error" not in headline(report, [])


def test_what_a_reference_logs_is_the_references(caplog):
    """custom_sdpa's ATen witness (torch.ops.llama.custom_sdpa) logs 'No temp
    allocator provided' at every prefill call: DEBUG records naming it, no ERROR."""
    importlib.import_module(llm.LIBRARY)
    ref = references.find("llama::custom_sdpa.out")
    with caplog.at_level(logging.DEBUG, logger="etops.executorch"):
        result = TaskRunner(default_kmap(), [ref.kernel]).run(ref.task_id, torch.float32)
    assert not result.logged
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    witness = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and "custom_sdpa" in r.getMessage()]
    assert any("No temp allocator provided" in m for m in witness), witness
