"""The bounded fuzz `make test` runs: a few Hypothesis examples of valid and of
invalid calls for every callable kernel, each in an isolated worker process (the
long campaign is `make fuzz`), the isolated runner itself, and the regression
tests of every abort the fuzzer found (each a finding in etops.ops, replayed here)."""

from __future__ import annotations

import os

import pytest

import etops
from etops import ops
from etops.fuzz import findings
from etops.fuzz.runner import IsolatedRunner, callable_kernels, fuzz_kernel

pytest.importorskip("hypothesis")

#: examples per kernel and mode in `make test` (ETOPS_FUZZ_EXAMPLES to change)
EXAMPLES = int(os.environ.get("ETOPS_FUZZ_EXAMPLES", "2"))

#: property violations that break the contract outright: a new one fails the suite
HARD = {"crash", "refcount", "input_written", "out_touched", "unexpected_exception", "harness", "memory"}

#: (kernel, kind) of hard violations already reported (README, "Reliability")
KNOWN = set(findings.KNOWN_HARD)

KERNELS = [k.name for k in callable_kernels()]


@pytest.fixture(scope="module")
def runner():
    with IsolatedRunner(timeout=120) as r:
        yield r


def test_runner_reports_an_abort_and_recovers(runner):
    out = runner.run({"op": "<selftest:abort>"})
    assert out["status"] == "died" and "SIGABRT" in out["signal"]
    ok = runner.run({**ops.findings()[0].case, "direct": True})  # a fresh worker takes the next case
    assert ok["status"] == "raised"


def test_runner_reports_a_hang():
    with IsolatedRunner(timeout=2) as r:
        out = r.run({"op": "<selftest:hang>"})
    assert out["status"] == "hang"


def test_an_interrupted_runner_leaves_no_worker():
    """The worker is a fork of this process (etops.child_process): Ctrl-C (a
    KeyboardInterrupt in the with block) ends and reaps it at once."""
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            before = set(f.read().split())
    except OSError:
        pytest.skip("no /proc children list here")
    with pytest.raises(KeyboardInterrupt):
        with IsolatedRunner(timeout=60) as r:
            assert r.run({**ops.findings()[0].case, "direct": True})["status"] == "raised"
            raise KeyboardInterrupt
    with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
        assert set(f.read().split()) == before


@pytest.mark.parametrize("finding", ops.findings(), ids=[f"{f.op}-{f.argument}" for f in ops.findings()])
def test_abort_found_by_fuzzing_is_now_a_clear_error(runner, finding):
    """A direct call gets the rules table's guard: an error naming the argument."""
    out = runner.run({**finding.case, "direct": True})
    if finding.computes:  # normalized into a call the kernel handles: torch's result
        assert out["status"] == "ok" and not out["violations"], out
        return
    assert out["status"] == "raised", f"{finding.op} still kills the process: {out.get('signal')} {out.get('notice')}"
    assert f"'{finding.argument}'" in out["exc"], out["exc"]  # for people: the message names it
    assert out["argument"] == finding.argument, out  # for the fuzzer's replay: the exception carries it
    assert not out["exc"].startswith("KernelError")


@pytest.mark.parametrize("finding", ops.abort_findings(), ids=[f"{f.op}-{f.argument}" for f in ops.abort_findings()])
def test_abort_finding_without_its_guard_raises_kernel_aborted(runner, finding):
    """Replayed as a program calls the kernel (no guard, no normalizer): ExecuTorch's
    abort is unwound into KernelAborted (or the kernel fails cleanly); the worker
    never dies. The guards give better messages; they do not keep the process alive."""
    out = runner.run(finding.case)
    assert out["status"] != "died", f"{finding.op} killed the worker: {out.get('signal')} {out.get('notice')}"
    assert out["status"] == "raised", out
    if out["exc"].startswith("KernelAborted"):
        assert ("abort", out["exc"]) in [tuple(v) for v in out["violations"]]
    elif finding.op.startswith("aten::"):  # torch's own checks refuse some before any kernel runs
        assert "torch refuses" in out["exc"], out["exc"]
    else:  # no torch checks: the kernel itself answers
        assert out["exc"].startswith("KernelError"), out["exc"]


@pytest.mark.parametrize("mode", ["valid", "invalid"])
@pytest.mark.parametrize("name", KERNELS)
def test_bounded_fuzz(runner, name, mode):
    kernel = etops.registry().get_kernel(name)
    report = fuzz_kernel(runner, kernel, mode, EXAMPLES, derandomize=True)
    assert report.crash is None, f"{report.crash['repro']}\n{report.crash['signal']}: {report.crash['notice']}"
    assert not report.harness_errors, report.harness_errors
    new = {kind: v for kind, v in report.violations.items() if kind in HARD and (name, kind) not in KNOWN}
    assert not new, "\n".join(f"{kind}: {repro}\n    {message}" for kind, (repro, message, _case) in new.items())


#: a sample of kernels fuzzed with every call guarded (etops.guard.call; the
#: campaign, make fuzz, guards every kernel): elementwise, lists, views, reductions, the memory findings
GUARDED = ["aten::add.out", "aten::cat.out", "aten::view_as_real_copy.out", "aten::topk.values", "aten::embedding.out",
           "aten::div.out", "aten::index_select.out", "aten::sum.IntList_out"]


@pytest.mark.parametrize("mode", ["valid", "invalid"])
@pytest.mark.parametrize("name", GUARDED)
def test_bounded_fuzz_guarded(runner, name, mode):
    kernel = etops.registry().get_kernel(name)
    report = fuzz_kernel(runner, kernel, mode, EXAMPLES, derandomize=True, guard=True)
    assert report.crash is None, f"{report.crash['repro']}\n{report.crash['signal']}: {report.crash['notice']}"
    new = {kind: v for kind, v in report.violations.items() if kind in HARD and (name, kind) not in KNOWN}
    assert not new, "\n".join(f"{kind}: {repro}\n    {message}" for kind, (repro, message, _case) in new.items())


def test_the_reference_never_runs_aten_on_what_its_meta_kernel_refuses(runner):
    """ATen's own _native_batch_norm_legit.no_stats segfaults in eval mode without
    running stats (its meta kernel refuses that): the fuzz worker's reference asks
    meta first, so the worker lives and ATen's answer is an error."""
    case = {"op": "aten::_native_batch_norm_legit.no_stats_out", "mode": "valid", "args": [],
            "kwargs": [("input", ("T", (1, 1), "float32", "c", 0, "normal")), ("weight", ("V", None)), ("bias", ("V", None)),
                       ("training", ("V", False)), ("momentum", ("V", 0.0)), ("eps", ("V", 1e-05))],
            "outs": {"out": ("ref",), "save_mean": ("ref",), "save_invstd": ("ref",)}, "out_dtype": "float32",
            "mutation": None, "target": None}
    out = runner.run(case)
    assert out["status"] == "raised" and out.get("aten") == "error", out
