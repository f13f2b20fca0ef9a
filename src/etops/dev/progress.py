"""The status line of an ``etops dev`` round: one line on stderr, rewritten in
place, naming the phase under way (discovery, the builds, the judge's passes with
their tasks done / total, the upstream test, the timing) and its seconds, once
the phase has lasted a second; cleared when the phase ends and before the report.
Only when stderr is a terminal: in a pipe, a CI log or a test's captured output
nothing is written.

The phases call ``phase(label)`` (a context manager; phases nest, the line shows
them all) and ``count(done, total)``; a daemon thread redraws the line every half
second. A forked process (a task process, the timing's) never writes it.

Imports nothing of etops.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import threading
import time

#: seconds a phase runs before the line shows it
DELAY = 1.0
#: seconds between redraws
INTERVAL = 0.5


class Status:
    """The status line on `stream` (None: sys.stderr when used). `clock`: seconds,
    monotonic; `thread`: False leaves the redraws to ``tick()`` (tests); `width`:
    the line's characters at most (None: the terminal's width less one)."""

    def __init__(self, stream=None, *, clock=time.monotonic, thread: bool = True, width: int | None = None):
        self._stream = stream
        self._width = width
        self._clock = clock
        self._thread_wanted = thread
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._phases: list[list] = []  # [label, start, counts or None]
        self._shown = 0  # characters of the line on screen (0: none)
        self._owner = os.getpid()

    @property
    def stream(self):
        return self._stream if self._stream is not None else sys.stderr

    def enabled(self) -> bool:
        """Whether the line may be written: in the process that made this Status,
        with its stream a terminal."""
        if os.getpid() != self._owner:
            return False
        try:
            return bool(self.stream.isatty())
        except (AttributeError, ValueError, OSError):
            return False

    @contextlib.contextmanager
    def phase(self, label: str):
        """A phase named `label` while the block runs; the line shows it once it has
        lasted DELAY seconds, and is cleared when it ends."""
        if not self.enabled():
            yield
            return
        entry = [label, self._clock(), None]
        with self._lock:
            self._phases.append(entry)
            self._start_thread()
        try:
            yield
        finally:
            with self._lock:
                if entry in self._phases:
                    self._phases.remove(entry)
                self._erase()

    def count(self, done: int, total: int) -> None:
        """The innermost phase has done `done` of `total` (tasks, OpInfos)."""
        if not self.enabled():
            return
        with self._lock:
            if self._phases:
                self._phases[-1][2] = (done, total)

    def clear(self) -> None:
        """Erases the line (before the report is printed)."""
        if not self.enabled():
            return
        with self._lock:
            self._erase()

    def line(self, width: int = 0) -> str:
        """The line as it would be drawn now ('' before the outermost phase has
        lasted DELAY seconds): the seconds, then the phases, outermost first; cut
        at the front of the phases to `width` characters (0: no cut)."""
        if not self._phases:
            return ""
        now = self._clock()
        start = self._phases[0][1]
        if now - start < DELAY:
            return ""
        head = f"etops dev [{now - start:.0f} s] "
        body = " · ".join(label + (f" {counts[0]}/{counts[1]}" if counts else "") for label, _, counts in self._phases)
        if width and len(head) + len(body) > width:
            body = "…" + body[len(head) + len(body) - width + 1:]
        return head + body

    def tick(self) -> None:
        """Draws the line now (the thread does every INTERVAL seconds)."""
        if not self.enabled():
            return
        with self._lock:
            width = self._width or max(shutil.get_terminal_size((80, 24)).columns - 1, 20)
            text = self.line(width)
            if text:
                self._write("\r" + text + " " * max(self._shown - len(text), 0) + "\r" + text)
                self._shown = len(text)

    def _erase(self) -> None:
        if self._shown:
            self._write("\r" + " " * self._shown + "\r")
            self._shown = 0

    def _write(self, text: str) -> None:
        """Straight to the file descriptor when there is one (no Python lock a fork
        could inherit held), else the stream's write."""
        stream = self.stream
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
            fd = None
        if fd is not None:
            try:
                os.write(fd, text.encode(errors="replace"))
            except OSError:
                pass
            return
        stream.write(text)
        stream.flush()

    def _start_thread(self) -> None:
        """Starts the redrawing thread unless it runs (called holding the lock)."""
        if not self._thread_wanted or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="etops-dev-status", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(INTERVAL)
            if os.getpid() != self._owner:
                return
            with self._lock:
                if not self._phases:  # ends; the next phase starts another
                    self._thread = None
                    return
            self.tick()


#: the status line of this process' rounds
STATUS = Status()


def phase(label: str):
    """``STATUS.phase(label)``: a phase of the round, shown on a terminal once it has lasted a second."""
    return STATUS.phase(label)


def count(done: int, total: int) -> None:
    """``STATUS.count``: progress of the innermost phase."""
    STATUS.count(done, total)


def clear() -> None:
    """``STATUS.clear``: the line erased before the report lines."""
    STATUS.clear()
