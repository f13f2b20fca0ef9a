"""Running work in a forked child process of this one, the one way every tool does
it: the guard process, dev's background work and timing, the upstream tests, the
shrinker.

``Child`` forks and waits until the child runs (it writes one byte on a pipe of its
own first): a child that sleeps FORK_STALL_SECONDS without CPU time before that
blocked in its fork, not in its work (qemu-user 7.2 leaves the first fork of a
multithreaded process waiting forever on a lock of the emulator's now and then,
docs/aarch64.md), and is killed and forked again, up to FORKS times; then
etops.ForkBlocked. So a tool never takes a blocked fork for a hang of the work it
gave the child. ``CpuWatch`` is that watch: whether a process sleeps without using
CPU time (a guard process or a task process blocked in a kernel).

Its body runs in the child, which always leaves through
``os._exit`` (it never unwinds into the caller's frames, runs no atexit handler,
flushes no buffer it inherited: stdout and stderr are flushed before the fork), with
torch single-threaded when asked (the OpenMP thread team of this process does not
survive a fork, and libgomp would wait for it forever). The parent polls it, waits
for it with a limit (killed at the limit, and when Ctrl-C interrupts the wait),
kills and reaps it (never an orphan or a zombie), and says how it ended in
``process_end``'s words.

``Child.program`` forks and replaces the child with a program (``execve``): for a
process that must start fresh (a new interpreter under glibc's malloc checking,
which only takes effect at a process's start; a timing interpreter whose torch
thread pool never ran in a fork). It is waited for, killed and reaped as any Child.

``ChildCall`` is a function called in a child, its value (or the traceback of what
it raised) coming back through a file, read once the child ended: ``ChildResult``
says which of returned / raised / ended without a value / timed out.

What each tool sends its child and how it reads the reports (the guard's pipes and
fault records, the task processes' frames and case clocks, a test binary's event
file) stays the tool's. Core module: imports the standard library, process_end
and errors only.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .errors import ForkBlocked
from .process_end import from_wait_status

#: the exit code of a child whose body raised (a body that reports returns its own)
BODY_RAISED = 1
#: seconds a just-forked child may sleep without CPU time before it runs; past it, its fork blocked
FORK_STALL_SECONDS = 5.0
#: forks a Child is given when each blocks before it runs
FORKS = 3
#: how often the parent looks at a child's CPU time while it waits for it to run
_READY_CHECK_EVERY = 0.5
#: the exit code of a program child whose exec failed (the shell's "command not found")
EXEC_FAILED = 127
#: the first and longest pause between two looks at a child that is waited for with a limit
_FIRST_POLL, _LAST_POLL = 0.005, 0.05


def _cpu_ticks(pid: int) -> tuple[int, str] | None:
    """The CPU time (user + system, in clock ticks) process `pid` has used and its
    state letter (R running, S sleeping, D waiting on I/O, ...), or None where /proc
    does not tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[11]) + int(fields[12]), fields[0].decode("ascii", "replace")
    except (OSError, IndexError, ValueError):
        return None


def waiting_in(pid: int) -> str | None:
    """Where process `pid` sleeps in the kernel (/proc's wchan: futex_do_wait,
    anon_pipe_read, ...), or None where /proc does not tell."""
    try:
        with open(f"/proc/{pid}/wchan", "rb") as f:
            name = f.read().decode("ascii", "replace").strip()
    except OSError:
        return None
    return name if name and name != "0" else None


#: the states of a process that is not blocked even while its CPU time stands still:
#: runnable (waiting for a CPU of a loaded machine) and in uninterruptible I/O (its
#: pages read back from disk: under emulation, a fork's child touching gigabytes of
#: mapped libraries on a machine short of page cache)
_NOT_BLOCKED = ("R", "D")


class CpuWatch:
    """Whether process `pid` has gone without CPU time: each look at /proc that
    finds its CPU time unchanged since the last one that saw it move, the process
    sleeping, counts towards a stall (a process /proc does not tell of never stalls;
    one runnable or waiting on I/O is not blocked)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.still_since = pid, time.monotonic()
        self.ticks: int | None = None

    def stalled(self, now: float, limit: float) -> bool:
        """Whether it slept without CPU time for `limit` seconds up to `now`."""
        seen = _cpu_ticks(self.pid)
        if seen is None or seen[0] != self.ticks or seen[1] in _NOT_BLOCKED:
            self.ticks, self.still_since = None if seen is None else seen[0], now
            return False
        return now - self.still_since >= limit


def _single_threaded() -> None:
    """torch (when imported) set to one thread."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


