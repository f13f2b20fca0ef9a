"""The timing of a round run alongside the judge, each on cores of its own: the
timing (the edit and the base interleaved on one thread) in a forked process pinned
to one core, while this process, the judge's task processes and the upstream test
keep to the other cores; once the timing ends, they get every core again.

Before, the timing waited for the judge: on a two-core machine the round paid for
both, one after the other. The timing needs a core to itself, not a quiet machine:
it compares the edit with the base round by round, so what the other cores do
(the shared cache, memory bandwidth) reaches both sides alike. It widens the noise,
never the ratio, and the rounds go on until the noise decides the verdict
(timing.decided).

With fewer than two cores to share (or no CPU affinity, as on macOS) ``possible()``
is False and the loop times after the judge, as before.

Imports the standard library and dev.background only.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from .background import Background


def _cores() -> set | None:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def possible() -> bool:
    """Whether this process may use two cores or more, and set CPU affinity."""
    cores = _cores()
    return cores is not None and len(cores) >= 2


def _set_cores(pid: int, cores: set) -> None:
    try:
        os.sched_setaffinity(pid, cores)
    except (ProcessLookupError, PermissionError, OSError):
        pass  # a process that ended (or is not ours to move): nothing to share with it


class Alongside:
    """`work()` to run in a forked process on a core of its own once ``start()`` is
    called, the processes `others` (pids) kept off that core meanwhile; ``poll(pids)``, called while other processes work, gives them every core
    back once it has ended; ``result()`` waits for its value (and gives every core
    back). Call ``close()`` in every case: it also ends a work whose result nobody
    took."""

    def __init__(self, work: Callable[[], Any], others=()):
        self._work, self._others = work, tuple(others)
        self._job: Background | None = None
        self._cores: set = set()
        self._narrowed: set = set()  # pids kept off the work's core (this process's is 0)
        self.started = False

    def start(self) -> None:
        """Starts the work pinned to this process's last core; this process and the
        processes `others` keep to the rest from now on (processes this one forks
        inherit that). Does nothing once started, or when not possible()."""
        if self.started or not possible():
            return
        self.started = True
        self._cores = _cores() or set()
        core = max(self._cores)
        rest = self._cores - {core}
        work = self._work

        def pinned():
            os.sched_setaffinity(0, {core})
            return work()

        self._job = Background(pinned)
        for pid in (0, *self._others):
            _set_cores(pid, rest)
            self._narrowed.add(pid)

    @property
    def cores(self) -> int | None:
        """Once started, how many cores this process may use, the work's own
        included (it gives it back when it ends: size pools of processes by this,
        not by the narrowed affinity); None before."""
        return len(self._cores) if self.started else None

    def poll(self, pids=()) -> None:
        """When the work has ended: this process, the processes narrowed at start and
        `pids` (processes forked since, which inherited the narrowed cores) get every
        core again."""
        if self._job is not None and self._narrowed and self._job.done():
            self._widen(pids)

    def _widen(self, pids=()) -> None:
        for pid in {*self._narrowed, *pids}:
            _set_cores(pid, self._cores)
        self._narrowed.clear()

    def result(self) -> Any:
        """The work's value once its process ended (BackgroundFailed when it raised
        or died); every core given back first."""
        if self._job is None:
            raise RuntimeError("Alongside.result: the work was never started")
        try:
            return self._job.result()
        finally:
            self._widen()

    def close(self) -> None:
        """Every core given back; a work still running whose result was not taken is
        ended and reaped."""
        self._widen()
        if self._job is not None:
            self._job.stop()
