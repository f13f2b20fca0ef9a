"""A guarded call never hangs (issue 33): after multithreaded torch work in the
caller (libgomp's thread team does not survive the fork of the guard process) it
returns the right result; a guard process that blocks, or runs past
etops.guard.set_timeout, is killed and the call raises etops.GuardTimeout naming
the kernel; Ctrl-C during a guarded call raises KeyboardInterrupt at once and the
guard process is killed, not orphaned.

The fresh interpreters run with a limit of their own, so a regression fails here
instead of hanging the suite."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch

import etops
from etops.guard import child, server
from etops.guard.wire import frame, write_all
from fresh_python import SRC, start_python
from processes import gone

_AFTER_THREADED_TORCH = start_python(
    """
    import torch, etops, etops.guard
    etops.guard.set_timeout(120)  # a regression: GuardTimeout (it stalls), not a hang
    reg = etops.registry()
    a = torch.randn(300, 300)
    a + a  # torch's OpenMP thread team starts here
    out = torch.empty(300, 300)
    assert etops.guard.call(reg.aten.add.out, a, a, out=out) is out
    assert torch.equal(out, a + a)
    # etops' own copy of a non-contiguous input in the guard process
    got = etops.guard.call(reg.aten.add.out, a.t(), a, out=torch.empty(300, 300))
    assert torch.equal(got, a.t() + a)
    b = torch.randn(256, 256)
    b @ b  # MKL's threads too
    assert torch.allclose(etops.guard.call(reg.aten.mm.out, b, b.t(), out=torch.empty(0)), b @ b.t(), atol=1e-3)
    print("all right")
    """
)


def test_a_guarded_call_after_multithreaded_torch_work_returns_the_right_result():
    proc = _AFTER_THREADED_TORCH.result()
    assert proc.returncode == 0 and "all right" in proc.stdout, proc.stderr[-3000:]


def _hang_reporting_pid(fd: int, busy: bool, in_kernel: bool = True):
    """A stand-in for child.run_guarded that writes the guard process's pid to `fd`
    and never returns: asleep (blocked), or `busy` computing; `in_kernel`: after
    reporting the run's layout, as a kernel that hangs does (else before: a guard
    process blocked before it began the kernel)."""

    def hang(_kernel, _info, _bound, report_fd, *_args, **_kwargs):
        os.write(fd, f"{os.getpid()}\n".encode())
        if in_kernel:
            write_all(report_fd, frame(b"L", pickle.dumps([])))
        while True:
            if not busy:
                time.sleep(1000)

    return hang


@pytest.mark.parametrize("busy", [False, True], ids=["blocked", "too-long"])
def test_a_guard_process_that_does_not_answer_is_killed_and_the_call_raises_guard_timeout(reg, monkeypatch, busy):
    r, w = os.pipe()
    etops.guard.reset()  # the next call forks a guard process that hangs
    monkeypatch.setattr(child, "run_guarded", _hang_reporting_pid(w, busy))
    monkeypatch.setattr(server, "_CHECK_EVERY", 0.1)
    monkeypatch.setattr(server, "STALL_SECONDS", 1.0 if not busy else 1000.0)
    previous = etops.guard.set_timeout(1000.0 if not busy else 2.0)
    try:
        with pytest.raises(etops.GuardTimeout) as info:
            etops.guard.call(reg.aten.add.out, torch.ones(2), torch.ones(2), out=torch.empty(2))
    finally:
        etops.guard.set_timeout(previous)
        monkeypatch.undo()
        os.close(w)
    pid = int(os.read(r, 64).split()[0])
    os.close(r)
    err = info.value
    assert err.op == "aten::add.out" and err.stalled is (not busy) and err.started
    assert "aten::add.out" in str(err)
    assert ("please report it" if not busy else "etops.guard.set_timeout(seconds)") in str(err)
    assert isinstance(err, TimeoutError) and isinstance(err, etops.EtopsError)
    assert gone(pid)
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err)
    # the next guarded call forks a new guard process (the real child.run_guarded)
    assert torch.equal(etops.guard.call(reg.aten.add.out, torch.ones(2), torch.ones(2)), torch.full((2,), 2.0))


def test_a_guard_process_that_blocks_before_it_began_the_kernel_says_the_kernel_did_not_run(reg, monkeypatch):
    r, w = os.pipe()
    etops.guard.reset()
    monkeypatch.setattr(child, "run_guarded", _hang_reporting_pid(w, busy=False, in_kernel=False))
    monkeypatch.setattr(server, "_CHECK_EVERY", 0.1)
    monkeypatch.setattr(server, "STALL_SECONDS", 0.5)
    try:
        with pytest.raises(etops.GuardTimeout) as info:
            etops.guard.call(reg.aten.add.out, torch.ones(2), torch.ones(2), out=torch.empty(2))
    finally:
        monkeypatch.undo()
        os.close(w)
    pids = [int(p) for p in os.read(r, 1024).split()]
    os.close(r)
    err = info.value
    assert len(pids) == 1 and gone(pids[0])
    assert (err.op, err.stalled, err.started, err.seconds) == ("aten::add.out", True, False, 0.5)
    assert "before it ran the kernel" in str(err) and "The kernel did not run" in str(err)
    # where it slept, from /proc (time.sleep's wait: a timer, not a lock or a pipe)
    assert err.blocked_in and "sleep" in err.blocked_in, err.blocked_in
    again = pickle.loads(pickle.dumps(err))
    assert (again.started, again.blocked_in, str(again)) == (False, err.blocked_in, str(err))


def test_set_timeout_refuses_what_is_not_a_positive_limit():
    with pytest.raises(ValueError, match="argument 'seconds'"):
        etops.guard.set_timeout(0)
    previous = etops.guard.set_timeout(None)
    assert etops.guard.set_timeout(previous) is None


_INTERRUPTED = """
import os, signal, sys, time, torch, etops, etops.guard
from etops.guard import child
# Ctrl-C raises KeyboardInterrupt, as in a terminal (a job started in the background by a
# shell without job control, as CI's may be, inherits SIGINT ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
r, w = os.pipe()

def hang(*_args, **_kwargs):
    os.write(w, f"{os.getpid()}\\n".encode())
    print("guard process running", flush=True)
    os.close(1)  # an orphan (a regression) would keep the test's pipe open
    time.sleep(1000)

child.run_guarded = hang
reg = etops.registry()
try:
    etops.guard.call(reg.aten.add.out, torch.ones(2), torch.ones(2), out=torch.empty(2))
except KeyboardInterrupt:
    pid = int(os.read(r, 64).split()[0])
    try:
        os.kill(pid, 0)
        print("guard process", pid, "still there")
    except ProcessLookupError:
        print("interrupted; guard process gone")
"""


def test_ctrl_c_during_a_guarded_call_raises_keyboard_interrupt_and_kills_the_guard_process():
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", _INTERRUPTED], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    limit = threading.Timer(300, proc.kill)  # never wait forever for the first line
    limit.start()
    try:
        line = proc.stdout.readline()  # the guard process is in the call
        limit.cancel()
        assert line == "guard process running\n", proc.stderr.read() if not line else line
        # the guard process prints as soon as it is forked, while the caller may still run
        # its own after-fork handlers (logging's _releaseLock), where Python ignores a
        # KeyboardInterrupt ("Exception ignored in"): give the caller time to be waiting
        time.sleep(1)
        os.kill(proc.pid, signal.SIGINT)  # one Ctrl-C, to the caller only
        out, err = proc.communicate(timeout=120)
    finally:
        limit.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0 and "interrupted; guard process gone" in out, err[-3000:]
