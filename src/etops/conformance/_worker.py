"""A worker of ``--isolated``, its side: the loop a forked worker runs (pool.py
forks it, an etops.child_process Child, and owns the other side).

The worker is a fork of the sweep's process, so it starts with everything that
process has: torch, etops, OpInfo's database, the kernels it loaded (``--load``)
and the overrides it made in-process (``etops.override``). It reads tasks from
its request pipe, one pickled frame each (etops.guard.wire's frames: ``T`` and
the task, with the cases to skip), and writes to its result pipe, before each
kernel call, ``S`` and (sample, call, kernel, aten_op, the size of its log then),
and at the end of the task ``R`` and the pickled TaskResult: its cases' Outcomes
travel as values, never as text. It publishes each kernel call on the case clock
it inherited (etops.conformance.case_clock), which the parent reads. A worker
whose runner raised prints the traceback to its log and ends with
RUNNER_FAILED.

May import: the standard library, torch, etops.guard.wire and etops.conformance's
runner, case_clock and opinfos.
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback

from ..guard.wire import frame, read_exact, read_frame_body, write_all

#: the exit status of a worker whose runner raised (its traceback in its log)
RUNNER_FAILED = 3


def _log_size() -> int:
    """The size of the worker's log (its stderr), where what the next call prints starts."""
    try:
        return os.fstat(2).st_size
    except OSError:
        return 0


def serve(kmap, config: dict, request_fd: int, result_fd: int) -> int:
    """Runs each task sent on `request_fd` until the pipe closes (0), sending its
    kernel calls' starts and its TaskResult on `result_fd`; RUNNER_FAILED when the
    runner raised. `config`: the TaskRunner's selected kernels, hooks, report
    folder and details kept."""
    from .opinfos import dtype_from_name
    from .runner import TaskRunner

    kernels: dict = {}

    def on_start(case) -> None:
        sys.stderr.flush()
        start = (case.sample, case.call, case.kernel, case.aten_op, _log_size())
        write_all(result_fd, frame(b"S", pickle.dumps(start)))

    try:
        while read_exact(request_fd, 1) == b"T":
            body = read_frame_body(request_fd)
            if body is None:
                return 0
            task = pickle.loads(body)
            runner = TaskRunner(kmap, config.get("selected"), hooks=config.get("hooks"),
                                report_dir=config.get("report_dir"), max_details=config.get("max_details", 3),
                                skip=task.get("skip", ()), on_start=on_start, kernels=kernels)
            result = runner.run(task["opinfo"], dtype_from_name(task["dtype"]))
            write_all(result_fd, frame(b"R", pickle.dumps(result)))
    except BaseException:  # noqa: BLE001 - the parent sees a worker that ended, and its log says why
        traceback.print_exc()
        return RUNNER_FAILED
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0
