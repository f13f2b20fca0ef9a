"""etops.dev.background: work run in a forked process while this one goes on
(the upstream test alongside the judge): its value comes back, an exception comes
back as BackgroundFailed with its traceback, a death as BackgroundFailed naming it;
the fork sees this process as it was when it started."""

from __future__ import annotations

import os
import signal
import time

import pytest

from etops.dev.background import Background
from etops.errors import BackgroundFailed


def test_the_value_comes_back_and_the_fork_kept_the_state_it_started_with():
    state = {"installed": "edit"}
    job = Background(lambda: (time.sleep(0.2), state["installed"], os.getpid())[1:])
    state["installed"] = "base"  # what this process swaps in afterwards does not reach the fork
    value, pid = job.result()
    assert value == "edit" and pid != os.getpid() and job.seconds >= 0.2
    with pytest.raises(RuntimeError, match="taken already"):
        job.result()


def test_torch_runs_single_threaded_in_the_fork():
    """(the parent's OpenMP thread team does not survive the fork: an ATen call using
    it there would wait forever)"""
    import torch

    torch.set_num_threads(2)
    torch.mul(torch.ones(1 << 20), 2.0)  # the parent's OpenMP threads started
    # (one thread checked first: a fork still on the parent's team would hang in the mul)
    assert Background(lambda: torch.get_num_threads() == 1 and float(torch.mul(torch.ones(1 << 20), 2.0).sum())).result() \
        == float(1 << 21)


def test_an_exception_comes_back_with_its_traceback():
    def fails():
        raise ValueError("no test binary")

    with pytest.raises(BackgroundFailed, match=r"(?s)Traceback.*ValueError: no test binary"):
        Background(fails).result()


def test_a_death_is_named():
    with pytest.raises(BackgroundFailed, match=r"SIGKILL.*without a result"):
        Background(lambda: os.kill(os.getpid(), signal.SIGKILL)).result()
    with pytest.raises(BackgroundFailed, match="exited with status 1 without a result"):
        Background(lambda: (lambda: None)).result()  # a value that does not pickle


def test_work_past_its_limit_is_killed_and_raises_background_failed():
    """A forked piece of work that never ends (a kernel spinning on a timing input)
    costs its limit: killed, reaped, BackgroundFailed saying so."""
    import os
    import time

    import pytest

    from etops.dev.background import Background
    from etops.errors import BackgroundFailed

    job = Background(lambda: time.sleep(600))
    start = time.perf_counter()
    with pytest.raises(BackgroundFailed, match="did not end within 0.5 s"):
        job.result(limit=0.5)
    assert time.perf_counter() - start < 30
    with pytest.raises(ChildProcessError):
        os.waitpid(job.pid, os.WNOHANG)  # reaped
    quick = Background(lambda: 1)
    with pytest.raises(ValueError, match="argument 'limit'"):
        quick.result(limit=0)
    assert quick.result(limit=60) == 1
