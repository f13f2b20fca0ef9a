"""A worker process of ``--isolated`` (see pool.py for the protocol).

The worker imports torch, etops and OpInfo's database once, then forks a child
that runs tasks; when a kernel kills the child, the worker tells the parent
(``{"died": status}``) and forks a new child at once, so a crash costs a fork,
not an interpreter start. The child reads the tasks from stdin (the worker
never does) and writes to the private channel to the parent; it publishes each
kernel call on the case clock whose memory file the parent passed (``clock_fd``:
etops.conformance.case_clock), which the parent reads. The child is an
etops.child_process Child."""

from __future__ import annotations

import json
import os
import signal
import sys

from ..child_process import Child


def _send(channel: int, obj) -> None:
    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(channel, data):]


def _child(channel: int, config: dict, kmap, kernels: dict) -> None:
    import torch

    from .opinfos import dtype_from_name
    from .runner import TaskRunner

    torch.set_num_threads(1)
    selected = config.get("selected")

    def stderr_offset() -> int:
        try:
            return os.lseek(2, 0, os.SEEK_CUR)
        except OSError:  # not a file
            return 0

    def on_start(case) -> None:
        sys.stderr.flush()
        _send(channel, {"start": [case.sample, case.call, case.kernel, case.aten_op, stderr_offset()]})

    while True:
        line = sys.stdin.readline()
        if not line:
            return
        if not line.strip():
            continue
        task = json.loads(line)
        runner = TaskRunner(kmap, selected, hooks=config.get("hooks"), report_dir=config.get("report_dir"),
                            max_details=config.get("max_details", 3), skip=task.get("skip", ()), on_start=on_start,
                            kernels=kernels)
        result = runner.run(task["opinfo"], dtype_from_name(task["dtype"]))
        _send(channel, {"result": result.to_json()})


def main() -> None:
    config = json.loads(sys.argv[1])
    # a private channel to the parent; fd 1 joins stderr (kernels and torch may print)
    channel = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    import torch  # noqa: F401

    from ..checkout.load import from_environment
    from .hooks import load_hooks
    from .opinfos import opinfos
    from .runner import default_kmap

    if config.get("clock_fd") is not None:  # the parent reads which case a kernel call is in, and since when
        from .case_clock import CaseClock, use

        use(CaseClock.from_fd(config["clock_fd"]))
    from_environment()  # the kernels the parent loaded with --load
    kmap = default_kmap()
    opinfos()
    load_hooks(config.get("hooks"))
    kernels: dict = {}
    fork = hasattr(os, "fork") and not os.environ.get("ETOPS_CONFORMANCE_NO_FORK")
    if not fork:
        _child(channel, config, kmap, kernels)
        return
    def task_child() -> int:
        try:
            _child(channel, config, kmap, kernels)
            return 0
        except BaseException:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            return 3
        finally:
            sys.stderr.flush()

    while True:
        child = Child(task_child)
        child.wait()
        status = child.wait_status
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            return  # stdin closed: the sweep is over
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        _send(channel, {"died": code})


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    main()
