"""How long a process, or the processes it forked, waited for a CPU: runnable, with
every core busy running something else. Linux counts that time per thread (the
second field of /proc/PID/task/TID/schedstat, nanoseconds on a run queue). A time
limit that subtracts it measures what the work itself took, whatever the machine's
load: a kernel that spins is still past its limit once it has had that much CPU,
one that sleeps forever (a deadlock) once that much time has passed, and a process
that only waited for a core is neither.

Imports the standard library only.
"""

from __future__ import annotations

import os


def _waited_ns(pid: int, tid: int) -> int | None:
    """Nanoseconds thread `tid` of process `pid` has waited on a run queue; None
    where /proc does not tell (the thread is gone, or no schedstat)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return []


def _children(pid: int, tid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
            return [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        return []


class RunQueueWait:
    """The run-queue wait of process `pid` and its descendants since this object
    first saw each of their threads: ``seconds()`` is the longest any one thread
    waited (a thread cannot wait longer than the time that passed, and the work of a
    call waits as long as the thread that runs it). 0.0 where /proc does not tell
    (another system, a process gone): no time is then subtracted from a limit."""

    def __init__(self, pid: int) -> None:
        if not isinstance(pid, int) or pid <= 0:
            raise ValueError(f"RunQueueWait: argument 'pid' must be a positive process id, got {pid!r}")
        self.pid = pid
        self._first: dict[tuple[int, int], int] = {}
        self.seconds()  # every thread's count as it is now: the start

    def seconds(self) -> float:
        """The longest wait (seconds) of one thread of the process tree since it was first seen."""
        longest, todo, seen = 0, [self.pid], set()
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            for tid in _threads(pid):
                waited = _waited_ns(pid, tid)
                if waited is not None:
                    longest = max(longest, waited - self._first.setdefault((pid, tid), waited))
                todo.extend(_children(pid, tid))
        return longest / 1e9


__all__ = ["RunQueueWait"]
