"""etops.run_queue: how long a process and the processes it forked waited for a CPU,
and the case clock's limit, which does not count that wait: a case whose process was
starved by other work on its core is no hang, one whose kernel spins or sleeps
forever still is. The contention is made, not hoped for: the writer and busy
processes pinned on one core."""

from __future__ import annotations

import os
import signal
import time

import pytest

from etops.conformance import case_clock
from etops.conformance.case import CaseResult
from etops.run_queue import RunQueueWait

CORE = sorted(os.sched_getaffinity(0))[0]


def _forked(body) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            body()
        finally:
            os._exit(0)
    return pid


def _spin_forever() -> None:
    while True:
        pass


def _on_one_core(*pids: int) -> None:
    for pid in pids:
        os.sched_setaffinity(pid, {CORE})


def _end(*pids: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)


def _asleep(pid: int) -> None:
    """Returns once process `pid` sleeps (its state in /proc 'S'): past its start-up work."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat", "rb") as f:
            if f.read().rsplit(b")", 1)[1].split()[0] == b"S":
                return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} never went to sleep")


def _busy_for(cpu_seconds: float) -> None:
    start = time.process_time()
    while time.process_time() - start < cpu_seconds:
        pass


def test_a_process_sharing_its_core_with_busy_ones_waits_one_that_sleeps_does_not():
    hogs = [_forked(_spin_forever) for _ in range(3)]
    worker = _forked(_spin_forever)
    sleeper = _forked(lambda: time.sleep(60))
    try:
        _asleep(sleeper)
        _on_one_core(worker, sleeper, *hogs)
        busy, idle = RunQueueWait(worker), RunQueueWait(sleeper)
        time.sleep(1.0)
        assert busy.seconds() >= 0.4  # a quarter of the core: three quarters of the time waiting
        assert idle.seconds() < 0.05
    finally:
        _end(worker, sleeper, *hogs)


def test_the_wait_of_a_forked_child_counts_for_its_parent():
    def parent():
        _forked(_spin_forever)
        time.sleep(60)

    hogs = [_forked(_spin_forever) for _ in range(3)]
    top = _forked(parent)
    children: list[int] = []
    try:
        while not children:  # the child forked
            time.sleep(0.05)
            with open(f"/proc/{top}/task/{top}/children") as f:
                children = [int(c) for c in f.read().split()]
        _on_one_core(*children, *hogs)
        waits = RunQueueWait(top)
        time.sleep(1.0)
        assert waits.seconds() >= 0.4
    finally:
        _end(*hogs)
        for child in children:  # the parent's child: killed here, the parent is killed before its finally runs
            os.kill(child, signal.SIGKILL)
        _end(top)


def test_a_process_that_is_gone_waited_nothing_and_a_bad_pid_is_named():
    gone = _forked(lambda: None)
    os.waitpid(gone, 0)
    assert RunQueueWait(gone).seconds() == 0.0
    for bad in (0, -3, "1"):
        with pytest.raises(ValueError, match="'pid'"):
            RunQueueWait(bad)  # type: ignore[arg-type]


def _case() -> CaseResult:
    return CaseResult("aten::mul.out", "aten::mul.Tensor", "mul", "float32", 4, 1, "pass", inputs="Tensor[5]:float32")


def _writer(clock, work) -> int:
    def body():
        case_clock.use(clock)
        since = case_clock.started(_case(), 1e-5)
        work()
        case_clock.ended(since)
        time.sleep(60)  # the case over: only the page says so
    return _forked(body)


def _watch(clock, seconds: float):
    """The first Hang the parent's poll sees within `seconds`, or None once the writer's case ended."""
    deadline = time.monotonic() + seconds
    while clock.current() is None:  # the case not begun yet
        assert time.monotonic() < deadline, "the writer never began its case"
        time.sleep(0.01)
    while time.monotonic() < deadline:
        hang = clock.overdue()
        if hang is not None:
            return hang
        if clock.current() is None:
            return None
        time.sleep(0.02)
    raise AssertionError("the case neither ended nor went past its limit")


@pytest.fixture()
def clock(monkeypatch):
    monkeypatch.setenv(case_clock.FLOOR_ENV, "1.0")
    made = case_clock.CaseClock()
    yield made
    made.close()


def test_a_case_starved_of_cpu_by_other_work_on_its_core_is_no_hang(clock):
    """0.3 s of work on a fifth of a core: about 1.5 s pass, past the 1 s limit; the
    time it waited for the core is not the case's."""
    hogs = [_forked(_spin_forever) for _ in range(4)]
    writer = _writer(clock, lambda: _busy_for(0.3))
    try:
        _on_one_core(writer, *hogs)
        started = time.monotonic()
        assert _watch(clock, 30) is None
        assert time.monotonic() - started > 1.0  # it did take longer than its limit
    finally:
        _end(writer, *hogs)


def test_a_spinning_case_is_a_hang_on_a_busy_core_and_says_how_long_it_waited(clock):
    hogs = [_forked(_spin_forever) for _ in range(2)]
    writer = _writer(clock, _spin_forever)
    try:
        _on_one_core(writer, *hogs)
        hang = _watch(clock, 30)
        assert hang is not None and hang.pid == writer
        assert hang.seconds - hang.waited > hang.limit == 1.0
        assert hang.waited > 0.5  # two thirds of its time: waiting
        assert "waiting for a CPU" in hang.case().message
    finally:
        _end(writer, *hogs)


def test_a_case_that_sleeps_forever_is_a_hang_at_its_limit(clock):
    writer = _writer(clock, lambda: time.sleep(60))
    try:
        started = time.monotonic()
        hang = _watch(clock, 30)
        assert hang is not None and hang.waited < 0.1
        assert 1.0 < time.monotonic() - started < 5.0
    finally:
        _end(writer)
