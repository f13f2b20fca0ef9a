"""etops.dev.task_processes: a judge side's tasks in forked task processes. A task
whose process dies, stalls or fails runs again in the caller, told how its process
ended as an Outcome (or, for a runner that raised, its traceback); the others keep
their results, in order."""

from __future__ import annotations

import os
import signal
import time

import pytest

from etops.conformance.outcome import HUNG, KILLED, Outcome, of_death
from etops.dev import task_processes as tp


def _never_again(task, ended, failure, hangs):
    raise AssertionError(f"task {task} ran again: {ended} {failure}")


def test_results_come_back_in_order_from_two_processes():
    pids = tp.run_tasks(list(range(12)), lambda i, hangs: (i, os.getpid()), _never_again, workers=2)
    assert [i for i, _pid in pids] == list(range(12))
    assert os.getpid() not in {pid for _i, pid in pids}


def test_a_task_that_kills_its_process_runs_again_here_and_the_rest_go_on():
    def task(i, hangs):
        if i == 3:
            os.kill(os.getpid(), signal.SIGSEGV)  # the guard's fault reporter ends the process
        return i * 10

    again = []

    def rerun(i, ended, failure, hangs):
        again.append((i, ended, failure))
        return "here"

    results = tp.run_tasks(list(range(8)), task, rerun, workers=2)
    assert results == [0, 10, 20, "here", 40, 50, 60, 70]
    assert [(i, failure) for i, _ended, failure in again] == [(3, "")]
    assert again[0][1] == Outcome("crash", signal="SIGSEGV", ended=KILLED), again[0][1]


def test_a_task_that_raises_runs_again_here_with_the_traceback():
    def task(i, hangs):
        if i == 1:
            raise ValueError("the runner's own bug")
        return i

    again = []
    results = tp.run_tasks([0, 1, 2], task, lambda i, ended, failure, hangs: again.append((ended, failure)) or -1,
                           workers=1)
    assert results == [0, -1, 2]
    assert again[0][0] is None and "ValueError: the runner's own bug" in again[0][1]


def test_a_rerun_that_forks_a_lasting_process_does_not_hold_the_end_of_the_others(monkeypatch):
    """A task run again here may fork a process that outlives it (the guard process)
    and inherits every task process's pipe ends: the other task processes then never
    see their request pipe close; they are killed END_GRACE after it, never waited for
    forever."""
    monkeypatch.setattr(tp, "END_GRACE", 0.5)
    holders = []

    def task(i, hangs):
        if i == 0:
            raise ValueError("run me again here")
        time.sleep(0.3)
        return i

    def rerun(i, ended, failure, hangs):
        pid = os.fork()
        if pid == 0:  # holds copies of every pipe end of the running task processes
            time.sleep(60)
            os._exit(0)
        holders.append(pid)
        return -1

    start = time.monotonic()
    try:
        assert tp.run_tasks(list(range(4)), task, rerun, workers=2) == [-1, 1, 2, 3]
        assert time.monotonic() - start < 30
    finally:
        for pid in holders:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def test_a_task_that_stops_using_cpu_time_is_killed_and_runs_again(monkeypatch):
    monkeypatch.setattr(tp, "STALL_SECONDS", 1.0)
    monkeypatch.setattr(tp, "_CHECK_EVERY", 0.2)

    def task(i, hangs):
        if i == 0:
            time.sleep(600)
        return i

    start = time.monotonic()
    again = []
    results = tp.run_tasks([0, 1], task, lambda i, ended, failure, hangs: again.append((ended, failure)) or "here",
                           workers=2)
    assert results == ["here", 1]
    assert again == [(Outcome("crash", seconds=1.0, ended=HUNG), "")]
    assert time.monotonic() - start < 60


def _sleeps_in_a_case(i, hangs, spin=False):
    """Task 1 publishes a case on its process's case clock, then never returns from
    it (time.sleep with every signal it could be asked to stop by ignored, as a
    kernel in C code would; or a busy loop), until it is sent again with that case hung."""
    from etops.conformance import case_clock
    from etops.conformance.case import CaseResult

    if i == 1 and not hangs:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
            signal.signal(sig, signal.SIG_IGN)
        case_clock.set_label(1)
        case_clock.started(CaseResult("aten::mul.out", "aten::mul.Tensor", "mul", "float32", 4, 0, "pass",
                                      inputs="Tensor[5, 1]:float32"), 1e-5)
        while True:
            if spin:
                continue
            time.sleep(600)
    return i, [(h.label, h.where, h.inputs, h.limit) for h in hangs]


