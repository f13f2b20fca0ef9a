"""etops.conformance.case_clock: a case's time limit from the times known for its
call (FACTOR times the longer of ATen's and the base's, at least the floor), the
page a process publishes its case in flight on and its parent reads (across a fork
and a spawned process), and the runner publishing each kernel call with ATen's time
for it (recorded with the call, or measured)."""

from __future__ import annotations

import os
import time

import pytest
import torch

from etops.conformance import case_clock
from etops.conformance.case import CaseResult
from etops.conformance.recorded import Recorder
from etops.conformance.runner import TaskRunner, default_kmap


def _case(sample=4, call=1, inputs="Tensor[5, 1]:float32, Tensor[5]:float32"):
    return CaseResult("aten::mul.out", "aten::mul.Tensor", "mul", "float32", sample, call, "pass", inputs=inputs)


def test_the_limit_is_the_factor_times_the_longest_known_time_with_a_floor(monkeypatch):
    monkeypatch.delenv(case_clock.FLOOR_ENV, raising=False)
    assert case_clock.limit(None) == case_clock.FLOOR_SECONDS  # nothing known: the floor
    assert case_clock.limit(1e-5) == case_clock.FLOOR_SECONDS  # a tiny call: the floor
    assert case_clock.limit(0.5) == pytest.approx(0.5 * case_clock.FACTOR)
    assert case_clock.limit(0.5, 2.0) == pytest.approx(2.0 * case_clock.FACTOR)  # the base's, longer
    assert case_clock.limit(2.0, 0.5) == pytest.approx(2.0 * case_clock.FACTOR)
    assert case_clock.limit(None, 1.0) == pytest.approx(case_clock.FACTOR)
    assert case_clock.limit(0.01, floor=3.0, factor=10) == 3.0
    assert case_clock.limit(1.0, floor=3.0, factor=10) == 10.0


def test_the_floor_follows_the_environment(monkeypatch):
    monkeypatch.setenv(case_clock.FLOOR_ENV, "0.5")
    assert case_clock.floor_seconds() == 0.5 and case_clock.limit(1e-4) == 0.5
    for bad in ("0", "-1", "soon", "nan"):
        monkeypatch.setenv(case_clock.FLOOR_ENV, bad)
        with pytest.raises(ValueError, match=case_clock.FLOOR_ENV):
            case_clock.floor_seconds()


@pytest.mark.parametrize("kwargs, name", [
    ({"aten_seconds": -1.0}, "aten_seconds"), ({"aten_seconds": float("inf")}, "aten_seconds"),
    ({"aten_seconds": 1.0, "base_seconds": float("nan")}, "base_seconds"),
    ({"aten_seconds": 1.0, "floor": 0.0}, "floor"), ({"aten_seconds": 1.0, "factor": -2.0}, "factor"),
])
def test_a_bad_argument_is_named(kwargs, name):
    with pytest.raises(ValueError, match=f"'{name}'"):
        case_clock.limit(**kwargs)


def test_a_case_published_in_a_forked_child_is_read_here_and_overdue_past_its_limit(monkeypatch):
    monkeypatch.setenv(case_clock.FLOOR_ENV, "0.3")
    clock = case_clock.CaseClock()
    assert clock.current() is None and clock.overdue() is None  # nothing in flight yet
    pid = os.fork()
    if pid == 0:  # the writer: a case in flight, then a label of its own
        try:
            case_clock.use(clock)
            case_clock.set_label(2)
            case_clock.started(_case(), 1e-5)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    try:
        seen = clock.current()
        assert seen is not None and seen[0] == pid and seen[1] == 2 and seen[3] == 0.3
        assert clock.overdue(seen[2] + 0.2) is None  # within its limit
        hang = clock.overdue(seen[2] + 0.5)
        assert hang is not None and (hang.label, hang.where, hang.limit) == (2, (4, 1), 0.3)
        assert hang.seconds == pytest.approx(0.5)
        case = hang.case()
        assert (case.status, case.kernel, case.opinfo, case.dtype, case.sample, case.call) == \
            ("hang", "aten::mul.out", "mul", "float32", 4, 1)
        assert case.inputs == "Tensor[5, 1]:float32, Tensor[5]:float32" and case.limit_seconds == 0.3
    finally:
        clock.close()


def test_a_returned_call_clears_the_page_and_a_process_without_a_clock_publishes_nothing():
    clock = case_clock.CaseClock()
    try:
        case_clock.started(_case(), 0.1)  # no clock in use here: nothing written
        assert clock.current() is None
        case_clock.use(clock)
        since = case_clock.started(_case(), 0.1)
        assert clock.current() is not None
        assert case_clock.ended(since) >= 0
        assert clock.current() is None and clock.overdue(time.monotonic() + 1e6) is None
    finally:
        case_clock.use(None)
        clock.close()


