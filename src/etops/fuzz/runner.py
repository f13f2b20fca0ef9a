"""Isolated runner and Hypothesis drivers.

``IsolatedRunner`` runs cases in a worker process, a fork of this one
(etops.child_process.Child, the one way the tools run work in a child) made after
this process warmed up once (worker.warm_up: every kernel object built, torch's
functional overloads looked up), so a kernel that aborts, segfaults or hangs costs
a fork (milliseconds), not an interpreter start, and the worker calls the kernels
this process has, those it loaded (``--load``) and overrode included. Cases go to
the worker and outcomes come back as pickled frames (etops.guard.wire's) on a pipe
pair of its own. A dead worker is reported as an outcome with ``status``
``"died"`` (the signal and what it wrote to stderr, etops' abort notice included)
or ``"hang"``, and is replaced on the next case. The worker ignores Ctrl-C: this
process takes it and ends the worker.

``fuzz_kernel`` drives Hypothesis over one kernel: a worker death fails the
property, so Hypothesis shrinks it to a minimal reproducer; other violations are
collected (the smallest case per kind) without stopping the search.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..child_process import Child
from ..guard.wire import frame, read_exact, read_frame_body, write_all
from ..process_end import exit_code, from_exit_code
from . import worker

#: seconds a worker whose request pipe closed may take to exit before it is killed
END_GRACE = 5.0

_WARM = threading.Lock()
_warmed = False
#: this process's ends of every worker's pipes: a worker forked later closes them
#: (a copy held there would keep another worker from seeing its request pipe close)
_ENDS: set = set()


def _warm_up() -> None:
    """worker.warm_up, once in this process: every worker forked after it starts warm."""
    global _warmed
    with _WARM:
        if not _warmed:
            worker.warm_up()
            _warmed = True


class IsolatedRunner:
    """Runs fuzz cases in a replaceable worker process."""

    def __init__(self, timeout: float = 20.0):
        self.timeout = timeout
        self.child: Child | None = None
        self.request_w = self.result_r = -1
        self.deaths = 0
        self.started = 0
        fd, self.stderr_path = tempfile.mkstemp(prefix="etops-fuzz-", suffix=".stderr")
        os.close(fd)

    def _start(self) -> None:
        _warm_up()
        request_r, request_w = os.pipe()
        result_r, result_w = os.pipe()
        stderr_path = self.stderr_path

        def serve() -> int:
            for end in (*_ENDS, request_w, result_r):  # this worker's own parent ends too: else it never sees its request pipe close
                os.close(end)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            worker.serve(request_r, result_w, stderr_path)
            return 0

        self.child = Child(serve, single_threaded=True)
        os.close(request_r)
        os.close(result_w)
        self.request_w, self.result_r = request_w, result_r
        _ENDS.update((request_w, result_r))
        self.started += 1

    def _stderr_from(self, pos: int) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                f.seek(pos)
                return f.read()[-4000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def _answer(self) -> dict | None:
        """The worker's outcome of the case sent, None when it ended first."""
        if read_exact(self.result_r, 1) != b"O":
            return None
        body = read_frame_body(self.result_r)
        return None if body is None else pickle.loads(body)

    def run(self, case) -> dict:
        if self.child is None or self.child.poll() is not None:
            self._end(kill=True)
            self._start()
        pos = os.path.getsize(self.stderr_path)
        status = "died"
        try:
            write_all(self.request_w, frame(b"C", pickle.dumps(case)))
            ready, _, _ = select.select([self.result_r], [], [], self.timeout)
            if ready:
                out = self._answer()
                if out is not None:
                    return out
            else:
                status = "hang"
        except OSError:  # its request pipe broke: it died
            pass
        code = exit_code(self._end(kill=True))
        self.deaths += 1
        if status == "hang":
            what = f"no answer within {self.timeout:.0f}s (killed)"
        else:
            what = from_exit_code(code)
        stderr = self._stderr_from(pos)
        notice = [line for line in stderr.splitlines() if line.startswith("etops: ExecuTorch aborted")]
        return {
            "op": case["op"],
            "status": status,
            "signal": what,
            "stderr": stderr,
            "notice": notice[-1] if notice else "",
            "violations": [("crash", f"worker {what}" + (f": {notice[-1]}" if notice else ""))],
        }

    def _end(self, kill: bool) -> int:
        """Ends the worker (killed when `kill`; else its request pipe closed: it
        exits, killed past END_GRACE), reaps it; its wait status (0: none ran)."""
        if self.child is None:
            return 0
        for end in (self.request_w, self.result_r):
            _ENDS.discard(end)
        status = self.child.end((self.request_w, self.result_r), END_GRACE, kill)
        self.child, self.request_w, self.result_r = None, -1, -1
        return status

    def close(self, kill: bool = False):
        """Ends the worker (at once when `kill`) and removes its stderr file."""
        self._end(kill=kill)
        try:
            os.unlink(self.stderr_path)
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, kind, *exc):
        self.close(kill=kind is not None)  # Ctrl-C or an error: the worker goes at once


