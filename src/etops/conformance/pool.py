"""Worker processes for ``--isolated``: each task (OpInfo, dtype) runs in a worker;
a worker that dies (segfault, abort, SIGKILL) while a kernel call is in flight has
that case recorded as crash, is replaced, and the task runs again without that case;
one that dies, or goes without news for `timeout`, outside every kernel call (in
ATen's reference, in making samples) fails its task with that said, blaming no kernel. Each worker publishes the case whose kernel
it is calling on a case clock of its own (etops.conformance.case_clock, a memory
file the worker is given); a case past its limit (a kernel that never returns) is
a hang case: the worker (its process group: its child, a guard process) is killed
and replaced, and the task runs again without that case.

Protocol (one JSON object a line). Parent -> worker on stdin: a task. Worker ->
parent on a private pipe (the worker's stdout goes to its stderr, kernels may
print): ``{"start": [sample, call, kernel, aten_op, stderr offset]}`` before each kernel call,
then ``{"result": TaskResult}``; ``{"died": status}`` when the forked child that
ran the task died (the worker forks another)."""

from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ..process_end import from_exit_code
from .case import CaseResult, TaskResult
from .case_clock import CaseClock, Hang
from .outcome import of_death

#: Seconds a task may go without any news, while no kernel call is in flight, before its worker counts as hung.
DEFAULT_TIMEOUT = 120.0
#: Seconds between looks at a busy worker's case clock.
_POLL = 0.25
#: Crashes after which the rest of a task is given up.
MAX_CRASHES_PER_TASK = 10


def _src_path() -> str:
    import etops

    return str(Path(etops.__file__).resolve().parent.parent)


