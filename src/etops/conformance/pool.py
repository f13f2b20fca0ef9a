"""Worker processes for ``--isolated`` (and ``--jobs``): each task (OpInfo, dtype)
runs in a worker; a worker that dies (segfault, abort, SIGKILL) while a kernel call
is in flight has that case recorded as crash (its Outcome ``of_death``: the signal,
the exit status), is replaced, and the task runs again without that case; one
that dies, or goes without news for `timeout`, outside every kernel call (in
ATen's reference, in making samples) fails its task with that said, blaming no
kernel. Each worker publishes the case whose kernel it is calling on a case clock
of its own (etops.conformance.case_clock); a case past its limit (a kernel that
never returns) is a hang case: the worker (its process group: a guard process it
forked too) is killed and replaced, and the task runs again without that case.

Each worker is a fork of this process (etops.child_process.Child, the one way the
tools run work in a child): it starts warm, with what this process imported,
loaded and overrode (kernels of ``--load``, ``etops.override`` made in-process,
hooks given as objects), so a crash costs a fork, not an interpreter start. It
runs in a process group of its own (a terminal's Ctrl-C reaches this process,
which kills and reaps every worker) and writes what it and its kernels print to
a log of its own, whose tail a crash case quotes. The worker's loop and the
frames it sends (a kernel call's start, the pickled TaskResult) are _worker.py's.
The sweep runs here in one thread: no fork happens beside another thread of the
pool.

May import: the standard library, etops.child_process, etops.process_end,
etops.guard.wire and etops.conformance's case, case_clock, outcome, opinfos and
_worker.
"""

from __future__ import annotations

import collections
import os
import pickle
import select
import signal
import tempfile
import time
from dataclasses import dataclass, field

from ..child_process import Child
from ..guard.wire import frame, read_exact, read_frame_body, write_all
from ..process_end import exit_code, from_exit_code
from . import case_clock
from .case import CaseResult, TaskResult
from .case_clock import CaseClock, Hang
from .outcome import of_death

#: Seconds a task may go without any news, while no kernel call is in flight, before its worker counts as hung.
DEFAULT_TIMEOUT = 120.0
#: Seconds between looks at a busy worker's case clock.
_POLL = 0.25
#: Crashes after which the rest of a task is given up.
MAX_CRASHES_PER_TASK = 10
#: Seconds a worker whose request pipe closed may take to exit before it is killed.
END_GRACE = 10.0


class Worker:
    """One worker: a fork of this process running the tasks it is sent
    (_worker.serve), its request and result pipes, its case clock and its log."""

    def __init__(self, kmap, config: dict, siblings: list) -> None:
        from ._worker import serve

        request_r, self.request_w = os.pipe()
        self.result_r, result_w = os.pipe()
        self.clock = CaseClock()
        fd, self.log_path = tempfile.mkstemp(prefix="etops-worker-", suffix=".log")
        os.close(fd)

        def worker() -> int:
            # its siblings' pipe ends too: a copy held here would keep them from seeing their pipe close
            for end in (self.request_w, self.result_r, *(f for w in siblings for f in (w.request_w, w.result_r))):
                os.close(end)
            os.setpgid(0, 0)
            log = os.open(self.log_path, os.O_WRONLY | os.O_APPEND)
            os.dup2(log, 1)  # kernels and torch may print: to the log, as what goes to stderr
            os.dup2(log, 2)
            os.close(log)
            case_clock.use(self.clock)
            return serve(kmap, config, request_r, result_w)

        self.child = Child(worker, single_threaded=True)
        try:
            os.setpgid(self.child.pid, self.child.pid)  # also here: a kill right after the fork reaches its group
        except OSError:
            pass  # it did so itself, or it has ended
        os.close(request_r)
        os.close(result_w)

    def send(self, task: dict) -> None:
        write_all(self.request_w, frame(b"T", pickle.dumps(task)))

    def receive(self) -> tuple | TaskResult | None:
        """The next frame's value: a kernel call's start (sample, call, kernel,
        aten_op, log offset), the task's TaskResult, or None: the worker ended."""
        tag = read_exact(self.result_r, 1)
        body = read_frame_body(self.result_r) if tag in (b"S", b"R") else None
        return None if body is None else pickle.loads(body)

    def log_tail(self, since: int = 0, n: int = 1500) -> str:
        """What the worker wrote to its log since `since` (its last n characters)."""
        try:
            with open(self.log_path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(since, size - n))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def end(self, kill: bool = False) -> int:
        """Ends it (killed with its process group when `kill`, else its request pipe
        closed: it exits, killed past END_GRACE), reaps it, frees its pipes, clock
        and log; its wait status."""
        if kill and self.child.status is None:
            try:
                os.killpg(self.child.pid, signal.SIGKILL)
            except OSError:
                pass
            self.child.kill()
        self.child.end((self.request_w, self.result_r), END_GRACE)
        self.clock.close()
        try:
            os.unlink(self.log_path)
        except OSError:
            pass
        return self.child.wait_status


