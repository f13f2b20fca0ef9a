"""etops.child_process: the one way the tools run work in a forked child: a body's
exit code, a child that raised, a limit that kills, a kill that reaps, how it
ended in process_end's words; a fork that blocks before the child runs replaced,
then ForkBlocked; CpuWatch; a program run in one (its environment, streams, an exec
that fails, forks from a thread pool); ChildCall's value, traceback, death and limit."""

from __future__ import annotations

import concurrent.futures
import os
import pickle
import select
import signal
import sys
import time

import pytest

import etops
from etops import child_process
from etops.child_process import BODY_RAISED, EXEC_FAILED, Child, ChildCall, CpuWatch
from processes import gone


def test_the_body_returns_the_exit_code_and_a_raise_is_its_own():
    child = Child(lambda: 7)
    assert child.wait() is False
    assert child.ended() == "exited with status 7"
    def raises():
        raise ValueError("no")
    raised = Child(raises)
    raised.wait()
    assert os.WEXITSTATUS(raised.status) == BODY_RAISED
    assert Child(lambda: None).wait() is False


def test_a_limit_kills_and_reaps_and_says_so():
    child = Child(lambda: time.sleep(600))
    assert child.poll() is None
    assert child.wait(0.3) is True
    assert child.ended() == "killed by SIGKILL"
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # reaped
    assert child.kill() == child.status  # once ended, kill only says how


def test_a_signal_is_named_and_poll_reaps_once():
    child = Child(lambda: os.kill(os.getpid(), signal.SIGTERM))
    while child.poll() is None:
        time.sleep(0.01)
    assert child.ended() == "killed by SIGTERM" and child.poll() == child.status
    assert child.seconds > 0


def test_a_call_gives_back_its_value_its_traceback_or_how_it_ended():
    assert ChildCall(lambda: {"a": 1}).result().value == {"a": 1}
    def fails():
        raise KeyError("no such kernel")
    raised = ChildCall(fails).result()
    assert raised.kind == "raised" and "KeyError: 'no such kernel'" in raised.error
    died = ChildCall(lambda: os.kill(os.getpid(), signal.SIGKILL)).result()
    assert died.kind == "ended" and died.ended() == "killed by SIGKILL"
    unpicklable = ChildCall(lambda: (lambda: None)).result()
    assert unpicklable.kind == "ended" and unpicklable.ended() == f"exited with status {BODY_RAISED}"


def _only_in_the_child():
    """A value of a class this module gets in the child only: it pickles there and
    does not load in the parent."""
    import sys

    class OnlyInTheChild:
        pass

    OnlyInTheChild.__qualname__ = OnlyInTheChild.__name__
    setattr(sys.modules[__name__], "OnlyInTheChild", OnlyInTheChild)
    return OnlyInTheChild()


def test_a_value_that_does_not_load_here_is_unreadable():
    result = ChildCall(_only_in_the_child).result()
    assert result.kind == "unreadable" and result.ended() == "exited with status 0"


def test_a_call_past_its_limit_is_timed_out_and_the_limit_is_checked():
    call = ChildCall(lambda: time.sleep(600))
    result = call.result(limit=0.3)
    assert result.kind == "timed out" and result.limit == 0.3
    with pytest.raises(RuntimeError, match="taken already"):
        call.result()
    with pytest.raises(ValueError, match="argument 'limit'"):
        ChildCall(lambda: 1).result(limit=0)


