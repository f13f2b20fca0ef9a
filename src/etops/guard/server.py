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
"""

from __future__ import annotations

import atexit
import os
import pickle
import struct
import tempfile
import threading

from .. import _native
from ..layouts import layout_is_preserved
from ..registry import registry
from .child import serve
from .wire import dumps, frame, read_exact, read_frame_body, write_all

#: the fault record guard_signals.c writes after "ETGF": signo, is_write, si_code, address
_FAULT = struct.Struct("=iiiQ")


class Died(Exception):
    """The guard process died during a call: its exit status, its last fault record
    (or None), the layout of the run that died and its log since the call began."""

    def __init__(self, status: int, fault, layout, log: str):
        super().__init__(status)
        self.status, self.fault, self.layout, self.log = status, fault, layout, log


class GuardProcess:
    """One guard process: its pid, pipes, log file and the kernels it knows."""

    def __init__(self, kernel, info, bound: dict):
        self.generation = _native.registry_generation()
        self.kernels = {id(k): k for k in registry().loaded_kernels()}
        self.kernels[id(kernel)] = kernel  # held here: the ids stay those of the child's objects
        self.log = tempfile.TemporaryFile()
        request_r, self.request_w = os.pipe()
        self.report_r, report_w = os.pipe()
        preserve = layout_is_preserved()
        self.pid = os.fork()
        if self.pid == 0:  # the guard process
            os.close(self.request_w)
            os.close(self.report_r)
            os.dup2(self.log.fileno(), 2)
            serve(self.kernels, (kernel, info, bound), request_r, report_w, preserve)
        self.owner = os.getpid()
        os.close(request_r)
        os.close(report_w)
        self.log_start = 0

    def knows(self, kernel) -> bool:
        """Whether a request can name `kernel`: the registry is as it was at the fork
        and the kernel object existed there."""
        return self.kernels.get(id(kernel)) is kernel and _native.registry_generation() == self.generation

    def request(self, kernel, bound: dict) -> bool:
        """Sends one call; False (nothing sent) when its arguments do not pickle or
        the guard process is gone."""
        try:
            body = dumps((id(kernel), bound, layout_is_preserved()))
        except Exception:  # noqa: BLE001 - a value that only a fork can carry
            return False
        self.log_start = os.lseek(self.log.fileno(), 0, os.SEEK_END)
        try:
            write_all(self.request_w, frame(b"C", body))
        except BrokenPipeError:  # it died between calls (killed from outside)
            return False
        return True

    def outcome(self):
        """The outcome of the call in flight (see child.run_guarded); raises Died
        when the guard process died before sending it."""
        layout, fault = [], None
        while True:
            tag = read_exact(self.report_r, 1)
            if tag in (b"L", b"P"):
                body = read_frame_body(self.report_r)
                if body is None:
                    break
                if tag == b"P":
                    return pickle.loads(body)
                layout = pickle.loads(body)
            elif tag == b"E" and read_exact(self.report_r, 3) == b"TGF":
                record = read_exact(self.report_r, _FAULT.size)
                fault = _FAULT.unpack(record) if len(record) == _FAULT.size else None
            else:
                break
        log = self._log_since_call()
        raise Died(self.close(), fault, layout, log)

    def _log_since_call(self) -> str:
        os.lseek(self.log.fileno(), self.log_start, os.SEEK_SET)
        return os.read(self.log.fileno(), 1 << 20).decode("utf-8", "replace")

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
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return 0
        return status


_lock = threading.Lock()
_current: GuardProcess | None = None


def run(kernel, info, bound: dict):
    """The outcome of one guarded call (child.run_guarded's), through this process's
    guard process (forked here when needed); raises Died when it died."""
    global _current
    with _lock:
        process = _current
        if process is not None and process.knows(kernel) and process.request(kernel, bound):
            try:
                return process.outcome()
            except Died:
                _current = None
                raise
            except BaseException:  # interrupted mid-call: the pipes are out of step
                _current = None
                process.close()
                raise
        if process is not None:
            _current = None
            process.close()
        process = GuardProcess(kernel, info, bound)
        try:
            outcome = process.outcome()
        except Died:
            raise
        except BaseException:
            process.close()
            raise
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
