"""The numerics axis (etops.conformance.numerics) on ExecuTorch's own kernels, and
the verdict hygiene around it: deterministic root-cause keys, summaries that say
what was seen, the exit status of `etops check`."""

from __future__ import annotations

import math
import types

import torch

from etops import conformance
from etops.conformance import numerics
from etops.conformance.clusters import Cluster, group, input_dtypes, summary
from etops.conformance.cli import exit_status
from etops.conformance.runner import CaseResult
from fresh_python import run_python


def test_the_transforms_expose_what_they_name_and_are_deterministic():
    torch.manual_seed(0)
    x = torch.randn(3, 6)
    shifted = numerics.offset(x)
    assert float(shifted.mean()) > 1000 * float(shifted.std())  # mean >> spread
    cancelled = numerics.cancel(x)
    assert cancelled.abs().max() > 4096 and torch.allclose(cancelled.double().sum(-1), x.double().sum(-1), atol=1e-2)
    assert math.isinf(float((numerics.huge(x) ** 2).max())) and math.isfinite(float(numerics.huge(x).abs().max()))
    small = numerics.tiny(x)
    assert bool((small != 0).any()) and float(small.abs().max()) < 32 * torch.finfo(torch.float32).tiny
    assert numerics.long(x).shape == (3, 342 * 6) and torch.equal(numerics.long(x)[:, 6:12], x)
    for fn in numerics.TRANSFORMS.values():
        assert torch.equal(fn(x), fn(x.clone()))
    hooks = numerics.Transform("offset")
    ints = torch.arange(6)
    args, kwargs = hooks.values([x, ints, 2], {"other": torch.tensor(1.0)})
    assert args[1] is ints and args[2] == 2 and kwargs["other"].item() == 1.0  # integers, scalars and 1-element tensors kept
    assert hooks.transform(None, torch.ops.aten.mm.default, [x, x], {}) is None  # ATen refuses [3, 6] @ [3, 6]: left out


def test_the_axis_finds_executorchs_layer_norm_cancelling_with_a_reproducer(tmp_path):
    """ExecuTorch's float32 native_layer_norm computes its variance as E[x^2] - E[x]^2:
    right on OpInfo's samples, wrong once the mean is large beside the spread."""
    kernels = ["aten::native_layer_norm.out"]
    base = conformance.run(kernels, dtypes=["float32"], opinfo_filter={"nn.functional.layer_norm"}, progress=False,
                           max_details=numerics.AXIS_MAX_DETAILS)
    assert not [c for c in base.details if c.status == "mismatch"]
    axis = numerics.run_axis(kernels, base, report_dir=tmp_path, transforms=["offset"], dtypes=["float32"],
                             opinfo_filter={"nn.functional.layer_norm"}, progress=False)
    [finding] = [c for c in axis.clusters["offset"] if c.category == "wrong"]
    assert finding.layout == "numerics:offset" and "transformed by the numerics axis (offset)" in finding.summary
    assert finding.reproducer and "x0 = torch.tensor([[" in open(finding.reproducer).read()
    proc = run_python(f"import runpy; runpy.run_path({finding.reproducer!r}, run_name='__main__')")
    assert proc.returncode == 1 and "MISMATCH" in proc.stderr, proc.stdout + proc.stderr
    assert "numerics axis (offset;" in axis.headline() and axis.to_json()["findings"]["offset"]


_GUARD_WORDS = """
import torch, etops
from etops.conformance.guarded import refusing_rule
try:
    etops.as_program(etops.registry().get_kernel("aten::_log_softmax.out"))(torch.empty(2, 0), 1, False)
except ValueError as exc:
    print(refusing_rule("aten::_log_softmax.out", exc))
"""


def test_a_guards_key_is_words_the_same_in_every_process():
    first, second = run_python(_GUARD_WORDS), run_python(_GUARD_WORDS)
    assert first.returncode == 0 and first.stdout.strip(), first.stderr[-2000:]
    assert first.stdout == second.stdout
    assert " at 0x" not in first.stdout and "Rule(aten::_log_softmax.out)" in first.stdout


def test_keys_are_identical_across_two_isolated_runs():
    kernels = ["aten::sum.IntList_out", "aten::unfold_copy.out"]

    def keys():
        report = conformance.run(kernels, dtypes=["float64"], opinfo_filter={"sum", "unfold_copy"}, isolated=True, progress=False)
        return sorted(c.key for c in group(report.details))

    first = keys()
    assert any("computes float64 in float32" in str(k[2]) for k in first) and any(k[1] == "abort" for k in first)
    assert first == keys()


def _case(status="mismatch", dtype="float32", inputs="Tensor[1]:float64", **kw):
    return CaseResult("aten::k.out", "aten::k", "k", dtype, 0, 0, status, inputs=inputs, **kw)


def test_a_findings_dtypes_are_its_inputs_and_a_guarded_summary_says_the_condition():
    assert input_dtypes(_case()) == ["float64"]
    assert input_dtypes(_case(inputs="tensor(2.0, bfloat16), [0]")) == ["bfloat16"]
    assert input_dtypes(_case(inputs="[], 3")) == ["float32"]
    crash = Cluster("aten::k.out", "crash", "SIGABRT", cases=[_case("crash")], inputs="Tensor[1]:float64")
    assert summary(crash).startswith("k.out crashes (SIGABRT) on float64 inputs")
    message = ("ValueError: aten::k.out: argument 'self': not called as a program calls it: k divides by the size of an "
               "empty reduced dim; etops' direct calls skip the kernel (nothing to compute)")
    guarded = Cluster("aten::k.out", "guarded", "refuse_workarounds(rule=Rule(aten::k.out))",
                      cases=[_case("guarded", message=message)])
    guarded.example = guarded.cases[0]
    text = summary(guarded)
    assert "known to abort" not in text and "empty reduced dim" in text and "(guard refuse_workarounds)" in text


def _report(**totals):
    counts = dict.fromkeys(("error", "crash", "abort", "mismatch", "guarded"), 0) | totals
    return types.SimpleNamespace(totals=lambda: counts)


def test_check_exits_1_on_a_crash_an_abort_or_a_wrong_result_unless_report_only():
    wrong, loss = types.SimpleNamespace(category="wrong"), types.SimpleNamespace(category="precision loss")
    assert exit_status(_report(), []) == 0
    assert exit_status(_report(mismatch=3), [loss]) == 0
    assert exit_status(_report(mismatch=3), [loss], strict=True) == 1
    assert exit_status(_report(mismatch=1), [wrong]) == 1
    assert exit_status(_report(crash=724), []) == 1 and exit_status(_report(abort=1), []) == 1
    assert exit_status(_report(crash=724), [wrong], report_only=True) == 0


def test_an_error_at_a_scale_of_denormals_is_measured_in_ulps_not_a_division_by_zero():
    """The numerics axis' tiny transform gives float64 results of denormal scale, where
    eps x scale underflows to 0 (native_layer_norm: the judge raised ZeroDivisionError,
    its task process's task ran again through the guard process)."""
    from etops.conformance.precise import effective_ulps

    tiny = torch.finfo(torch.float64).tiny
    ref = torch.tensor([3e-310, -1e-310], dtype=torch.float64)
    assert float(ref.abs().max()) * torch.finfo(torch.float64).eps == 0.0  # the underflow
    ulps = effective_ulps(ref + tiny * 2 ** -40, ref, torch.float64)
    assert ulps is not None and math.isfinite(ulps) and ulps > 0
    assert effective_ulps(ref.clone(), ref, torch.float64) == 0.0