def test_ctrl_c_while_waiting_kills_and_reaps_the_child():
    def interrupt(signo, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        for limit in (None, 60.0):
            child = Child(lambda: time.sleep(600))
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            with pytest.raises(KeyboardInterrupt):
                child.wait(limit)
            assert child.ended() == "killed by SIGKILL"
            with pytest.raises(ChildProcessError):
                os.waitpid(child.pid, os.WNOHANG)  # reaped
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_end_closes_the_pipes_a_worker_waits_on_and_kills_one_that_stays():
    request_r, request_w = os.pipe()

    def leaves_at_eof() -> int:
        os.close(request_w)
        while os.read(request_r, 1):
            pass
        return 0

    worker = Child(leaves_at_eof)
    os.close(request_r)
    assert worker.end((request_w,), grace=30) == 0  # it read EOF and left

    stays = Child(lambda: time.sleep(60) or 0)
    assert os.WIFSIGNALED(stays.end((), grace=0.2))  # killed past its grace


def _forks_that_block(monkeypatch, flags: list, pids_w: int) -> None:
    """os.fork as qemu-user's now and then: the child of a fork that finds a flag
    file (each taken by one fork) sleeps before any of its own code runs, as if its
    fork had not returned; its pid written to `pids_w`. Limits short."""
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid == 0:
            for flag in flags:
                try:
                    os.unlink(flag)
                except FileNotFoundError:
                    continue
                os.write(pids_w, f"{os.getpid()}\n".encode())
                time.sleep(1000)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    monkeypatch.setattr(child_process, "FORK_STALL_SECONDS", 0.5)
    monkeypatch.setattr(child_process, "_READY_CHECK_EVERY", 0.1)


def test_a_fork_that_blocks_before_the_child_runs_is_replaced_by_a_fresh_one(monkeypatch, tmp_path):
    flag = tmp_path / "the-first-fork-blocks"
    flag.touch()
    r, w = os.pipe()
    _forks_that_block(monkeypatch, [flag], w)
    child = Child(lambda: 7)
    monkeypatch.undo()
    os.close(w)
    blocked = [int(p) for p in os.read(r, 1024).split()]
    os.close(r)
    assert child.wait() is False and child.ended() == "exited with status 7"  # the body ran, once
    assert len(blocked) == 1 and blocked[0] != child.pid and gone(blocked[0]) and not flag.exists()


def test_a_fork_that_blocks_every_time_raises_fork_blocked_and_leaves_no_child(monkeypatch, tmp_path):
    flags = [tmp_path / f"fork-{i}-blocks" for i in range(child_process.FORKS)]
    for flag in flags:
        flag.touch()
    ran = tmp_path / "the-body-ran"
    r, w = os.pipe()
    _forks_that_block(monkeypatch, flags, w)
    with pytest.raises(etops.ForkBlocked) as caught:
        Child(lambda: ran.touch())
    monkeypatch.undo()
    os.close(w)
    blocked = [int(p) for p in os.read(r, 1024).split()]
    os.close(r)
    err = caught.value
    assert len(blocked) == child_process.FORKS and all(gone(p) for p in blocked) and not ran.exists()
    assert (err.forks, err.seconds) == (child_process.FORKS, 0.5) and isinstance(err, OSError)
    assert err.blocked_in and "sleep" in err.blocked_in, err.blocked_in  # /proc's wchan of the last one
    assert "blocked before it ran" in str(err) and err.blocked_in in str(err)
    assert str(pickle.loads(pickle.dumps(err))) == str(err)


def test_a_child_that_runs_at_once_is_not_waited_for_and_one_that_dies_early_is_not_blocked():
    started = time.monotonic()
    child = Child(lambda: os.kill(os.getpid(), signal.SIGKILL))
    assert child.wait() is False and child.ended() == "killed by SIGKILL"
    assert time.monotonic() - started < child_process.FORK_STALL_SECONDS


def test_a_stall_is_time_asleep_without_cpu_not_time_runnable_or_waiting_on_io(monkeypatch):
    """CpuWatch: CPU time standing still counts towards a stall only while the
    process sleeps (S: a lock, a pipe); runnable (R, a loaded machine) or in disk I/O
    (D, pages read back) it is not blocked. Its clock is the `now` it is given."""
    seen = {"ticks": 7, "state": "S"}
    monkeypatch.setattr(child_process, "_cpu_ticks", lambda pid: (seen["ticks"], seen["state"]))
    watch = CpuWatch(12345)
    assert not watch.stalled(100.0, 20.0)  # the first look: the ticks seen
    assert not watch.stalled(119.0, 20.0) and watch.stalled(120.0, 20.0)  # asleep 20 s without CPU
    for state in ("D", "R"):
        seen["state"] = state
        assert not watch.stalled(200.0, 20.0) and not watch.stalled(300.0, 20.0)
    seen["state"] = "S"
    assert not watch.stalled(310.0, 20.0) and watch.stalled(330.0, 20.0)  # asleep again: counted from its last look awake
    seen["ticks"] = 8
    assert not watch.stalled(400.0, 20.0)  # CPU time moved
    monkeypatch.setattr(child_process, "_cpu_ticks", lambda pid: None)
    assert not CpuWatch(1).stalled(1e9, 20.0)  # /proc does not tell: never a stall
def _read_to_end(fd: int, limit: float = 60.0) -> bytes:
    """Everything written to the pipe `fd` until its last writer closed it; fails when
    it stays open `limit` seconds (a writer this test did not mean to keep it)."""
    out = b""
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            ready, _, _ = select.select([pipe], [], [], limit)
            assert ready, f"the pipe stayed open {limit} s: a process holds its write end"
            chunk = pipe.read(65536)
            if not chunk:
                return out
            out += chunk


def test_a_program_gets_its_environment_and_streams_and_says_how_it_ended(tmp_path):
    given = tmp_path / "in"
    given.write_bytes(b"from stdin")
    stdin = os.open(given, os.O_RDONLY)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    code = "import os, sys; sys.stdout.write(os.environ['ETOPS_X'] + sys.stdin.read()); sys.stderr.write('e'); sys.exit(3)"
    child = Child.program([sys.executable, "-c", code], {"ETOPS_X": "fresh "}, stdin=stdin, stdout=out_w, stderr=err_w)
    for fd in (stdin, out_w, err_w):
        os.close(fd)
    assert _read_to_end(out_r) == b"fresh from stdin" and _read_to_end(err_r) == b"e"
    assert child.wait(60) is False and child.ended() == "exited with status 3"


def test_a_program_that_cannot_start_exits_127_saying_why():
    err_r, err_w = os.pipe()
    child = Child.program(["/nonexistent/etops-program"], stderr=err_w)
    os.close(err_w)
    said = _read_to_end(err_r).decode()
    child.wait(60)
    assert child.ended() == f"exited with status {EXEC_FAILED}"
    assert "could not start /nonexistent/etops-program" in said


@pytest.mark.parametrize("argv, arg", [("python", "argv"), ([], "argv"), ([sys.executable, 3], "argv"),
                                       ([sys.executable], "stdout")])
def test_a_program_with_a_bad_argument_is_refused_naming_it(argv, arg):
    with pytest.raises(ValueError, match=f"argument '{arg}'"):
        Child.program(argv, stdout=-1 if arg == "stdout" else None)


def test_programs_started_from_a_thread_pool_hold_only_their_own_pipes():
    """Forks from several threads at once (as fuzz.sequences' pool makes them): each
    program's output pipe reaches its end when that program ends, though a slow
    program started meanwhile from another thread still runs."""
    slow = Child.program([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        def one(i: int) -> bytes:
            r, w = os.pipe()
            child = Child.program([sys.executable, "-c", f"print({i})"], stdout=w)
            os.close(w)
            out = _read_to_end(r)
            assert child.wait(60) is False and child.status == 0
            return out

        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            assert list(pool.map(one, range(8))) == [f"{i}\n".encode() for i in range(8)]
        assert slow.poll() is None
    finally:
        slow.kill()