@pytest.mark.parametrize("spin", [False, True], ids=["sleeps", "spins"])
def test_a_case_past_its_limit_kills_its_process_and_the_task_goes_on_in_a_new_one(monkeypatch, spin):
    """The case clock says task 1's case has run past its limit: its process is killed
    (neither the stall watch nor the task timeout had to fire), the task is sent to a
    new task process with that Hang (what it skips and records), never run again here;
    the other tasks keep their results."""
    monkeypatch.setenv("ETOPS_CASE_TIMEOUT_FLOOR", "0.5")
    monkeypatch.setattr(tp, "STALL_SECONDS", 3600.0)
    monkeypatch.setattr(tp, "TASK_TIMEOUT", 3600.0)
    before = _children()
    results = tp.run_tasks([0, 1, 2, 3], lambda i, hangs: _sleeps_in_a_case(i, hangs, spin), _never_again, workers=2)
    assert results == [(0, []), (1, [(1, (4, 0), "Tensor[5, 1]:float32", 0.5)]), (2, []), (3, [])]
    assert _children() == before


def test_no_task_process_outlives_the_call():
    before = _children()
    tp.run_tasks(list(range(4)), lambda i, hangs: i, _never_again, workers=2)
    assert _children() == before


def test_workers_follow_the_environment(monkeypatch):
    monkeypatch.setenv("ETOPS_DEV_WORKERS", "3")
    assert tp.default_workers() == 3
    monkeypatch.delenv("ETOPS_DEV_WORKERS")
    assert 1 <= tp.default_workers() <= tp.MAX_WORKERS


def test_a_death_the_rerun_does_not_explain_is_a_crash_finding_of_its_own():
    """A task process that died in a task which passes when run again through the
    guard process: an earlier call corrupted that process outside every guard region.
    The death stays a finding, never noise."""
    from etops.conformance.case import TaskResult
    from etops.dev.judge import _run_again

    where = ("aten::add.out", {"opinfo": "add", "dtype": "float32"})
    died = _run_again(TaskResult("add", "float32"), where, of_death(-signal.SIGABRT))
    assert [status for status, _v in died.failing.values()] == ["crash"]
    assert "SIGABRT" in died.details[0].message and "guard region" in died.details[0].message
    failed = _run_again(TaskResult("add", "float32"), where, None)
    assert failed.failing == {}


def test_a_task_process_death_is_an_outcome_in_the_report_the_json_and_the_gate():
    """How the task process died travels as an Outcome into the crash case: its
    signal is in the case's Outcome and its JSON, its cause (one of its own, not the
    signal of a crash in the call) and its kind, which gates etops dev."""
    from etops.conformance import clusters
    from etops.conformance.case import TaskResult
    from etops.conformance.gating import AGAINST_BASE, classify, gates
    from etops.conformance.outcome import CORRUPTED
    from etops.dev.judge import _run_again

    where = ("aten::add.out", {"opinfo": "add", "dtype": "float32"})
    died = _run_again(TaskResult("add", "float32"), where, of_death(-signal.SIGSEGV))
    (case,) = died.details
    assert case.outcome == Outcome("crash", signal="SIGSEGV", ended=CORRUPTED)
    assert TaskResult.from_json(died.to_json()).details[0].outcome == case.outcome
    assert clusters.cause(case) == (CORRUPTED, "SIGSEGV")
    assert clusters.signature(case) == "corrupted earlier: killed by SIGSEGV"
    kind = classify(case.outcome, AGAINST_BASE)
    assert kind == "crash" and gates(kind, "git") and not gates(kind, "git", shared=True)
    exited = _run_again(TaskResult("add", "float32"), where, of_death(3)).details[0]
    assert exited.outcome == Outcome("crash", error="exit status 3", ended=CORRUPTED)
    assert "exited with exit status 3" in exited.message


def _children() -> set:
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            return {int(p) for p in f.read().split()}
    except OSError:
        pytest.skip("no /proc children list here")


