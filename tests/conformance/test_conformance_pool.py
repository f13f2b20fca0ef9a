"""etops.conformance.pool: --isolated's workers are forks of the sweep's process
(etops.child_process): what that process overrode or was given as an object reaches
them, a worker's death comes back as an Outcome, and no worker outlives the sweep,
whatever interrupts it."""

from __future__ import annotations

import os
import signal

import pytest
import torch

import etops
from etops import conformance
from etops.conformance import pool
from etops.conformance.outcome import KILLED, Outcome


def _bad_mul(self, other, out=None):
    return torch.mul(self, other) + 1  # the planted fault: every element off by one


def test_an_override_made_in_process_reaches_the_workers():
    """etops.override in the sweep's process is the kernel the workers call (a
    spawned interpreter would call the built-in and pass)."""
    kwargs = dict(dtypes=["float32"], opinfo_filter={"mul"}, progress=False, isolated=True, jobs=1)
    with etops.override("aten::mul.out", _bad_mul):
        overridden = conformance.run(["aten::mul.out"], **kwargs)
    assert overridden.totals()["mismatch"] > 0, overridden.totals()
    built_in = conformance.run(["aten::mul.out"], **kwargs)
    assert built_in.totals()["mismatch"] == 0 and built_in.totals()["pass"] > 0, built_in.totals()


class _KillsSampleTwo:
    """Hooks given as an object (not a module name): sample 2 of OpInfo 'add' kills its worker."""

    @staticmethod
    def before_call(case):
        if case.kernel == "aten::add.out" and case.opinfo == "add" and case.sample == 2:
            os.kill(os.getpid(), signal.SIGKILL)


def test_hooks_given_as_an_object_reach_the_workers_and_a_death_is_an_outcome():
    report = conformance.run(["aten::add.out"], dtypes=["float32"], opinfo_filter={"add"}, progress=False,
                             isolated=True, jobs=1, hooks=_KillsSampleTwo())
    crashes = [c for c in report.details if c.status == "crash"]
    assert [(c.kernel, c.opinfo, c.sample) for c in crashes] == [("aten::add.out", "add", 2)]
    assert crashes[0].outcome == Outcome("crash", signal="SIGKILL", ended=KILLED)
    assert report.totals()["pass"] == report.totals()["cases"] - 1


def _children() -> set:
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            return {int(p) for p in f.read().split()}
    except OSError:
        pytest.skip("no /proc children list here")


def test_an_interrupted_sweep_leaves_no_worker():
    """Ctrl-C (a KeyboardInterrupt where the pool hands a result over) kills and reaps
    every worker, the busy ones too."""
    from etops.conformance.runner import default_kmap

    before = _children()
    tasks = [{"opinfo": "add", "dtype": "float32"}, {"opinfo": "mul", "dtype": "float32"},
             {"opinfo": "sub", "dtype": "float32"}]

    def interrupted(task, result, crashes):
        raise KeyboardInterrupt

    config = {"selected": ["aten::add.out", "aten::mul.out", "aten::sub.out"], "hooks": None, "report_dir": None,
              "max_details": 3}
    with pytest.raises(KeyboardInterrupt):
        pool.run_pool(tasks, default_kmap(), config, 2, interrupted)
    assert _children() == before


class _SleepsInTheReference:
    """Hooks: ATen's reference of sample 1 of OpInfo 'add' never comes (outside every kernel call)."""

    @staticmethod
    def reference(case, expected):
        if case.opinfo == "add" and case.sample == 1:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            import time

            time.sleep(600)
        return expected


def test_a_worker_silent_outside_every_kernel_call_fails_its_task_blaming_no_kernel():
    report = conformance.run(["aten::add.out"], dtypes=["float32"], opinfo_filter={"add"}, progress=False,
                             isolated=True, jobs=1, hooks=_SleepsInTheReference(), timeout=1.0)
    assert [c for c in report.details if c.status in ("crash", "hang")] == []
    errors = [t["error"] for t in report.task_errors]
    assert any(e.startswith("worker hung outside any kernel call") for e in errors), errors
