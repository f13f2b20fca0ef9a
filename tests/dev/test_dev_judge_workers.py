"""The judge's task processes while the timing holds a core (etops.dev.alongside):
they are as many as the machine's cores allow, the timing's counted, not as many
as the narrowed affinity shows. (They were one: the judge's first pass ran in a
single task process while the timing ran, and after it on two cores.)"""

from __future__ import annotations

import os

from etops.dev import judge, task_processes
from etops.dev.cases import plan


class _Timing:
    """An Alongside already started, whose work holds one of two cores."""

    started, cores = True, 2

    def start(self):
        pass

    def poll(self, pids=()):
        pass


def test_the_task_processes_count_the_timings_core(monkeypatch):
    tasks = {op: ts[:2] for op, ts in plan(["aten::add.out"], ["float32"]).items()}
    asked = []

    def run_tasks(todo, run_task, rerun, workers=None, on_cycle=None, on_done=None, on_result=None):
        asked.append((workers, task_processes.default_workers()))
        return [([None], {}) for _ in todo]

    monkeypatch.setattr(task_processes, "run_tasks", run_tasks)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})  # narrowed: the timing holds core 1
    monkeypatch.delenv("ETOPS_DEV_WORKERS", raising=False)
    judge.run_side("edit", tasks, forked=True, alongside=_Timing())
    assert asked == [(2, 1)]
    assert task_processes.default_workers(8) == task_processes.MAX_WORKERS
    monkeypatch.setenv("ETOPS_DEV_WORKERS", "3")
    assert task_processes.default_workers(2) == 3


def test_later_passes_run_each_task_the_first_ran_right_after_it():
    """run_passes: a task's dim-order layouts run right after its contiguous run
    (one pass of task processes for all of them); a later pass runs only what the
    first ran, and none of its tasks starts past its own deadline."""
    import time

    from etops.dev.judge import Pass, layout_passes, run_passes

    tasks = {op: ts[:2] for op, ts in plan(["aten::add.out"], ["float32"]).items()}
    first = Pass("edit", judge.GUARDED)
    (edit, ran), *laid = run_passes([first, *layout_passes(True, None)], tasks, forked=True)
    assert len(ran) == 2 and edit.cases["aten::add.out"] > 0
    assert [side.name for side, _ in laid] == [f"edit, {layout}" for layout in judge.LAYOUTS]
    assert all(layout_ran == ran for _side, layout_ran in laid)  # each layout ran the tasks the first pass ran
    assert laid[1][0].cases["aten::add.out"] > 0  # transposed inputs: cases of their own
    past = time.monotonic() - 1
    (edit, ran), (late, late_ran) = run_passes([first, Pass("late", judge.GUARDED, deadline=past)], tasks, forked=True)
    assert len(ran) == 2 and late_ran == [] and late.cases["aten::add.out"] == 0
    (none, none_ran), (after, after_ran) = run_passes([Pass("edit", judge.GUARDED, deadline=past),
                                                        Pass("after", judge.GUARDED)], tasks, forked=True)
    assert none_ran == [] and after_ran == []  # nothing after a first pass that ran nothing


def test_the_bases_times_of_an_earlier_round_are_part_of_the_edits_case_limits(monkeypatch):
    """judge(): the base's kernel time per case kept from an earlier round (its
    BASE_RESULTS under this base's key, not another base's) is known to the case
    clock before the edit's tasks run (and so to the task processes forked then)."""
    import pytest

    from etops.conformance import case_clock
    from etops.conformance.case import TaskResult

    mine, other = TaskResult("add", "float32"), TaskResult("add", "float32")
    mine.case_seconds = {"aten::add.out|add|float32|s0c0": 0.5}
    other.case_seconds = {"aten::add.out|add|float32|s1c0": 9.0}
    monkeypatch.setitem(judge.BASE_RESULTS, ("this base", True, "aten::add.out", "add", "float32"), mine)
    monkeypatch.setitem(judge.BASE_RESULTS, ("another base", True, "aten::add.out", "add", "float32"), other)
    seen = []

    class Stop(Exception):
        pass

    def run_passes(passes, plan, **kwargs):
        seen.append(case_clock.known_base())
        raise Stop

    monkeypatch.setattr(judge, "run_passes", run_passes)
    try:
        with pytest.raises(Stop):
            judge.judge({"aten::add.out": []}, None, None, base_key="this base", dim_orders=False)
    finally:
        case_clock.know_base({})
    assert seen == [{"aten::add.out|add|float32|s0c0": 0.5}]


class _GrowsInOneCase:
    """Hooks whose ``applies`` (called in the runner's case, before ATen's result is
    transformed or the kernel called: etops' work on the case) grows the task process by
    192 MiB in the case `where` of the first task run, held until the process is killed
    (at most 20 s)."""

    def __init__(self, where):
        self.where = where

    def applies(self, case, args, kwargs):
        from grown import grow_and_hold

        if (case.opinfo, case.sample, case.call) == self.where:
            grow_and_hold()
        return True


def test_a_case_past_the_task_memory_limit_is_skipped_for_size_and_the_rest_judged(monkeypatch):
    """run_passes with a task process memory limit of 64 MiB (ETOPS_DEV_TASK_MEMORY_MB): a
    case in which its task process grows by 192 MiB is skipped for size (judge.TOO_LARGE
    names it with its operator and pass; it is no case run, never a pass), every other case
    of its task and of the other task is judged; the file's report counts and shows it."""
    import time

    from etops.dev.judge import Pass, run_passes
    from etops.dev.report import DevResult, FileResult

    monkeypatch.setenv("ETOPS_DEV_TASK_MEMORY_MB", "64")
    monkeypatch.setenv("ETOPS_CASE_TIMEOUT_FLOOR", "3600")
    tasks = {op: ts[:2] for op, ts in plan(["aten::add.out"], ["float32"]).items()}
    first = tasks["aten::add.out"][0]["opinfo"]
    (whole, ran), = run_passes([Pass("edit", None)], tasks, forked=True)
    assert len(ran) == 2
    monkeypatch.setattr(judge, "TOO_LARGE", {})
    start = time.monotonic()
    (edit, ran), = run_passes([Pass("edit", _GrowsInOneCase((first, 0, 0)))], tasks, forked=True)
    assert time.monotonic() - start < 60 and len(ran) == 2
    skipped = f"aten::add.out|{first}|float32|s0c0"
    assert list(judge.TOO_LARGE) == [("aten::add.out", "edit", skipped)]
    assert "skipped for size" in judge.TOO_LARGE[("aten::add.out", "edit", skipped)]
    assert skipped in whole.report.every_case and skipped not in edit.report.every_case
    assert set(edit.report.every_case) == set(whole.report.every_case) - {skipped}
    f = FileResult("op_add.cpp", ops=["aten::add.out"], replaced=["aten::add.out"])
    f.set_judged(tasks, {"edit": edit, "base": None, "findings": [], "fixed": [], "left_out": {"aten::add.out": 0},
                         "too_large": dict(judge.TOO_LARGE)})
    assert f.to_dict()["too_large"] == {"aten::add.out": [{"pass": "edit", "case": skipped,
                                                            "why": judge.TOO_LARGE[("aten::add.out", "edit", skipped)]}]}
    assert "1 cases skipped for size (memory limit)" in DevResult([f], 1.0, [], []).text()
