"""Running one test binary in isolation: a fork of this process (so the kernels it
calls are the ones registered here: built-ins, custom kernels, overrides) loads the
binary and runs its tests; its output goes to a log file, its per-test events (one
JSON line each, written and flushed by the binary's listener) to another.

A test that crashes the fork (a signal, an exit, an abort, a timeout) is recorded as
crashed, named by the event that started it and never ended, and the binary is run
again on the tests not yet run, so one crash loses nothing else."""

from __future__ import annotations

import ctypes
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..child_process import Child
from ..process_end import from_wait_status

#: Test statuses, as reports and JSON give them.
PASSED, FAILED, SKIPPED, CRASHED = "passed", "failed", "skipped", "crashed"


@dataclass
class TestResult:
    """One gtest: ``Suite.Name``, its status and gtest's message (the failures'
    text, the skip's reason, what ended the process)."""

    name: str
    status: str
    message: str = ""
    ms: int = 0
    #: (file, line) of each failed assertion, as gtest reported them (a failed test's, or a crashed one's before it died)
    failures: list = field(default_factory=list)
    #: the signal that ended a crashed test's process (None: another end, or not crashed)
    signal: int | None = None

    def as_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "message": self.message, "ms": self.ms,
                "failures": [list(f) for f in self.failures], "signal": self.signal}


@dataclass
class BinaryRun:
    """What running a binary gave: each test's result and the output tail of a run
    that ended outside any test (``problem``)."""

    tests: list[TestResult] = field(default_factory=list)
    problem: str | None = None
    seconds: float = 0.0


def _child(binary: str, argv: list[str], log: str, events: str) -> int:
    """The fork's side (a Child's body): the binary's exit code."""
    code = 125
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.environ["ETOPS_GTEST_EVENTS"] = events
        lib = ctypes.CDLL(binary, mode=ctypes.RTLD_LOCAL)
        main = lib.etops_gtest_main
        main.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        main.restype = ctypes.c_int
        args = (ctypes.c_char_p * (len(argv) + 1))(*[a.encode() for a in argv], None)
        code = main(len(argv), args)
    except BaseException as exc:  # noqa: BLE001 - the fork reports, never unwinds into the caller
        try:
            os.write(2, f"etops gtest: could not run {binary}: {exc}\n".encode())
        except OSError:
            pass
    return code if 0 <= code < 256 else 1


def _read_events(path: str) -> list[dict]:
    out: list[dict] = []
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line the crash cut short
    return out


def _message(parts: list[dict], kind: str) -> str:
    texts = []
    for p in parts:
        if p.get("kind") != kind:
            continue
        msg = p.get("message", "")
        if kind == "skip":
            texts.append(msg)
        else:
            texts.append(f"{p.get('file')}:{p.get('line')}: {msg}" if p.get("file") else msg)
    return "\n".join(t for t in texts if t)


def _failures(parts: list[dict]) -> list:
    return [(p.get("file") or "", int(p.get("line") or 0)) for p in parts if p.get("kind") == "failure"]


def _filter(user: str | None, exclude: list[str]) -> str:
    positive, _, negative = (user or "*").partition("-")
    negatives = [n for n in negative.split(":") if n] + exclude
    return positive + ("-" + ":".join(negatives) if negatives else "")


def run_binary(binary: Path, test_filter: str | None = None, timeout: float = 300.0,
               total: float | None = None) -> BinaryRun:
    """Runs the tests of `binary` (matching `test_filter`, gtest's syntax), each in
    the fork of this process that runs the binary; a crash ends only its test (the
    tests after it run in a new fork, each fork bounded by `timeout` seconds). `total`:
    the seconds all the forks together may take (None: no bound); past it the tests
    not run yet are left out and the result's problem says so (a kernel that never
    returns in any test costs `total`, not `timeout` per test)."""
    if total is not None and not total > 0:
        raise ValueError(f"run_binary: argument 'total' must be positive or None, got {total!r}")
    result = BinaryRun()
    started = time.monotonic()
    done: dict[str, TestResult] = {}
    with tempfile.TemporaryDirectory(prefix="etops-gtest-") as tmp:
        for attempt in range(10_000):
            log, events = os.path.join(tmp, f"log{attempt}"), os.path.join(tmp, f"events{attempt}")
            argv = [str(binary), f"--gtest_filter={_filter(test_filter, list(done))}", "--gtest_color=no"]
            child = Child(lambda: _child(str(binary), argv, log, events))
            left = timeout if total is None else max(0.01, min(timeout, started + total - time.monotonic()))
            timed_out = child.wait(left)
            status = child.wait_status
            records = _read_events(events)
            parts: dict[str, list[dict]] = {}
            running = None
            for r in records:
                name = r.get("test", "")
                if r["event"] == "start":
                    running = name
                    parts[name] = []
                elif r["event"] == "part":
                    parts.setdefault(name, []).append(r)
                elif r["event"] == "end":
                    running = None
                    st = r.get("status", FAILED)
                    kind = {"failed": "failure", "skipped": "skip"}.get(st, "")
                    done[name] = TestResult(name, st, _message(parts.get(name, []), kind) if kind else "", int(r.get("ms", 0)),
                                            _failures(parts.get(name, [])))
            clean = not timed_out and os.WIFEXITED(status) and os.WEXITSTATUS(status) in (0, 1)
            tail = _tail(log)
            if running is not None:
                why = f"timed out after {left:.3g} s" if timed_out else from_wait_status(status)
                failures = _message(parts.get(running, []), "failure")
                text = why + (f"\n{failures}" if failures else "") + (f"\n--- output ---\n{tail}" if tail else "")
                done[running] = TestResult(running, CRASHED, text, failures=_failures(parts.get(running, [])),
                                           signal=os.WTERMSIG(status) if not timed_out and os.WIFSIGNALED(status) else None)
                if total is not None and time.monotonic() - started >= total:
                    result.problem = (f"the test binary's runs took {total:g} s (its limit) by the end of {running}: "
                                      "the tests after it were not run")
                    break
                continue  # run the tests after it
            if not clean:
                why = f"timed out after {left:.3g} s" if timed_out else from_wait_status(status)
                result.problem = f"the test binary {why} outside any test" + (f"\n--- output ---\n{tail}" if tail else "")
            break
    result.tests = list(done.values())
    result.seconds = time.monotonic() - started
    return result


def _tail(path: str, lines: int = 25) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])
