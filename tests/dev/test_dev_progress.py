"""The status line of ``etops dev`` (etops.dev.progress): on a terminal, a phase
that has lasted a second shows on one line of stderr, with its count, rewritten in
place and erased when the phase ends; nothing at all is written to a stream that
is not a terminal. The clock is the test's (no sleeping, no timing)."""

from __future__ import annotations

import io

from etops.dev.progress import Status


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_phase_longer_than_a_second_shows_on_one_line_with_its_count_then_is_erased():
    stream, clock = FakeTerminal(), Clock()
    status = Status(stream, clock=clock, thread=False, width=200)
    with status.phase("op_add.cpp"):
        with status.phase("edit tasks"):
            status.count(3, 40)
            clock.now += 0.5
            status.tick()
            assert stream.getvalue() == ""  # under a second: nothing
            clock.now += 1.0
            status.tick()
            drawn = stream.getvalue()
            assert "etops dev [2 s] op_add.cpp · edit tasks 3/40" in drawn and "\n" not in drawn
            status.count(40, 40)
            status.tick()
            assert stream.getvalue()[len(drawn):].startswith("\r") and "edit tasks 40/40" in stream.getvalue()
        # the inner phase ended: the line erased (blanks over it, the cursor back at its start)
        assert stream.getvalue().endswith("\r" + " " * len("etops dev [2 s] op_add.cpp · edit tasks 40/40") + "\r")
        clock.now += 1.5
        status.tick()
        assert stream.getvalue().endswith("etops dev [3 s] op_add.cpp")
        status.clear()
        assert stream.getvalue().endswith("\r")
    assert "\n" not in stream.getvalue()


def test_nothing_is_written_when_the_stream_is_not_a_terminal():
    stream, clock = io.StringIO(), Clock()
    status = Status(stream, clock=clock, thread=False, width=200)
    with status.phase("building the edit"):
        status.count(1, 2)
        clock.now += 5
        status.tick()
        status.clear()
    assert stream.getvalue() == ""
    assert not status.enabled()


def test_the_phases_of_a_round_name_the_file_and_what_runs(monkeypatch):
    """The module's functions drive one Status: what `etops dev`'s phases call."""
    from etops.dev import progress

    stream, clock = FakeTerminal(), Clock()
    monkeypatch.setattr(progress, "STATUS", Status(stream, clock=clock, thread=False, width=200))
    with progress.phase("op_mul.cpp"), progress.phase("discovery: the OpInfos reaching its operators"):
        progress.count(120, 600)
        clock.now += 2
        progress.STATUS.tick()
        assert progress.STATUS.line(40) == "etops dev [2 s] …g its operators 120/600"  # cut at the front, 40 wide
    assert "op_mul.cpp · discovery: the OpInfos reaching its operators 120/600" in stream.getvalue()
    assert stream.getvalue().endswith("\r")