def test_the_base_times_are_the_longest_of_its_results():
    from etops.conformance.case import TaskResult

    one, two = TaskResult("mul", "float32"), TaskResult("mul", "float32")
    one.case_seconds, two.case_seconds = {"a": 0.1, "b": 0.5}, {"a": 0.3}
    assert case_clock.base_seconds([one, two]) == {"a": 0.3, "b": 0.5}


def test_the_base_times_known_make_part_of_a_limit(monkeypatch):
    monkeypatch.setenv(case_clock.FLOOR_ENV, "1")
    clock = case_clock.CaseClock()
    case = _case()
    try:
        case_clock.use(clock)
        case_clock.know_base({case.id: 0.5})
        case_clock.started(case, 0.001)
        assert clock.current()[3] == pytest.approx(0.5 * case_clock.FACTOR)
    finally:
        case_clock.know_base({})
        case_clock.use(None)
        clock.close()


def test_the_runner_publishes_each_kernel_call_with_atens_time_for_it(monkeypatch):
    """A recorded task keeps ATen's time of each call; the replay's kernel calls are
    published with it (and a live run's with the time it measured), each call ended."""
    seen: list = []
    monkeypatch.setattr(case_clock, "started", lambda case, aten_seconds: seen.append(("start", case.id, aten_seconds)) or 0.0)
    monkeypatch.setattr(case_clock, "ended", lambda since: seen.append(("end",)) or 0.25)
    recorder = Recorder()
    result = TaskRunner(default_kmap(), ["aten::add.out"], sources=recorder.sources()).run("add", torch.float32)
    (recording,) = recorder.recordings.values()
    assert recording.calls and all(c.seconds is not None and c.seconds >= 0 for c in recording.calls)
    starts = [s for s in seen if s[0] == "start"]
    assert len(starts) == len(recording.calls) == len([s for s in seen if s[0] == "end"])
    assert [s[2] for s in starts] == [c.seconds for c in recording.calls]
    assert result.case_seconds == {s[1]: 0.25 for s in starts}  # each kernel call's time, for a later round's limits
    seen.clear()
    TaskRunner(default_kmap(), ["aten::add.out"]).run("add", torch.float32)  # live: ATen's time measured
    assert seen and all(s[2] is not None and s[2] >= 0 for s in seen if s[0] == "start")


def test_a_tasks_hangs_are_skipped_and_recorded_per_label_and_too_many_give_the_rest_up():
    from etops.conformance.case import CaseInfo, TaskResult

    def hang(label, sample):
        return case_clock.Hang(label, 1, CaseInfo("aten::mul.out", "aten::mul.Tensor", "mul", "float32", sample, 0),
                               "Tensor[5, 1]:float32", 0.0, 2.0, 2.1)

    hangs = (hang(0, 4), hang(1, 4), hang(0, 7))
    assert case_clock.skipped(hangs, 0) == {(4, 0), (7, 0)} and case_clock.skipped(hangs, 2) == set()
    result = case_clock.with_hangs(TaskResult("mul", "float32"), hangs, 0)
    assert sorted(result.failing.values()) == [("hang", None)] * 2 and len(result.details) == 2
    assert result.tallies[("aten::mul.out", "float32")].counts["hang"] == 2
    given_up = case_clock.given_up("mul", "float32", hangs, 1)
    assert [c.sample for c in given_up.details] == [4] and "gave up after 3" in given_up.sample_error


def test_the_time_torch_takes_to_answer_about_a_call_is_not_the_kernels(monkeypatch, reg):
    """A case's time starts again once torch answered about its call (its meta kernel
    sizing the outs; the first one in a process imports torch._dynamo, seconds on a
    loaded machine): a slow answer is no hang; a kernel slow after it still is."""
    from etops import out_shapes

    monkeypatch.setenv(case_clock.FLOOR_ENV, "0.3")
    real = out_shapes._infer_outs_with_torch

    def slow_answer(info, bound):
        time.sleep(0.6)
        return real(info, bound)

    monkeypatch.setattr(out_shapes, "_infer_outs_with_torch", slow_answer)
    clock = case_clock.CaseClock()
    monkeypatch.setattr(case_clock, "_clock", None)
    case_clock.use(clock)
    try:
        since = case_clock.started(_case(), None)
        out_shapes.infer_outs(reg.aten.mul.out._info, {"self": torch.ones(3, 19, 2), "other": torch.ones(19, 1)})
        assert clock.overdue() is None, "torch's answer counted as the kernel's time"
        time.sleep(0.6)  # the kernel itself past the limit
        assert clock.overdue() is not None
        case_clock.ended(since)
    finally:
        case_clock.use(None)
        clock.close()