def _grows_in_a_case(i, hangs, in_kernel=False):
    """Task 1 enters a case (its kernel call in flight when `in_kernel`) and grows its
    resident memory by 192 MiB, held for at most 20 s, until it is sent again with that
    case skipped; task 2 grows as much outside any case, every time it runs until its
    kills exhaust its pass (case_clock.exhausted)."""
    from etops.conformance import case_clock
    from etops.conformance.case import CaseInfo, CaseResult

    from grown import grow_and_hold as grow

    if i == 1 and not hangs:
        case_clock.set_label(2)
        info = CaseInfo("aten::convolution.out", "aten::convolution", "nn.functional.conv_transpose3d", "float32", 8, 0)
        if in_kernel:
            case_clock.started(CaseResult(**vars(info), status="pass", inputs="Tensor[1, 4, 5, 5, 2050]"), None)
        else:
            case_clock.entered(info)
        grow()
    if i == 2 and not case_clock.exhausted(hangs, 0):  # as etops dev's judge gives a pass up
        grow()
    return i, [(h.label, h.where, h.in_kernel) for h in hangs]


@pytest.mark.parametrize("in_kernel", [False, True], ids=["aten", "kernel"])
def test_a_task_process_past_its_memory_limit_is_killed_and_its_case_skipped_for_size(monkeypatch, in_kernel):
    """A task process whose resident memory grows past its limit (ETOPS_DEV_TASK_MEMORY_MB,
    here 64 MiB; 192 MiB grown) is killed within a check, never waited for: the case it
    is in (published on its case clock for the whole case, in ATen's reference as in the
    kernel's call) goes to the task sent again to a new process as an OverMemory, which
    skips it; never run again here. A process that grows outside any case is killed as
    often, MAX_HANGS_PER_TASK times; no pass's cases are skipped for it."""
    monkeypatch.setenv("ETOPS_DEV_TASK_MEMORY_MB", "64")
    monkeypatch.setenv("ETOPS_CASE_TIMEOUT_FLOOR", "3600")  # no hang: the memory limit alone
    monkeypatch.setattr(tp, "STALL_SECONDS", 3600.0)
    monkeypatch.setattr(tp, "TASK_TIMEOUT", 3600.0)
    from etops.conformance import case_clock

    before = _children()
    start = time.monotonic()
    results = tp.run_tasks([0, 1, 2, 3], lambda i, hangs: _grows_in_a_case(i, hangs, in_kernel), _never_again,
                           workers=2)
    assert results[0] == (0, []) and results[3] == (3, [])
    assert results[1] == (1, [(2, (8, 0), in_kernel)])
    assert results[2] == (2, [(-1, (-1, -1), False)] * case_clock.MAX_HANGS_PER_TASK)
    assert time.monotonic() - start < 60  # no grown process held for its 20 s
    assert _children() == before


def test_a_case_skipped_for_size_is_counted_and_shown_never_a_case_run():
    """An OverMemory recorded in a pass's TaskResult is a case skipped for size: not a
    case run (no tally, no failing case, no pass), its words kept through the JSON; the
    pass it belongs to gives up after MAX_HANGS_PER_TASK of them, another pass does not;
    a task run again in the judge's own process gives every pass up after one."""
    from etops.conformance import case_clock
    from etops.conformance.case import CaseInfo, TaskResult

    info = CaseInfo("aten::convolution.out", "aten::convolution", "nn.functional.conv_transpose3d", "float32", 8, 0)
    over = case_clock.OverMemory(2, 1234, info, 3 << 30, 2 << 30, False)
    result = case_clock.with_hangs(TaskResult("nn.functional.conv_transpose3d", "float32"), [over], 2)
    assert result.tallies == {} and result.failing == {} and result.every_case == {}
    assert list(result.too_large) == [info.id] and "skipped for size" in result.too_large[info.id]
    assert TaskResult.from_json(result.to_json()).too_large == result.too_large
    assert case_clock.with_hangs(TaskResult("x", "float32"), [over], 1).too_large == {}
    many = [over] * case_clock.MAX_HANGS_PER_TASK
    assert case_clock.exhausted(many, 2) and not case_clock.exhausted(many, 1)
    assert case_clock.skipped(many, 2) == {(8, 0)} and case_clock.skipped(many, 1) == set()
    # run again in the judge's own process (no memory limit there): one such case gives every pass up
    assert case_clock.exhausted([over], 1, here=True) and not case_clock.exhausted([over], 1)