class Worker:
    def __init__(self, config: dict) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = _src_path() + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("OMP_NUM_THREADS", "1")
        env["PYTHONWARNINGS"] = "ignore"
        self.log = tempfile.TemporaryFile()
        self.clock = CaseClock.shared_file()
        clock_fd: int = self.clock.fd  # type: ignore[assignment]  # a memory file's
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "etops.conformance._worker", json.dumps({**config, "clock_fd": clock_fd})],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env, start_new_session=True,
            pass_fds=(clock_fd,),
        )
        self._buffer = b""

    def send(self, task: dict) -> None:
        self.proc.stdin.write((json.dumps(task) + "\n").encode())  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def read(self, timeout: float):
        """The next message, None at EOF (the worker died), "timeout"."""
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def log_tail(self, since: int = 0, n: int = 1500) -> str:
        """What the worker wrote to stderr since `since` (its last n characters)."""
        try:
            self.log.seek(0, os.SEEK_END)
            size = self.log.tell()
            self.log.seek(max(since, size - n))
            return self.log.read().decode(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """Kills the worker and its forked child (its own process group)."""
        try:
            os.killpg(self.proc.pid, 9)
        except OSError:
            pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()
        self.clock.close()

    def close(self) -> None:
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        self.log.close()
        self.clock.close()


def run_pool(tasks: list[dict], config: dict, jobs: int, on_result, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Runs `tasks` ({"opinfo", "dtype"}) on `jobs` workers; calls
    ``on_result(task, TaskResult, crashes: list[CaseResult])`` in the calling
    thread as each finishes."""
    todo: queue.Queue = queue.Queue()
    for t in tasks:
        todo.put(t)
    done: queue.Queue = queue.Queue()
    stop = threading.Event()
    live: dict[int, Worker] = {}

    def slot(index: int) -> None:
        worker = None
        try:
            while not stop.is_set():
                try:
                    task = todo.get_nowait()
                except queue.Empty:
                    return
                crashes: list[CaseResult] = []
                skip: list = []
                while not stop.is_set():
                    if worker is None:
                        worker = live[index] = Worker(config)
                    worker.send({**task, "skip": skip})
                    current = None
                    since = 0
                    outcome: Any = None  # a TaskResult, a Hang, ("died", status), None (EOF) or "timeout"
                    news = time.monotonic()
                    while not stop.is_set():
                        msg = worker.read(min(_POLL, timeout))
                        if msg == "timeout":
                            hang = worker.clock.overdue()
                            if hang is not None:  # a kernel call past its case's limit
                                outcome = hang
                                break
                            if worker.clock.current() is None and time.monotonic() - news > timeout:
                                outcome = "timeout"  # no news, and no kernel call in flight
                                break
                            continue
                        news = time.monotonic()
                        if msg is None:
                            outcome = msg
                            break
                        if "died" in msg:  # the worker's child died; the worker forked a new one
                            outcome = ("died", msg["died"])
                            break
                        if "start" in msg:
                            current = msg["start"][:4]
                            since = msg["start"][4] if len(msg["start"]) > 4 else 0
                        elif "result" in msg:
                            outcome = TaskResult.from_json(msg["result"])
                            break
                    if stop.is_set():
                        return
                    if isinstance(outcome, TaskResult):
                        done.put((task, outcome, crashes))
                        break
                    if isinstance(outcome, Hang):  # the worker, its child and any guard process killed; the task again without it
                        worker.kill()
                        worker = live[index] = None  # type: ignore[assignment]
                        crashes.append(outcome.case())
                        skip.append(list(outcome.where))
                        if len(crashes) >= MAX_CRASHES_PER_TASK:
                            result = TaskResult(task["opinfo"], task["dtype"])
                            result.sample_error = f"gave up after {len(crashes)} crashes and hangs"
                            done.put((task, result, crashes))
                            break
                        continue
                    # the worker (None) or its child died, or it hung: the case it was in is a
                    # crash when its kernel call was in flight (the case clock says so); a death
                    # or silence outside every kernel call (ATen's reference, making samples)
                    # is no kernel's
                    if worker.clock.current() is None:
                        current = None
                    if isinstance(outcome, tuple):
                        code = outcome[1]
                        tail = worker.log_tail(since)
                    else:
                        if outcome == "timeout":
                            worker.kill()
                        else:
                            worker.proc.wait()
                        code = worker.proc.returncode
                        tail = worker.log_tail(since)
                        worker.kill()
                        worker = live[index] = None  # type: ignore[assignment]
                    if current is None:
                        why = "hung" if outcome == "timeout" else f"died (exit status {code})"
                        result = TaskResult(task["opinfo"], task["dtype"])
                        result.sample_error = f"worker {why} outside any kernel call: {tail[-300:]}"
                        done.put((task, result, crashes))
                        break
                    sample, call, kernel, aten_op = current
                    how = f"worker hung for {timeout:.0f}s (killed)" if outcome == "timeout" else _describe_exit(code)
                    crashes.append(CaseResult(kernel, aten_op, task["opinfo"], task["dtype"], sample, call, "crash",
                                              message=(how + (": " + " ".join(tail.split())[-400:] if tail.strip() else "")),
                                              outcome=of_death(code, hung=outcome == "timeout")))
                    skip.append([sample, call])
                    if len(crashes) >= MAX_CRASHES_PER_TASK:
                        result = TaskResult(task["opinfo"], task["dtype"])
                        result.sample_error = f"gave up after {len(crashes)} crashes"
                        done.put((task, result, crashes))
                        break
        except BaseException as exc:  # noqa: BLE001
            done.put(("__error__", exc, None))
        finally:
            live.pop(index, None)
            if worker is not None:
                if stop.is_set():
                    worker.kill()
                else:
                    worker.close()

    threads = [threading.Thread(target=slot, args=(i,), daemon=True, name=f"etops-conformance-{i}") for i in range(max(1, jobs))]
    for t in threads:  # type: ignore[assignment]
        t.start()  # type: ignore[attr-defined]
    remaining = len(tasks)
    try:
        while remaining:
            task, result, crashes = done.get()
            if task == "__error__":
                raise result
            remaining -= 1
            on_result(task, result, crashes)
    finally:
        stop.set()
        for worker in list(live.values()):
            if worker is None:
                continue
            try:
                os.killpg(worker.proc.pid, 9)
            except OSError:
                pass
        for t in threads:  # type: ignore[assignment]
            t.join(timeout=30)  # type: ignore[attr-defined]


def _describe_exit(code: int | None) -> str:
    return f"worker {from_exit_code(code)}"
