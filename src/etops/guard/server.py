"""The guard process of this process: one forked child that serves guarded calls
until one kills it, so that a guarded call costs a round trip over two pipes
instead of a fork (a fork of a process with torch loaded, and the child's exit,
cost tens of milliseconds).

The guard process is a snapshot of this process at its fork: it has the kernels
and overrides registered then, and the kernel objects made by then. It is forked
anew when it died (a crash), when the registry changed since (a registration,
override or deregistration: the registry's generation), when a call's kernel
object did not exist at its fork, when a call's arguments do not pickle, and in
every child this process forks (the guard process belongs to the process that
forked it). The call that forks it is its first, made from the fork's copy of its
arguments. ``reset()`` drops it.

A guarded call never hangs: the guard process runs torch single-threaded (child.py:
the OpenMP thread team of this process does not survive the fork), and the caller
waits for each of its reports with a limit: ``set_timeout`` seconds for the whole
call (default DEFAULT_TIMEOUT), and STALL_SECONDS without any CPU time used by the
guard process (blocked); then the guard process is killed and the call raises
etops.GuardTimeout naming the kernel. Any exception while a call is in flight
(Ctrl-C's KeyboardInterrupt) kills and reaps the guard process before it propagates.

A fork that blocks before the guard process runs (qemu-user does, now and then) is
child_process.Child's to replace. GuardTimeout says whether the guard process had
begun the kernel (it sends the run's layout right before each kernel call) and where
it waited.
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import struct
import tempfile
import threading
import time
from typing import NamedTuple

from .. import _native
from ..child_process import Child, CpuWatch, waiting_in
from ..errors import GuardTimeout
from ..layouts import layout_is_preserved
from ..registry import registry
from .child import serve
from .wire import dumps, frame, read_exact, read_frame_body, write_all

#: the fault record guard_signals.c writes after "ETGF": signo, is_write, si_code, address, stack pointer
_FAULT = struct.Struct("=iiiQQ")

#: seconds a guarded call may take by default (set_timeout changes it)
DEFAULT_TIMEOUT = 600.0
#: seconds without CPU time used by the guard process after which a call in flight
#: counts as blocked (checked where /proc gives a process's CPU time)
STALL_SECONDS = 20.0
#: how often the caller looks at the guard process's CPU time while waiting
_CHECK_EVERY = 1.0

_timeout: float | None = DEFAULT_TIMEOUT


def set_timeout(seconds: float | None) -> float | None:
    """Sets how long a guarded call may take (seconds, or None: no limit) before
    its guard process is killed and the call raises etops.GuardTimeout; returns
    the previous limit. A guard process that stops using CPU time is killed after
    STALL_SECONDS whatever the limit."""
    global _timeout
    if seconds is not None and not seconds > 0:
        raise ValueError(f"etops.guard.set_timeout: argument 'seconds' must be positive or None, got {seconds!r}")
    previous, _timeout = _timeout, None if seconds is None else float(seconds)
    return previous


class _TimedOut(Exception):
    """The guard process did not report in time: whether it `stalled` (used no CPU
    time) rather than ran out of time, whether it had `started` the kernel, and where
    it waited (`blocked_in`, /proc's wchan, or None)."""

    def __init__(self, stalled: bool, started: bool, blocked_in: str | None = None):
        super().__init__(stalled, started, blocked_in)
        self.stalled, self.started, self.blocked_in = stalled, started, blocked_in


class Died(NamedTuple):
    """The outcome of a call during which the guard process died: its exit status,
    its last fault record (or None), the layout of the run that died and its log
    since the call began."""

    status: int
    fault: tuple | None
    layout: list
    log: str


class GuardProcess:
    """One guard process: its pid, pipes, log file and the kernels it knows."""

    def __init__(self, kernel, info, bound: dict, reach: int | None = None):
        self.generation = _native.registry_generation()
        self.kernels = {id(k): k for k in registry().loaded_kernels()}
        self.kernels[id(kernel)] = kernel  # held here: the ids stay those of the child's objects
        self.log = tempfile.TemporaryFile()
        request_r, self.request_w = os.pipe()
        self.report_r, report_w = os.pipe()
        preserve = layout_is_preserved()

        def guard_process() -> None:  # never returns (serve leaves by os._exit)
            os.close(self.request_w)
            os.close(self.report_r)
            os.dup2(self.log.fileno(), 2)
            serve(self.kernels, (kernel, info, bound, reach), request_r, report_w, preserve)

        self.child = Child(guard_process)
        self.pid = self.child.pid
        child_ends = [request_r, report_w]  # the guard process's ends, closed here
        try:
            self.owner = self.child.owner
            while child_ends:
                os.close(child_ends.pop())
            self.log_start = 0
            self._poll = select.poll()
            self._poll.register(self.report_r, select.POLLIN)
        except BaseException:  # interrupted right after the fork: no orphan, no open pipe or log
            self.child.kill()
            for fd in (*child_ends, self.request_w, self.report_r):
                os.close(fd)
            self.log.close()
            raise

    def knows(self, kernel) -> bool:
        """Whether a request can name `kernel`: the registry is as it was at the fork
        and the kernel object existed there."""
        return self.kernels.get(id(kernel)) is kernel and _native.registry_generation() == self.generation

    def request(self, kernel, bound: dict, reach: int | None = None) -> bool:
        """Sends one call (guard regions of `reach` bytes, None: the default); False (nothing sent) when its arguments do not pickle or
        the guard process is gone."""
        try:
            body = dumps((id(kernel), bound, layout_is_preserved(), reach))
        except Exception:  # noqa: BLE001 - a value that only a fork can carry
            return False
        self.log_start = os.lseek(self.log.fileno(), 0, os.SEEK_END)
        try:
            write_all(self.request_w, frame(b"C", body))
        except BrokenPipeError:  # it died between calls (killed from outside)
            return False
        return True

    def _wait_for_report(self, deadline: float | None, started: bool) -> None:
        """Returns once the guard process has written (or closed) its report pipe;
        raises _TimedOut at `deadline` (time.monotonic()), or when the guard process
        slept without CPU time for STALL_SECONDS; `started`: whether it has begun
        the kernel (for the _TimedOut)."""
        watch = CpuWatch(self.pid)
        while True:
            now = time.monotonic()
            wait = _CHECK_EVERY if deadline is None else min(_CHECK_EVERY, deadline - now)
            if wait <= 0:
                raise _TimedOut(False, started)
            if self._poll.poll(wait * 1000.0):
                return
            if watch.stalled(time.monotonic(), STALL_SECONDS):
                raise _TimedOut(True, started, waiting_in(self.pid))

    def outcome(self, deadline: float | None = None):
        """The outcome of the call in flight (see child.run_guarded), or Died when
        the guard process died before sending it; raises _TimedOut when the guard
        process sends nothing in time (_wait_for_report)."""
        layout, fault, started = [], None, False
        while True:
            self._wait_for_report(deadline, started)  # a frame, once begun, follows whole (or the pipe closes)
            tag = read_exact(self.report_r, 1)
            if tag in (b"L", b"P"):
                body = read_frame_body(self.report_r)
                if body is None:
                    break
                if tag == b"P":
                    return pickle.loads(body)
                layout, started = pickle.loads(body), True
            elif tag == b"E" and read_exact(self.report_r, 3) == b"TGF":
                record = read_exact(self.report_r, _FAULT.size)
                fault = _FAULT.unpack(record) if len(record) == _FAULT.size else None
            else:
                break
        log = self._log_since_call()
        return Died(self.close(), fault, layout, log)

    def _log_since_call(self) -> str:
        os.lseek(self.log.fileno(), self.log_start, os.SEEK_SET)
        return os.read(self.log.fileno(), 1 << 20).decode("utf-8", "replace")

    def kill(self) -> None:
        """Ends the guard process now (a call in flight, interrupted or out of time)
        and reaps it: it never outlives the call as an orphan."""
        self.child.kill()
        self.close()

    def close(self, wait: bool = True) -> int:
        """Ends the guard process (it exits when its request pipe closes); its exit
        status (after waiting for it when `wait`), or 0."""
        for fd in (self.request_w, self.report_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.request_w = self.report_r = -1
        self.log.close()
        if not wait or self.owner != os.getpid():
            return 0
        self.child.wait()
        return self.child.wait_status


_lock = threading.Lock()
_current: GuardProcess | None = None


def run(kernel, info, bound: dict, reach: int | None = None):
    """The outcome of one guarded call (child.run_guarded's, or Died; its tensors
    between guard regions of `reach` bytes, None: the default), through this
    process's guard process (forked here when needed). Raises GuardTimeout when it
    does not answer in time; whatever interrupts the call kills it first."""
    global _current
    timeout = _timeout
    deadline = None if timeout is None else time.monotonic() + timeout
    with _lock:
        # while the call is in flight: an interrupted one leaves the pipes out of step
        process, _current = _current, None
        try:
            if process is None or not process.knows(kernel) or not process.request(kernel, bound, reach):
                if process is not None:
                    old, process = process, None
                    old.close()
                process = GuardProcess(kernel, info, bound, reach)
            outcome = process.outcome(deadline)
        except _TimedOut as timed_out:
            if process is not None:
                process.kill()
            seconds = STALL_SECONDS if timed_out.stalled or timeout is None else timeout
            raise GuardTimeout(info.name, seconds, timed_out.stalled, timed_out.started, timed_out.blocked_in) from None
        except BaseException:  # Ctrl-C, or a broken report: the guard process goes too
            if process is not None:
                process.kill()
            raise
        if not isinstance(outcome, Died):
            _current = process
        return outcome


def guard_pid() -> int | None:
    """The pid of this process's guard process; None when there is none yet (or it died)."""
    process = _current
    return process.pid if process is not None and process.owner == os.getpid() else None


def reset() -> None:
    """Ends this process's guard process; the next guarded call forks a new one."""
    global _current
    with _lock:
        process, _current = _current, None
    if process is not None:
        process.close()


def _forget_in_fork_child() -> None:
    """In a child forked from this process: the guard process is the parent's."""
    global _current, _lock
    process, _current, _lock = _current, None, threading.Lock()
    if process is not None:
        process.close(wait=False)


def _close_at_exit() -> None:
    """At exit: the guard process ends on its own when its pipe closes."""
    process = _current
    if process is not None and process.owner == os.getpid():
        process.close(wait=False)


os.register_at_fork(after_in_child=_forget_in_fork_child)
atexit.register(_close_at_exit)