class Child:
    """A child process forked now, running `body()`; its return value (an int, None
    for 0) is the child's exit code, BODY_RAISED when it raised. `single_threaded`:
    torch runs on one thread there. The parent owns it: ``poll``, ``wait``, ``kill``
    reap it once; ``status`` is its wait status once reaped."""

    def __init__(self, body: Callable[[], int | None], single_threaded: bool = False):
        sys.stdout.flush()
        sys.stderr.flush()
        self.owner = os.getpid()  #: the process that forked it (a fork of the owner holds a copy of this object)
        blocked_in: list[str | None] = []
        for _fork in range(FORKS):
            self.status: int | None = None  #: its wait status, once reaped
            self.seconds = 0.0  #: from the fork to its reaping
            self.started = time.perf_counter()
            ready_r, ready_w = os.pipe()
            self.pid = os.fork()
            if self.pid == 0:
                code = BODY_RAISED
                try:
                    os.close(ready_r)
                    os.write(ready_w, b"R")  # it runs: its fork did not block
                    os.close(ready_w)
                    if single_threaded:
                        _single_threaded()
                    code = body() or 0
                finally:  # whatever the body did: the child ends here
                    os._exit(code if 0 <= code < 256 else BODY_RAISED)
            os.close(ready_w)
            try:
                blocked = self._blocked_before_running(ready_r)
            except BaseException:  # Ctrl-C while it starts: it goes too, never an orphan
                self.kill()
                raise
            finally:
                os.close(ready_r)
            if not blocked:
                return
            blocked_in.append(waiting_in(self.pid))
            self.kill()
        raise ForkBlocked(FORKS, FORK_STALL_SECONDS, blocked_in[-1])

    def _blocked_before_running(self, ready_r: int) -> bool:
        """Waits until the child has run (its byte, or the pipe closed: it ended);
        True when it slept FORK_STALL_SECONDS without CPU time before that."""
        watch = CpuWatch(self.pid)
        while not select.select([ready_r], [], [], _READY_CHECK_EVERY)[0]:
            if watch.stalled(time.monotonic(), FORK_STALL_SECONDS):
                return True
        return False

    @classmethod
    def program(cls, argv: Sequence[str], env: Mapping[str, str] | None = None, *, stdin: int | None = None,
                stdout: int | None = None, stderr: int | None = None) -> "Child":
        """A child running the program `argv` (``argv[0]`` its path: ``sys.executable``
        for a fresh interpreter) with the environment `env` (None: this process's), its
        standard input, output and error the file descriptors given (None: this
        process's). Forked, then replaced by the program (``execve``); EXEC_FAILED, and
        a line on its stderr, when that fails. Everything the child needs is made here,
        before the fork: between fork and exec it runs only system calls (its ready byte, ``dup2``, ``execve``), so
        a fork from one thread of many (a thread pool's) needs no lock another thread
        may hold but the interpreter's own, which the fork remade. The descriptors
        Python opens are close-on-exec (PEP 446): the program keeps only its three
        streams, never a pipe another thread's child reads to its end."""
        if isinstance(argv, (str, bytes)) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"Child.program: argument 'argv' must be a non-empty list of strings, got {argv!r}")
        for name, fd in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr)):
            if fd is not None and not (isinstance(fd, int) and fd >= 0):
                raise ValueError(f"Child.program: argument {name!r} must be a file descriptor or None, got {fd!r}")
        args = [os.fsencode(a) for a in argv]
        environ = {os.fsencode(k): os.fsencode(v) for k, v in (os.environ if env is None else env).items()}
        streams = [(fd, target) for target, fd in enumerate((stdin, stdout, stderr)) if fd is not None]
        failed = f"etops: could not start {argv[0]}: ".encode()

        def replaced() -> int:
            for fd, target in streams:
                if fd == target:
                    os.set_inheritable(fd, True)
                else:
                    os.dup2(fd, target)  # the copy is inheritable
            try:
                os.execve(args[0], args, environ)
            except OSError as exc:
                os.write(2, failed + os.strerror(exc.errno or 0).encode() + b"\n")
            return EXEC_FAILED

        return cls(replaced)

    def _reaped(self, status: int) -> int:
        self.status = status
        self.seconds = time.perf_counter() - self.started
        return status

    def poll(self) -> int | None:
        """Its wait status when it has ended (reaped now; 0 when it was reaped
        elsewhere), else None."""
        if self.status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # not this process's child (a fork of the owner), or reaped elsewhere
                pid, status = self.pid, 0
            if pid == 0:
                return None
            self._reaped(status)
        return self.status

    def wait(self, limit: float | None = None) -> bool:
        """Waits until it ends, at most `limit` seconds (None: no limit), then kills
        it; whether the limit killed it. Its status is in ``status``. Whatever
        interrupts the wait (Ctrl-C's KeyboardInterrupt) kills and reaps it first."""
        if limit is None:
            if self.status is None:
                try:
                    self._reaped(os.waitpid(self.pid, 0)[1])
                except ChildProcessError:  # reaped elsewhere
                    self._reaped(0)
                except BaseException:  # Ctrl-C while waiting: the child goes too, never an orphan
                    self.kill()
                    raise
            return False
        deadline = time.monotonic() + limit
        pause = _FIRST_POLL
        try:
            while self.poll() is None:
                if time.monotonic() > deadline:
                    self.kill()
                    return True
                time.sleep(pause)
                pause = min(pause * 2, _LAST_POLL)
        except BaseException:  # Ctrl-C while waiting: the child goes too, never an orphan
            self.kill()
            raise
        return False

    @property
    def wait_status(self) -> int:
        """Its wait status, once reaped (after ``wait``, ``kill`` or a ``poll`` that
        saw it end); RuntimeError before."""
        if self.status is None:
            raise RuntimeError(f"child {self.pid} has not been reaped: its wait status is not known yet")
        return self.status

    def kill(self) -> int:
        """Ends it now (SIGKILL) unless it ended, and reaps it: its wait status (0
        when it is not this process's child: the owner's fork holds a copy)."""
        if self.status is None:
            if self.owner != os.getpid():
                return 0
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                self._reaped(os.waitpid(self.pid, 0)[1])
            except ChildProcessError:  # reaped elsewhere
                self._reaped(0)
        return self.wait_status

    def end(self, pipes: tuple[int, ...], grace: float, kill: bool = False) -> int:
        """Ends a worker that leaves when its request pipe closes: killed first when
        `kill`, this side's `pipes` closed, then waited for at most `grace` seconds
        (killed past it: another fork of this process may hold a copy of the request
        pipe); its wait status."""
        if kill:
            self.kill()
        for fd in pipes:
            try:
                os.close(fd)
            except OSError:
                pass
        self.wait(grace)
        return self.wait_status

    def ended(self) -> str:
        """How it ended ("killed by SIGSEGV", "exited with status 3"), once reaped."""
        return from_wait_status(self.status) if self.status is not None else "still running"


