"""etops.bench.runall (``bench --all``): the timing interpreter (a
child_process.Child.program) that dies on a kernel records that kernel as such, and
a new interpreter takes the kernels after it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from aborting_sample import AbortingSample

from etops.bench import runall


def test_a_kernel_that_kills_the_timing_interpreter_is_recorded_and_the_rest_go_on(monkeypatch):
    here = str(Path(__file__).resolve().parent)  # the child unpickles AbortingSample from here
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p))
    tasks = [{"kernel": "aten::add.out", "sample": AbortingSample(), "size": None},
             {"kernel": "aten::no_such_kernel.out", "sample": None, "size": None}]
    rows: list = [None, None]
    seen: list = []
    used = runall._run_children(tasks, time.time() + 120, 1, lambda i, n, kernel: seen.append((i, kernel)), rows)
    assert rows[0]["kernel"] == "aten::add.out" and rows[0]["error"].startswith("the process died running it ("), rows
    assert rows[1]["kernel"] == "aten::no_such_kernel.out" and rows[1]["error"], rows  # the second interpreter's row
    assert not rows[1]["error"].startswith("the process died"), rows
    assert seen == [(0, "aten::add.out"), (1, "aten::no_such_kernel.out")] and used
