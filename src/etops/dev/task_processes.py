"""A judge side's tasks run in forked task processes: the kernel under development
isolated and guarded, without a round trip per call.

Each task process is a fork of this one that enters etops.guard.here (every
guarded call placed in guarded memory and run twice in that process; a fault the
guard stopped is the call's KernelCrashed there, any other ends the process) and
runs the tasks it is sent, one at a time, sending each TaskResult back. As many run
at once as `workers` (the machine's cores, at most MAX_WORKERS), each sent the next
task when it reports one.

Each task process publishes the case it is in on a case clock of its own
(etops.conformance.case_clock: a shared page, written right before each kernel
call); the loop here reads it every _CHECK_EVERY seconds. A task process whose case
is past its limit (a kernel that never returns) is killed, the case is a Hang, and
the task is sent again to a new task process with its hangs, which it skips and
records as hang cases: every other case of the task is still judged, and a hung
case never runs again. A task process that dies otherwise (a fault no guard region
explains, a signal), stops using CPU time for STALL_SECONDS, takes longer than
TASK_TIMEOUT or fails in the runner has its task run again here through `rerun`
(the guard process's calls: a fault there is a crash case naming the argument; the
hung cases skipped there too), told how the process ended as an Outcome
(etops.conformance.outcome.of_death: the signal, the exit status, hung), never in
words, and is replaced for the tasks left. The tasks are
recorded by the caller before any fork (etops.conformance.recorded), so each process
replays the same cases.

Imports etops.child_process (the fork, its kill and reaping), etops.process_end,
etops.conformance.case (CaseInfo),
etops.guard (its server's limits, here, wire), etops.conformance's case_clock and
outcome, and the standard library.
"""

from __future__ import annotations

import os
import pickle
import select
import time
import traceback
from typing import Any, Callable

from ..child_process import Child
from ..conformance import case_clock
from ..conformance.case import CaseInfo
from ..conformance.outcome import Outcome, of_death
from ..guard import here
from ..child_process import CpuWatch
from ..guard.server import DEFAULT_TIMEOUT, STALL_SECONDS
from ..guard.wire import frame, read_exact, read_frame_body, write_all
from ..process_end import exit_code

#: task processes at most (one per core beyond it would only share the cores)
MAX_WORKERS = 2
#: seconds one task may take in a task process before it is run again here
TASK_TIMEOUT = DEFAULT_TIMEOUT
#: seconds a task process whose pipes closed may take to exit before it is killed
END_GRACE = 5.0
#: seconds between checks of a busy task process's case clock, CPU time and memory
_CHECK_EVERY = 0.25
#: the environment variable that sets the memory limit of a task process (MiB)
MEMORY_ENV = "ETOPS_DEV_TASK_MEMORY_MB"
#: the share of the machine's memory a task process may grow by (MAX_WORKERS of them: a quarter)
MEMORY_SHARE = 1 / 8
_PAGE = os.sysconf("SC_PAGE_SIZE")


def memory_limit() -> int:
    """Bytes a task process's resident memory may pass this process's (when it was
    forked) by: ETOPS_DEV_TASK_MEMORY_MB (MiB) when set, else MEMORY_SHARE of the
    machine's memory. A process past it is killed (run_tasks), its case skipped for size."""
    text = os.environ.get(MEMORY_ENV)
    if text:
        try:
            mib = float(text)
        except ValueError:
            mib = float("nan")
        if not mib > 0:
            raise ValueError(f"environment variable {MEMORY_ENV} must be a positive number of MiB, got {text!r}")
        return int(mib * 2**20)
    return int(os.sysconf("SC_PHYS_PAGES") * _PAGE * MEMORY_SHARE)