class Crash(Exception):
    """A case killed (or hung) the worker process."""


@dataclass
class KernelReport:
    op: str
    mode: str
    cases: int = 0
    raised: int = 0
    ok: int = 0
    aten_ok: int = 0
    crash: dict | None = None  #: {"case", "signal", "notice", "repro"} of the shrunk crash
    violations: dict = field(default_factory=dict)  #: kind -> (repro, message, case)
    harness_errors: list = field(default_factory=list)
    error: str | None = None  #: Hypothesis' own complaint (flaky crash ...), if any
    accepted: list = field(default_factory=list)  #: a few valid cases the call returned from (the classes' bases)
    crashes: list = field(default_factory=list)  #: every crash of a "classes" report (one per class)

    def count(self, case, out) -> None:
        """Adds one case's outcome (not a death) to the counts and violations."""
        from . import strategies

        self.cases += 1
        if out["status"] == "harness_error":
            if len(self.harness_errors) < 3:
                self.harness_errors.append((strategies.describe(case), out["violations"][0][1], out.get("traceback", "")))
            return
        self.raised += out["status"] == "raised"
        self.ok += out["status"] == "ok"
        self.aten_ok += out.get("aten") == "ok"
        if out["status"] == "ok" and case.get("mode") == "valid" and len(self.accepted) < 8:
            self.accepted.append({k: v for k, v in case.items() if k != "guard"})
        for kind, message in out["violations"]:
            repro = strategies.describe(case)
            old = self.violations.get(kind)
            if old is None or len(repro) < len(old[0]):
                self.violations[kind] = (repro, message, case)


def fuzz_kernel(runner: IsolatedRunner, kernel, mode: str, max_examples: int, derandomize: bool = False,
                seed: int | None = None, guard: bool = False) -> KernelReport:
    """Hypothesis over one kernel's `mode` ("valid" or "invalid") calls; `guard`:
    each call made by etops.guard.call (a read or write outside a tensor is a
    "memory" violation naming the argument)."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hseed

    from . import strategies

    report = KernelReport(kernel.name, mode)
    last_fatal: dict[str, Any] = {}

    def prop(case):
        if guard:
            case = {**case, "guard": True}
        out = runner.run(case)
        if out["status"] in ("died", "hang"):
            report.cases += 1
            last_fatal.update(case=case, out=out)
            raise Crash(out["signal"])
        report.count(case, out)

    test = given(strategies.calls(kernel, mode))(prop)
    test = settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=derandomize,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
        report_multiple_bugs=False,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
    )(test)
    if seed is not None and not derandomize:
        test = hseed(seed)(test)
    try:
        test()
    except Crash:
        pass
    except Exception as exc:  # noqa: BLE001 - Flaky and friends: keep what was found
        report.error = f"{type(exc).__name__}: {str(exc)[:500]}"
    if last_fatal:
        case, out = last_fatal["case"], last_fatal["out"]
        report.crash = {"case": case, "signal": out["signal"], "notice": out["notice"], "stderr": out["stderr"][-1500:], "repro": strategies.describe(case)}
    return report


def fuzz_classes(runner: IsolatedRunner, kernel, bases: list, guard: bool = False, limit: int | None = None) -> KernelReport:
    """The adversarial classes (etops.fuzz.classes) of `kernel`, derived from
    classes.canonical_case when the call returns from it and from the `bases`
    (valid cases it returned from; the one of most dims first), each case run in
    `runner` (guarded with `guard`). A death is a crash, one per class (the class's
    further cases are skipped); at most `limit` cases."""
    from . import strategies
    from .classes import canonical_case, class_cases

    report = KernelReport(kernel.name, "classes")
    canonical = canonical_case(kernel)
    out = runner.run({**canonical, "guard": guard})
    chosen = [canonical] if out["status"] == "ok" else []
    ranked = sorted(bases, key=lambda c: -sum(len(v[1]) for _n, v in c["args"] + c["kwargs"] if v[0] == "T"))
    chosen += ranked[: 2 - len(chosen)]
    cases = [c for base in chosen or [canonical] for c in class_cases(kernel, base)][:limit]
    dead: set = set()
    for case in cases:
        if case["mutation"] in dead:
            continue
        out = runner.run({**case, "guard": guard})
        if out["status"] in ("died", "hang"):
            report.cases += 1
            dead.add(case["mutation"])
            crash = {"case": case, "signal": out["signal"], "notice": out["notice"], "stderr": out["stderr"][-1500:],
                     "repro": strategies.describe(case)}
            report.crashes.append(crash)
            report.crash = report.crash or crash
            continue
        report.count(case, out)
    return report


def callable_kernels(pattern: str | None = None):
    """Every registered kernel etops can call (a schema it can plan), sorted."""
    import etops

    out = []
    for k in etops.registry().kernels():
        if getattr(k._info, "callable", False) and (pattern is None or pattern in k.name):
            out.append(k)
    return out


def timed(fn, *a, **kw):
    t = time.monotonic()
    r = fn(*a, **kw)
    return r, time.monotonic() - t
