"""One piece of a round run in a forked process while this one goes on: ``etops
dev`` runs the file's upstream test (itself a few forks of this process, so it
calls the kernels registered here when it starts) and the timing (alongside.py)
while the judge runs.

The fork sees this process as it was when ``Background`` started (the edit
installed): what this process swaps in later does not reach it, nor what it
swaps in reaches this process. Its result comes back pickled through a file.
torch runs single-threaded in the fork: the OpenMP thread team of this process
does not survive a fork, and libgomp would wait for it forever.

The fork, its limit and its result are etops.child_process's ChildCall; this module
words its failures. Imports etops.child_process and etops.errors.
"""

from __future__ import annotations

from typing import Any, Callable

from ..child_process import ChildCall
from ..errors import BackgroundFailed


class Background:
    """`work()` started now in a forked process; ``result()`` waits for its value."""

    def __init__(self, work: Callable[[], Any]):
        self._call = ChildCall(work)
        self.started = self._call.child.started
        self.pid = self._call.pid

    @property
    def seconds(self) -> float:
        """How long the work took (once its process ended)."""
        return self._call.seconds

    def done(self) -> bool:
        """Whether its process has ended (reaped now if so; result() then returns at once)."""
        return self._call.done()

    def stop(self) -> None:
        """Ends its process if it still runs, and reaps it; the result is not taken."""
        self._call.stop()

    def result(self, limit: float | None = None) -> Any:
        """`work()`'s value, once the process ended; BackgroundFailed when it raised
        or ended without one, or (`limit`, seconds from its start) when it had not
        ended by then: its process is killed (work calling a kernel that never
        returns costs the limit, never the round). Call it once."""
        try:
            outcome = self._call.result(limit)
        except RuntimeError:
            raise RuntimeError("Background.result: the result was taken already") from None
        except ValueError:
            raise ValueError(f"Background.result: argument 'limit' must be positive or None, got {limit!r}") from None
        if outcome.kind == "timed out":
            raise BackgroundFailed(f"its process did not end within {limit:g} s (a kernel that never returns?): "
                                   "killed")
        if outcome.kind in ("ended", "unreadable"):
            raise BackgroundFailed(f"its process {outcome.ended()} without a result")
        if outcome.kind == "raised":
            raise BackgroundFailed(outcome.error)
        return outcome.value