@dataclass
class _Slot:
    """A worker's place: the task it runs (its crashes and the cases it skips so
    far), the kernel call in flight as the worker said, when it last gave news."""

    worker: Worker | None = None
    task: dict | None = None
    crashes: list = field(default_factory=list)
    skip: list = field(default_factory=list)
    current: tuple | None = None  #: (sample, call, kernel, aten_op)
    since: int = 0  #: the log's size when that call started
    news: float = 0.0
    sent: bool = False  #: whether its worker was sent the task

    def give(self, task: dict | None) -> None:
        self.task, self.crashes, self.skip, self.current, self.since, self.sent = task, [], [], None, 0, False


def run_pool(tasks: list[dict], kmap, config: dict, jobs: int, on_result, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Runs `tasks` ({"opinfo", "dtype"}) of `kmap`'s kernels on `jobs` workers;
    calls ``on_result(task, TaskResult, crashes: list[CaseResult])`` as each
    finishes. `config`: the TaskRunner's "selected", "hooks", "report_dir",
    "max_details". Every worker is reaped before this returns or raises."""
    from .hooks import load_hooks
    from .opinfos import opinfos

    opinfos()  # loaded here once: every worker forked warm
    load_hooks(config.get("hooks"))
    todo = collections.deque(tasks)
    slots = [_Slot() for _ in range(max(1, min(jobs, len(tasks))))]
    try:
        while True:
            for slot in slots:
                if slot.task is None and todo:
                    slot.give(todo.popleft())
                if slot.task is not None and not slot.sent:
                    if slot.worker is None:  # a new worker: a new log, no call in flight
                        slot.worker = Worker(kmap, config, [s.worker for s in slots if s.worker is not None])
                        slot.current, slot.since = None, 0
                    slot.worker.send({**slot.task, "skip": list(slot.skip)})
                    slot.sent, slot.news = True, time.monotonic()
            busy = {s.worker.result_r: s for s in slots if s.worker is not None and s.task is not None}
            if not busy:
                return
            ready, _, _ = select.select(list(busy), [], [], _POLL)
            for fd, slot in busy.items():
                _advance(slot, fd in ready, timeout, on_result)
    finally:
        for slot in slots:
            if slot.worker is not None:
                slot.worker.end(kill=slot.task is not None)


def _advance(slot: _Slot, readable: bool, timeout: float, on_result) -> None:
    """One look at a busy slot: its worker's next frame when `readable`, else its
    case clock and how long it went without news."""
    worker: Worker = slot.worker  # type: ignore[assignment]  # busy
    task: dict = slot.task  # type: ignore[assignment]
    if readable:
        news = worker.receive()
        slot.news = time.monotonic()
        if isinstance(news, TaskResult):
            on_result(task, news, slot.crashes)
            slot.give(None)
            return
        if news is not None:  # a kernel call starts
            slot.current, slot.since = tuple(news[:4]), news[4]
            return
        hung = False  # the worker ended
    else:
        hang = worker.clock.overdue()
        if hang is not None:  # a kernel call past its case's limit: the task again without it
            worker.end(kill=True)
            slot.worker, slot.sent = None, False
            _crashed(slot, hang.case(), list(hang.where), on_result, "crashes and hangs")
            return
        if worker.clock.current() is not None or time.monotonic() - slot.news <= timeout:
            return
        hung = True  # no news, and no kernel call in flight
    # the worker died or hung: the case it was in is a crash when its kernel call was in
    # flight (the case clock says so); a death or silence outside every kernel call
    # (ATen's reference, making samples) is no kernel's
    current = slot.current if worker.clock.current() is not None else None
    tail = worker.log_tail(slot.since)
    code = exit_code(worker.end(kill=True))  # its process group too: a guard process it forked
    slot.worker, slot.sent = None, False
    if current is None:
        why = "hung" if hung else f"died (exit status {code})"
        result = TaskResult(task["opinfo"], task["dtype"])
        result.sample_error = f"worker {why} outside any kernel call: {tail[-300:]}"
        on_result(task, result, slot.crashes)
        slot.give(None)
        return
    sample, call, kernel, aten_op = current
    how = f"worker hung for {timeout:.0f}s (killed)" if hung else f"worker {from_exit_code(code)}"
    crash = CaseResult(kernel, aten_op, task["opinfo"], task["dtype"], sample, call, "crash",
                       message=how + (": " + " ".join(tail.split())[-400:] if tail.strip() else ""),
                       outcome=of_death(code, hung=hung))
    _crashed(slot, crash, [sample, call], on_result, "crashes")


def _crashed(slot: _Slot, case: CaseResult, where: list, on_result, what: str) -> None:
    """A case of the slot's task killed its worker: recorded, skipped when the task
    runs again, the rest given up after MAX_CRASHES_PER_TASK (`what` says of what)."""
    slot.crashes.append(case)
    slot.skip.append(where)
    if len(slot.crashes) >= MAX_CRASHES_PER_TASK:
        task: dict = slot.task  # type: ignore[assignment]
        result = TaskResult(task["opinfo"], task["dtype"])
        result.sample_error = f"gave up after {len(slot.crashes)} {what}"
        on_result(task, result, slot.crashes)
        slot.give(None)


__all__ = ["DEFAULT_TIMEOUT", "MAX_CRASHES_PER_TASK", "Worker", "run_pool"]
