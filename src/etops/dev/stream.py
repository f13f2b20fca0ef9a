"""The lines an ``etops dev`` round prints while it runs, before its report: the
edit's first failing cases as soon as a task process hands them back (float32
tasks run first, each right before its dim-order layouts and numerics transforms;
on a fresh cache, etops.dev.early's pass runs some before discovery),
one line per pass, operator, dtype and kind of failure; then the
findings of the contiguous cases once the base has run, those of each axis (the
dim-order layouts, the numerics transforms), the upstream test's counts and each
timing row as they come in. The report that follows is the round's whole account;
its verdict and exit code do not depend on what was streamed.

Off unless ``enable(write)`` was called (the command line does, ``enabled``: the Python API
returns its result and prints nothing); never in a forked process. Each line goes
out whole, the status line (etops.dev.progress) cleared first.
Imports this package's progress only: the words for a finding, a test file and a
timing row are the report's (etops.dev.outline, handed to ``begin_round``: the
judge, which streams, may not import the timing, which outline does).
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Callable

from . import progress

#: failing-case lines streamed per round at most (the report has them all)
MAX_CASE_LINES = 8


class Stream:
    """Where a round's early lines go (`write(line)`; None: nowhere)."""

    def __init__(self) -> None:
        self.write: Callable[[str], object] | None = None
        self._owner = os.getpid()
        self._start = time.monotonic()
        self._seen: set = set()
        self._case_lines = 0
        self._words = None  # etops.dev.outline (begin_round)

    def enabled(self) -> bool:
        return self.write is not None and os.getpid() == self._owner

    def begin_round(self, words) -> None:
        """A new round: its clock starts, nothing seen yet; `words`: etops.dev.outline
        (finding_line, gtest_items, timing_item)."""
        self._words = words
        self._start = time.monotonic()
        self._seen.clear()
        self._case_lines = 0

    def line(self, text: str) -> None:
        """Prints `text` now, after the round's seconds."""
        if not self.enabled():
            return
        progress.clear()
        assert self.write is not None  # enabled()
        self.write(f"  [{time.monotonic() - self._start:5.1f} s] {text}")

    def failing_cases(self, pass_name: str, result) -> None:
        """The first failing cases of a task's result (a TaskResult) on one of the
        edit's passes (`pass_name` "edit", or "edit, <layout or transform>" for an
        axis' pass run right after it; the base's passes stream nothing): one line per
        pass, operator, dtype, status and verdict not streamed yet, MAX_CASE_LINES at most."""
        if not pass_name.startswith("edit") or result is None or not self.enabled():
            return
        where = pass_name.partition(", ")[2]
        for case in getattr(result, "details", ()):
            key = (where, case.kernel, case.dtype, case.status, case.verdict)
            if case.status == "pass" or key in self._seen or self._case_lines >= MAX_CASE_LINES:
                continue
            self._seen.add(key)
            self._case_lines += 1
            message = " ".join(str(case.message or "").split())
            message = message if len(message) <= 140 else message[:139] + "…"
            what = case.status + (f" ({case.verdict})" if case.verdict and case.verdict != case.status else "")
            self.line(f"found on the edit{', ' + where if where else ''}: {case.kernel.removeprefix('aten::')} "
                      f"{case.dtype} {what}: {message} "
                      f"[{case.opinfo}, sample {case.sample}; not compared with the base yet]")

    def findings(self, what: str, found: list) -> None:
        """The findings of `what` (the contiguous cases, an axis), once compared with
        the base: a count, then a line per finding (new ones first)."""
        if not self.enabled() or self._words is None:
            return
        finding_line = self._words.finding_line
        new = [f for f in found if f.gating]
        self.line(f"{what}: {len(found)} finding{'s' if len(found) != 1 else ''}, {len(new)} new")
        for f in sorted(found, key=lambda f: not f.gating):
            self.line(f"  {'new' if f.gating else 'not gating or also in base'}: {finding_line(f)}")

    def gtest(self, result: dict) -> None:
        """The upstream test files' counts on the edit and their regressions, as they come in."""
        if not self.enabled() or self._words is None:
            return
        ran, _not_run = self._words.gtest_items(result, result.get("seconds", 0.0))
        for g in ran:
            self.line(f"gtest {g.name} on the edit: {g.counts}" + (f", {len(g.regressions)} regressions" if g.regressions else ""))

    def python_tests(self, result: dict) -> None:
        """The upstream Python tests' counts on the edit and their regressions, as they come in."""
        if not self.enabled() or self._words is None:
            return
        for depth, line in self._words.python_test_lines(result):
            self.line("  " * depth + line)

    def timing(self, rows: list) -> None:
        """The timing's rows as they come in."""
        if not self.enabled() or self._words is None:
            return
        for r in rows:
            t = self._words.timing_item(r)
            self.line(f"timing {t.kernel} {t.words}" + (f"  <- {t.mark}" if t.mark else ""))


#: this process' stream
STREAM = Stream()


def enable(write) -> None:
    """Streams this process' rounds through `write(line)` (the command line: print, flushed)."""
    STREAM.write = write
    STREAM._owner = os.getpid()


def disable() -> None:
    STREAM.write = None


@contextlib.contextmanager
def enabled(write):
    """``enable(write)`` while the block runs (the command line's round), then off."""
    enable(write)
    try:
        yield
    finally:
        disable()


def line(text: str) -> None:
    """``STREAM.line``."""
    STREAM.line(text)


__all__ = ["MAX_CASE_LINES", "STREAM", "Stream", "disable", "enable", "enabled", "line"]