def resident(pid: int) -> int:
    """The anonymous resident memory of process `pid` in bytes (resident less the file
    and shared pages: what a case's allocations grow; a fork's code pages faulting back
    in do not), 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            fields = f.read().split()
        return (int(fields[1]) - int(fields[2])) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def default_workers(cores: int | None = None) -> int:
    """How many task processes run at once: `cores` (None: the cores this process
    may use now), at most MAX_WORKERS (ETOPS_DEV_WORKERS overrides)."""
    asked = os.environ.get("ETOPS_DEV_WORKERS")
    if asked:
        return max(1, int(asked))
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cores))


class _TaskProcess:
    """One task process: its pid, its request and result pipes, the task in flight."""

    def __init__(self, tasks: list, run_task: Callable[[Any, tuple], Any], siblings: list):
        request_r, self.request_w = os.pipe()
        self.result_r, result_w = os.pipe()
        self.clock = case_clock.CaseClock()

        def task_process() -> int:
            try:
                # its siblings' pipe ends too: a copy held here would keep them from seeing their pipe close
                for fd in (self.request_w, self.result_r, *(f for p in siblings for f in (p.request_w, p.result_r))):
                    os.close(fd)
                case_clock.use(self.clock)
                here.enter()
                _serve(tasks, run_task, request_r, result_w)
            except BaseException:  # noqa: BLE001 - its end is what the caller sees (its pipe closes)
                pass
            return 0

        self.child = Child(task_process)
        self.pid = self.child.pid
        # its own pages once it runs (Child waits for its first byte): the parent's count would
        # differ by what the fork did not map yet, which would hide a growth
        self.start_memory = resident(self.pid)
        os.close(request_r)
        os.close(result_w)
        self.current: int | None = None
        self.started = 0.0
        self.watch = CpuWatch(self.pid)

    def send(self, index: int, hangs: tuple = ()) -> None:
        """Sends task `index`, with the Hangs it had in earlier task processes (skipped)."""
        write_all(self.request_w, frame(b"T", pickle.dumps((index, hangs))))
        self.current, self.watch = index, CpuWatch(self.pid)
        self.started = time.monotonic()

    def receive(self):
        """("done", result), ("failed", traceback text) or ("died", None)."""
        tag = read_exact(self.result_r, 1)
        body = read_frame_body(self.result_r) if tag in (b"R", b"X") else None
        if body is None:
            return "died", None
        self.current = None
        return ("done", pickle.loads(body)) if tag == b"R" else ("failed", body.decode("utf-8", "replace"))

    def hung(self, now: float) -> Outcome | None:
        """How the task in flight counts as hung (of_death's hung Outcome, its limit:
        no CPU time for STALL_SECONDS, or longer than TASK_TIMEOUT), else None."""
        if now - self.started > TASK_TIMEOUT:
            return of_death(None, hung=True, limit=TASK_TIMEOUT)
        if self.watch.stalled(now, STALL_SECONDS):
            return of_death(None, hung=True, limit=STALL_SECONDS)
        return None

    def over_memory(self, limit: int) -> case_clock.OverMemory | None:
        """An OverMemory when its resident memory has grown past `limit` bytes beyond
        its start: the case it is in (none published: an OverMemory of no pass, label
        -1, that only counts against the task's limit of kills); else None."""
        grown = resident(self.pid) - self.start_memory
        if grown <= limit:
            return None
        seen = self.clock.case_in()
        if seen is None:
            return case_clock.OverMemory(-1, self.pid, CaseInfo("", "", "", "", -1, -1), grown, limit, False)
        _pid, label, info, in_kernel = seen
        return case_clock.OverMemory(label, self.pid, info, grown, limit, in_kernel)

    def end(self, kill: bool = False) -> int:
        """Closes its pipes (it exits when its request pipe closes; killed first when
        `kill`) and reaps it; its exit status. A process still there END_GRACE seconds
        after its pipes closed is killed: another process forked from this one since
        (a guard process of a task run again here) may hold a copy of its request
        pipe, and it would wait for the end of that pipe forever."""
        self.clock.close()
        return self.child.end((self.request_w, self.result_r), END_GRACE, kill)


def _serve(tasks: list, run_task, request_fd: int, result_fd: int) -> None:
    """A task process's loop: run each task index sent (with its hangs) until the pipe closes."""
    while read_exact(request_fd, 1) == b"T":
        body = read_frame_body(request_fd)
        if body is None:
            return
        try:
            index, hangs = pickle.loads(body)
            case_clock.set_label(0)
            payload = frame(b"R", pickle.dumps(run_task(tasks[index], hangs)))
        except Exception:  # noqa: BLE001 - the runner failed: the caller runs the task itself and sees why
            payload = frame(b"X", traceback.format_exc().encode())
        write_all(result_fd, payload)


def run_tasks(tasks: list, run_task: Callable[[Any, tuple], Any], rerun: Callable[[Any, Outcome | None, str, tuple], Any],
              workers: int | None = None, on_cycle: Callable[[list], None] | None = None,
              on_done: Callable[[int, int], None] | None = None,
              on_result: Callable[[int, Any], None] | None = None) -> list:
    """The result of each task, in order: `run_task(task, hangs)` in a task process,
    or `rerun(task, ended, failure, hangs)` here for a task whose process died or
    stalled (`ended`: how, of_death's Outcome) or whose runner raised there (`ended`
    None, `failure` the traceback's text, for people). `hangs`: the
    task's case_clock.Hangs so far, a tuple (cases past their limit, each in a task
    process killed for it: `run_task` and `rerun` skip them and record them as hang
    cases; OverMemory: cases skipped for size). A task process grown past
    memory_limit() is killed and its task sent again as after a hang. `on_cycle(pids)`: called with the running task processes' pids each time
    a result comes in (or every _CHECK_EVERY seconds); `on_done(done, total)`: each
    time a task's result is in; `on_result(index, result)`: that result, as it comes in. Every task process is reaped before this returns or raises."""
    results: list = [None] * len(tasks)
    hangs: dict = {}  #: task index -> its Hangs
    todo = list(range(len(tasks)))
    todo.reverse()
    count = min(workers or default_workers(), len(tasks))
    limit = memory_limit()
    running: list[_TaskProcess] = []
    done = 0
    try:
        while todo or any(p.current is not None for p in running):
            while len(running) < count and todo:
                running.append(_TaskProcess(tasks, run_task, running))
            for process in running:
                if process.current is None and todo:
                    sent = todo.pop()
                    process.send(sent, tuple(hangs.get(sent, ())))
            busy = {p.result_r: p for p in running if p.current is not None}
            ready, _, _ = select.select(list(busy), [], [], _CHECK_EVERY)
            if on_cycle is not None:
                on_cycle([p.pid for p in running])
            now = time.monotonic()
            for process in list(busy.values()):
                index: int = process.current  # type: ignore[assignment]  # busy: a task in flight
                if process.result_r in ready:
                    outcome, value = process.receive()
                    if outcome == "done":
                        results[index] = value
                        if on_result is not None:
                            on_result(index, value)
                        done += 1
                        if on_done is not None:
                            on_done(done, len(tasks))
                        continue
                    ended: Outcome | None = None
                    failure = ""
                    if outcome == "failed":  # the process goes on; the task runs here, where its error shows
                        failure = f"it failed in its task process:\n{value}"
                    else:
                        running.remove(process)
                        ended = of_death(exit_code(process.end()))
                else:
                    hang = process.over_memory(limit) or process.clock.overdue(now)
                    if hang is not None:  # a kernel that does not return, a case too large: the rest in a new process
                        running.remove(process)
                        process.end(kill=True)
                        hangs.setdefault(index, []).append(hang)
                        todo.append(index)  # sent next
                        continue
                    ended, failure = process.hung(now), ""
                    if ended is None:
                        continue
                    running.remove(process)
                    process.end(kill=True)
                results[index] = rerun(tasks[index], ended, failure, tuple(hangs.get(index, ())))
                if on_result is not None:
                    on_result(index, results[index])
                done += 1
                if on_done is not None:
                    on_done(done, len(tasks))
    finally:
        for process in running:
            process.end(kill=process.current is not None)
    return results
