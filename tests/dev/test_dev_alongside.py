"""etops.dev.alongside: the timing pinned to one core while this process (and the
processes forked from it, and the ones named) keep to the others until it ends.
CPU affinity is faked (a machine of four cores), so that the tests read the same
on any machine; the fork sees the fake as this process does."""

from __future__ import annotations

import os
import time

import pytest

from etops.dev import alongside
from etops.errors import BackgroundFailed

CORES = {0, 1, 2, 3}


@pytest.fixture
def affinity(monkeypatch):
    """pid -> the cores last set for it (0: this process, or the fork that set its own)."""
    set_for: dict = {}

    def get(pid):
        return set(set_for.get(pid, CORES))

    def put(pid, cores):
        set_for[pid] = set(cores)

    monkeypatch.setattr(os, "sched_getaffinity", get)
    monkeypatch.setattr(os, "sched_setaffinity", put)
    return set_for


def test_the_work_runs_on_the_last_core_while_the_rest_keep_to_the_others(affinity):
    job = alongside.Alongside(lambda: os.sched_getaffinity(0), others=(4242,))
    assert not job.started and job.cores is None
    job.start()
    assert job.started and job.cores == 4  # its own core counted: it gives it back
    assert affinity[0] == {0, 1, 2} and affinity[4242] == {0, 1, 2}  # this process and the one named
    assert job.result() == {3}  # what the fork saw: its own core
    assert affinity[0] == CORES and affinity[4242] == CORES  # every core back once it ended
    job.close()


def test_poll_gives_every_core_back_to_processes_forked_since_once_the_work_ended(affinity):
    job = alongside.Alongside(lambda: time.sleep(0.3))
    job.start()
    job.poll([777])  # still running: nothing moves
    assert affinity[0] == {0, 1, 2} and 777 not in affinity
    deadline = time.monotonic() + 10
    while affinity[0] != CORES and time.monotonic() < deadline:
        time.sleep(0.05)
        job.poll([777])
    assert affinity[0] == CORES and affinity[777] == CORES
    job.result()
    job.close()


def test_starting_twice_forks_once_and_one_core_forks_nothing(affinity, monkeypatch):
    job = alongside.Alongside(os.getpid)
    job.start()
    first = job._job.pid
    job.start()
    assert job._job.pid == first and job.result() == first
    job.close()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    lone = alongside.Alongside(os.getpid)
    lone.start()
    assert not alongside.possible() and not lone.started
    with pytest.raises(RuntimeError, match="never started"):
        lone.result()
    lone.close()


def test_a_work_that_raises_or_dies_is_background_failed_and_close_ends_one_left_running(affinity):
    raising = alongside.Alongside(lambda: 1 / 0)
    raising.start()
    with pytest.raises(BackgroundFailed, match="ZeroDivisionError"):
        raising.result()
    raising.close()
    dying = alongside.Alongside(lambda: os._exit(3))
    dying.start()
    with pytest.raises(BackgroundFailed, match="status 3"):
        dying.result()
    dying.close()
    left = alongside.Alongside(lambda: time.sleep(60))
    left.start()
    pid = left._job.pid
    started = time.monotonic()
    left.close()
    assert time.monotonic() - started < 10 and affinity[0] == CORES
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # ended and reaped