@dataclass(frozen=True)
class ChildResult:
    """How a ChildCall went: `kind` "returned" (`value`), "raised" (`error`: the
    traceback's text), "ended" (the child ended without a value: `status`, its wait
    status, ``ended()`` says how), "unreadable" (it sent a value that does not load
    here) or "timed out" (killed at `limit` seconds)."""

    kind: str
    value: Any = None
    error: str = ""
    status: int = 0
    limit: float = 0.0

    def ended(self) -> str:
        """How the child ended, in process_end's words."""
        return from_wait_status(self.status)


class ChildCall:
    """`work()` called now in a Child (torch single-threaded); ``result()`` waits for
    its ChildResult. Its value travels through a file, so a child never waits for
    the parent to read it."""

    def __init__(self, work: Callable[[], Any]):
        fd, self._path = tempfile.mkstemp(prefix="etops-child-")
        os.close(fd)
        path = self._path

        def body() -> int:
            try:
                outcome = ("returned", work())
            except BaseException:  # noqa: BLE001 - reported to the caller
                outcome = ("raised", traceback.format_exc())
            with open(path, "wb") as f:
                pickle.dump(outcome, f)  # a value that does not pickle: BODY_RAISED, no value
            return 0

        self.child = Child(body, single_threaded=True)
        self._taken = False

    @property
    def pid(self) -> int:
        return self.child.pid

    @property
    def seconds(self) -> float:
        """How long the work took, once its child ended."""
        return self.child.seconds

    def done(self) -> bool:
        """Whether its child has ended (reaped now if so)."""
        return self.child.poll() is not None

    def stop(self) -> None:
        """Ends its child if it still runs, and reaps it; the result is not taken."""
        if self._taken:
            return
        self._taken = True
        self.child.kill()
        self._forget()

    def _forget(self) -> None:
        try:
            os.unlink(self._path)
        except OSError:
            pass

    def result(self, limit: float | None = None) -> ChildResult:
        """Its ChildResult once its child ended, or "timed out" when it had not ended
        `limit` seconds after it started (then killed). Call it once."""
        if self._taken:
            raise RuntimeError("ChildCall.result: the result was taken already")
        if limit is not None and not limit > 0:
            raise ValueError(f"ChildCall.result: argument 'limit' must be positive or None, got {limit!r}")
        left = None if limit is None else max(0.0, limit - (time.perf_counter() - self.child.started))
        self._taken = True
        try:
            timed_out = self.child.wait(left)
            if timed_out:
                return ChildResult("timed out", limit=limit or 0.0, status=self.child.status or 0)
            status = self.child.status or 0
            try:
                with open(self._path, "rb") as f:
                    kind, value = pickle.load(f)
            except Exception:  # noqa: BLE001 - no value, or one that does not load here
                exited = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and os.path.getsize(self._path) > 0
                return ChildResult("unreadable" if exited else "ended", status=status)
            if kind == "raised":
                return ChildResult("raised", error=value, status=self.child.status or 0)
            return ChildResult("returned", value=value, status=self.child.status or 0)
        finally:
            self._forget()
