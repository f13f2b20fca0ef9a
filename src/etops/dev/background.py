"""One piece of a round run in a forked process while this one goes on: ``etops
dev`` runs the file's upstream test (itself a few forks of this process, so it
calls the kernels registered here when it starts) and the timing (alongside.py)
while the judge runs.

The fork sees this process as it was when ``Background`` started (the edit
installed): what this process swaps in later does not reach it, nor what it
swaps in reaches this process. Its result comes back pickled through a file.
torch runs single-threaded in the fork: the OpenMP thread team of this process
does not survive a fork, and libgomp would wait for it forever.

Imports the standard library, etops.errors and task_processes' words for a wait status.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

from ..errors import BackgroundFailed
from ..process_end import from_wait_status


def _single_threaded() -> None:
    """torch (when imported) set to one thread."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


class Background:
    """`work()` started now in a forked process; ``result()`` waits for its value."""

    def __init__(self, work: Callable[[], Any]):
        fd, self._path = tempfile.mkstemp(prefix="etops-dev-background-")
        os.close(fd)
        self.started = time.perf_counter()
        sys.stdout.flush()
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:
            code = 0
            try:
                _single_threaded()
                try:
                    outcome = ("ok", work())
                except BaseException:  # noqa: BLE001 - reported to the caller
                    outcome = ("raised", traceback.format_exc())
                with open(self._path, "wb") as f:
                    pickle.dump(outcome, f)
            except BaseException:  # noqa: BLE001 - a value that does not pickle: the caller sees no outcome
                code = 1
            finally:
                os._exit(code)
        self._done = False
        self._status: int | None = None  # its wait status, once reaped
        self.seconds = 0.0  #: how long the work took (once result() returned)

    def done(self) -> bool:
        """Whether its process has ended (reaped now if so; result() then returns at once)."""
        if self._status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == 0:
                return False
            self._status = status
            self.seconds = time.perf_counter() - self.started
        return True

    def stop(self) -> None:
        """Ends its process if it still runs, and reaps it; the result is not taken."""
        if self._done:
            return
        self._done = True
        if self._status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._status = os.waitpid(self.pid, 0)[1]
        try:
            os.unlink(self._path)
        except OSError:
            pass

    def result(self, limit: float | None = None) -> Any:
        """`work()`'s value, once the process ended; BackgroundFailed when it raised
        or ended without one, or (`limit`, seconds from its start) when it had not
        ended by then: its process is killed (work calling a kernel that never
        returns costs the limit, never the round). Call it once."""
        if self._done:
            raise RuntimeError("Background.result: the result was taken already")
        if limit is not None and not limit > 0:
            raise ValueError(f"Background.result: argument 'limit' must be positive or None, got {limit!r}")
        while limit is not None and not self.done():
            if time.perf_counter() - self.started > limit:
                self.stop()
                raise BackgroundFailed(f"its process did not end within {limit:g} s (a kernel that never returns?): "
                                       "killed")
            time.sleep(0.05)
        self._done = True
        if self._status is None:
            self._status = os.waitpid(self.pid, 0)[1]
            self.seconds = time.perf_counter() - self.started
        status = self._status
        try:
            with open(self._path, "rb") as f:
                outcome = pickle.load(f)
        except (OSError, EOFError, pickle.UnpicklingError):
            outcome = None
        finally:
            try:
                os.unlink(self._path)
            except OSError:
                pass
        if outcome is None:
            raise BackgroundFailed(f"its process {from_wait_status(status)} without a result")
        if outcome[0] == "raised":
            raise BackgroundFailed(outcome[1])
        return outcome[1]
