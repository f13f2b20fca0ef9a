"""The case clock: the time limit of one case's kernel call, and which case a
process is in, published where its parent can read it while the kernel never returns
(or while the process grows past its memory limit).

A kernel that spins forever cannot be interrupted in its own process (C code: no
Python signal handler runs, no exception reaches it). So a process that runs cases
(etops dev's task processes, etops check's isolated workers) publishes on a
``CaseClock``, right before each kernel call (``started``), the case it is on, since
when and the case's limit, and clears it when the call returns (``ended``); its
parent polls the clock (``CaseClock.overdue``), kills a process whose case is past
its limit, records a ``hang`` case (``Hang.case``) and runs the rest of the task in
a new process with that case skipped. A CaseClock is one shared page, an anonymous
mapping a fork inherits (``CaseClock()``: every process that runs cases is a fork,
etops.child_process). Its writer is one process at a time; a sequence number around each write lets a reader
see either the last write whole or nothing new.

A runner also publishes the case it is in for the whole case (``entered`` /
``left``), untimed outside the kernel's call: ATen's reference, a transform's new
inputs and the measurement of the result are the case's work too. A parent that
kills a process grown past its memory limit (etops.dev.task_processes) reads that
case from the clock (``CaseClock.case_in``) and records an ``OverMemory``: the case
is skipped for size (``TaskResult.too_large``: counted and shown, never a pass, never
run again), and the rest of the task goes on in a new process, as after a hang.

Time torch takes to answer about the call first (its meta kernels sizing the outs and
checking the arguments, once per signature: the first such call in a process imports
torch._dynamo, seconds on a loaded machine) is not the kernel's: after each answer
the case's time starts again (``restart``, called by etops.signature_cache.asked).
Nor is time its process, or the guard process it forked, spent waiting for a CPU
while every core ran something else (``CaseClock.overdue``, etops.run_queue): on a
loaded machine a case gets the time its work had, not the time that passed.

The limit of a case (``limit``): FACTOR times the longest time known for the same
call (ATen's, measured where the case is recorded or run; the base's for the same
case, when ``know_base`` was told it), never under the floor: FLOOR_SECONDS, or the
environment's ETOPS_CASE_TIMEOUT_FLOOR.

Imports the standard library, etops.signature_cache, etops.run_queue and etops.conformance.case and .outcome.
"""

from __future__ import annotations

import dataclasses
import json
import math
import mmap
import os
import struct
import time
from dataclasses import dataclass

from .. import signature_cache
from ..run_queue import RunQueueWait
from .case import CaseInfo, CaseResult, TaskResult
from .outcome import Outcome

#: a case may take FACTOR times the longest known time of its call (ATen's, the
#: base's): a portable kernel is often ten times slower than ATen's vectorized,
#: multithreaded one, a guarded call runs twice, in guarded memory
FACTOR = 100.0
#: ... and never less than FLOOR_SECONDS: a case's first guarded call may fork a guard
#: process, a call's arguments travel through a pipe, the machine may be busy; ATen's
#: time of a tiny call says nothing of that
FLOOR_SECONDS = 10.0
#: the environment variable that sets the floor (seconds; tests set a small one)
FLOOR_ENV = "ETOPS_CASE_TIMEOUT_FLOOR"
#: hangs in one task after which the rest of the task is given up (each costs a limit and a process)
MAX_HANGS_PER_TASK = 6

#: the page: sequence (odd while a write is under way), writer's pid, label, start
#: (time.monotonic(); 0.0: no case in flight), limit, length of the case's JSON, then the JSON
_HEAD = struct.Struct("=QqqddI")
_PAGE = 4096
_BLOB = _PAGE - _HEAD.size
#: characters of a case's input description published (the page holds them whole)
_INPUTS = 2000


def floor_seconds() -> float:
    """The floor of every case's limit: ETOPS_CASE_TIMEOUT_FLOOR when set, else FLOOR_SECONDS."""
    text = os.environ.get(FLOOR_ENV)
    if not text:
        return FLOOR_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"environment variable {FLOOR_ENV} must be a positive number of seconds, got {text!r}")
    return value


def limit(aten_seconds: float | None, base_seconds: float | None = None, *, floor: float | None = None,
          factor: float = FACTOR) -> float:
    """The time limit (seconds) of a case whose call took ATen `aten_seconds` and the
    base `base_seconds` (None: not known): `factor` times the longer, at least `floor`
    (None: floor_seconds())."""
    for name, value in (("aten_seconds", aten_seconds), ("base_seconds", base_seconds)):
        if value is not None and not (value >= 0 and math.isfinite(value)):
            raise ValueError(f"case_clock.limit: argument '{name}' must be a finite number of seconds >= 0 or None, got {value!r}")
    if not (factor > 0 and math.isfinite(factor)):
        raise ValueError(f"case_clock.limit: argument 'factor' must be a positive number, got {factor!r}")
    if floor is None:
        floor = floor_seconds()
    elif not (floor > 0 and math.isfinite(floor)):
        raise ValueError(f"case_clock.limit: argument 'floor' must be a positive number of seconds, got {floor!r}")
    known = [s for s in (aten_seconds, base_seconds) if s is not None]
    return max(floor, factor * max(known)) if known else floor


@dataclass
class Hang:
    """A case a process was killed in: past its limit. `label`: what the writer was
    running (set_label: e.g. which pass of a task); the case's identity (`info`) and
    inputs; when it started (time.monotonic()), its limit, how long it had run when seen."""

    label: int
    pid: int
    info: CaseInfo
    inputs: str
    started: float
    limit: float
    seconds: float
    #: of `seconds`, how long its processes waited for a CPU (not counted against the limit)
    waited: float = 0.0

    @property
    def where(self) -> tuple:
        """(sample, call): the runner's skip key."""
        return (self.info.sample, self.info.call)

    def _waited_words(self) -> str:
        return f", {self.waited:.3g} s of it waiting for a CPU" if self.waited >= 0.05 else ""

    def case(self) -> CaseResult:
        """The hang case: status "hang", the inputs, the limit it exceeded."""
        return CaseResult(**dataclasses.asdict(self.info), status="hang",
                          message=(f"the kernel did not return within its limit of {self.limit:.3g} s "
                                   f"(still running after {self.seconds:.3g} s{self._waited_words()}; its process was killed)"),
                          inputs=self.inputs, limit_seconds=self.limit, outcome=Outcome("hang", seconds=self.limit))


@dataclass
class OverMemory:
    """A case a process was killed in: it had grown past its memory limit. `label`,
    `info` as a Hang's; `grown`: bytes its resident memory had grown by since it
    started, `limit` its limit (bytes); `in_kernel`: whether the kernel's call was
    in flight (else ATen's reference, a transform, the measurement: etops' work)."""

    label: int
    pid: int
    info: CaseInfo
    grown: int
    limit: int
    in_kernel: bool

    @property
    def where(self) -> tuple:
        """(sample, call): the runner's skip key."""
        return (self.info.sample, self.info.call)

    def words(self) -> str:
        """Why the case was skipped, for people."""
        during = "the kernel's call" if self.in_kernel else "ATen's reference or etops' work on the case"
        return (f"skipped for size: its process grew by {self.grown / 2**30:.2f} GiB during {during}, past its "
                f"memory limit of {self.limit / 2**30:.2f} GiB (killed; the case was not run again)")

    def record_in(self, result: TaskResult) -> None:
        """Records the case in `result` as skipped for size (``too_large``), never as a case run."""
        result.too_large[CaseInfo(*dataclasses.astuple(self.info)).id] = self.words()


class CaseClock:
    """One shared page saying which case its writer is in, since when, with which limit."""

    def __init__(self) -> None:
        """An anonymous shared page: a fork inherits it."""
        self._map = mmap.mmap(-1, _PAGE, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        #: the reader's: ((writer pid, start) of the case in flight, its writer's run-queue wait since first seen)
        self._waits: tuple[tuple[int, float], RunQueueWait] | None = None

    def close(self) -> None:
        """Unmaps the page."""
        self._map.close()

    # -- the writer --

    def publish(self, label: int, started: float, limit_seconds: float, case: dict | None) -> None:
        """Writes the case in flight (None: none, the call returned)."""
        blob = b"" if case is None else json.dumps(case).encode()[:_BLOB]
        seq = _HEAD.unpack_from(self._map, 0)[0] | 1  # odd: a write under way
        struct.pack_into("=Q", self._map, 0, seq)
        _HEAD.pack_into(self._map, 0, seq, os.getpid(), label, started if case is not None else 0.0, limit_seconds, len(blob))
        self._map[_HEAD.size:_HEAD.size + len(blob)] = blob
        struct.pack_into("=Q", self._map, 0, seq + 1)

    # -- the reader --

    def _read(self) -> tuple | None:
        """(pid, label, started, limit, case dict or None) of the last whole write, or
        None (a write under way all along, or a writer killed mid-write: no case to name)."""
        for _ in range(100):
            seq, pid, label, started, limit_seconds, n = _HEAD.unpack_from(self._map, 0)
            if seq & 1:
                time.sleep(0)
                continue
            blob = bytes(self._map[_HEAD.size:_HEAD.size + min(n, _BLOB)])
            if _HEAD.unpack_from(self._map, 0)[0] != seq:
                continue
            try:
                return pid, label, started, limit_seconds, json.loads(blob) if blob else None
            except ValueError:
                return None
        return None

    def current(self) -> tuple | None:
        """(pid, label, started, limit, case dict) of the case in flight, or None
        (none, or a write under way)."""
        read = self._read()
        if read is None or read[2] == 0.0 or read[4] is None:
            return None
        return read

    def overdue(self, now: float | None = None) -> Hang | None:
        """The case in flight when it has run past its limit at `now` (time.monotonic();
        None: now), else None. The time its writer and the processes it forked (a
        guard process) waited for a CPU since this reader first saw the case is not
        the case's (run_queue.RunQueueWait): on a loaded machine a case is judged by
        the time its work had, so a starved process is no hang, while a kernel that
        spins or sleeps forever still is."""
        seen = self.current()
        if seen is None:
            self._waits = None
            return None
        now = time.monotonic() if now is None else now
        pid, label, started, limit_seconds, case = seen
        if self._waits is None or self._waits[0] != (pid, started):
            self._waits = ((pid, started), RunQueueWait(pid))
        if now - started <= limit_seconds:
            return None
        waited = self._waits[1].seconds()
        if now - started - waited <= limit_seconds:
            return None
        info = CaseInfo(*(case[f.name] for f in dataclasses.fields(CaseInfo)))
        return Hang(label, pid, info, case.get("inputs", ""), started, limit_seconds, now - started, waited)

    def case_in(self) -> tuple | None:
        """(pid, label, CaseInfo, whether its kernel call is in flight) of the case its
        writer is in (``entered``, or a kernel call ``started``), or None."""
        read = self._read()
        if read is None or read[4] is None:
            return None
        pid, label, started, _limit, case = read
        return pid, label, CaseInfo(*(case[f.name] for f in dataclasses.fields(CaseInfo))), started != 0.0


def exhausted(hangs, label: int, here: bool = False) -> bool:
    """Whether pass `label` of a task gives up: MAX_HANGS_PER_TASK Hangs in the task,
    or as many OverMemory of that pass or of none (label -1: grown outside a case);
    `here`: the task is run again in the judge's own process (its task process died
    or stalled), which has no memory limit: any OverMemory of the task gives every
    pass up (a case of it may grow that process the same way)."""
    if here and any(isinstance(h, OverMemory) for h in hangs):
        return True
    return (sum(isinstance(h, Hang) for h in hangs) >= MAX_HANGS_PER_TASK
            or sum(isinstance(h, OverMemory) and h.label in (label, -1) for h in hangs) >= MAX_HANGS_PER_TASK)


def skipped(hangs, label: int) -> set:
    """The runner's skip keys (sample, call) of the Hangs of `label`."""
    return {h.where for h in hangs if h.label == label}


def with_hangs(result: TaskResult, hangs, label: int) -> TaskResult:
    """`result` with each of `hangs` of `label` recorded: a Hang's hang case (in
    detail), an OverMemory's case skipped for size (OverMemory.record_in)."""
    for h in hangs:
        if h.label != label:
            continue
        if isinstance(h, OverMemory):
            h.record_in(result)
        else:
            result.record(h.case(), keep=True, every=True)
    return result


def given_up(opinfo: str, dtype: str, hangs, label: int) -> TaskResult:
    """The result of a task given up after MAX_HANGS_PER_TASK cases its processes were
    killed in (Hangs, OverMemory): those of `label`, and why the rest of it was not run."""
    result = with_hangs(TaskResult(opinfo, dtype), hangs, label)
    result.sample_error = (f"gave up after {len(hangs)} cases whose process was killed (past their time limit "
                           "or its memory limit)")
    return result


# ---- this process as a writer -------------------------------------------------------

_clock: CaseClock | None = None
_label = 0
_base_seconds: dict = {}
#: the case in flight on this process's clock: (its limit, its published dict), or None
_in_flight: tuple | None = None
#: the case this process is in (entered), its published dict, or None
_entered: dict | None = None


def use(clock: CaseClock | None) -> None:
    """This process publishes its cases on `clock` (None: nowhere, the default)."""
    global _clock
    _clock = clock
    signature_cache.after_asking(restart)


def restart() -> None:
    """The case in flight starts its time again now (torch was just asked about its
    call: that time is not the kernel's); nothing when none is."""
    if _clock is not None and _in_flight is not None:
        _clock.publish(_label, time.monotonic(), *_in_flight)


def set_label(label: int) -> None:
    """What this process runs now, as its Hangs will say (e.g. which pass of a task)."""
    global _label
    _label = int(label)


def base_seconds(results) -> dict:
    """case id -> the longest time its kernel call took in `results` (TaskResults: their case_seconds)."""
    seconds: dict = {}
    for result in results:
        for case, s in getattr(result, "case_seconds", {}).items():
            seconds[case] = max(s, seconds.get(case, 0.0))
    return seconds


def know_base(seconds: dict) -> None:
    """The base's kernel time per case id (etops dev's base, from an earlier round):
    part of those cases' limits in this process and the processes it forks."""
    _base_seconds.clear()
    _base_seconds.update(seconds)


def known_base() -> dict:
    """The base's kernel times per case id this process knows (know_base)."""
    return dict(_base_seconds)


def started(case, aten_seconds: float | None) -> float:
    """Publishes `case` (a CaseResult: its identity and inputs) as in flight, with its
    limit (ATen's time `aten_seconds`, the base's when known), when this process has a
    clock; returns its start (time.monotonic())."""
    global _in_flight
    now = time.monotonic()
    if _clock is not None:
        seconds = limit(aten_seconds, _base_seconds.get(case.id))
        identity = {f.name: getattr(case, f.name) for f in dataclasses.fields(CaseInfo)}
        _in_flight = (seconds, {**identity, "inputs": (getattr(case, "inputs", "") or "")[:_INPUTS]})
        _clock.publish(_label, now, *_in_flight)
    return now


def ended(since: float) -> float:
    """The call in flight, started at `since` (started's value), returned (or raised):
    no call in flight (the case entered, when one is, published again untimed).
    Returns the seconds it took (torch's answers included)."""
    global _in_flight
    _in_flight = None
    if _clock is not None:
        _clock.publish(_label, 0.0, 0.0, _entered)
    return time.monotonic() - since


def entered(case: CaseInfo) -> None:
    """Publishes `case` as the one this process is in, untimed (its kernel call, when
    it starts, is timed), when this process has a clock."""
    global _entered
    if _clock is not None:
        _entered = {f.name: getattr(case, f.name) for f in dataclasses.fields(CaseInfo)}
        _clock.publish(_label, 0.0, 0.0, _entered)


def left() -> None:
    """This process is in no case any more (entered's ended)."""
    global _entered
    if _clock is not None and _entered is not None:
        _entered = None
        _clock.publish(_label, 0.0, 0.0, None)


__all__ = ["FACTOR", "FLOOR_ENV", "FLOOR_SECONDS", "MAX_HANGS_PER_TASK", "CaseClock", "Hang", "OverMemory", "ended",
           "entered", "exhausted", "floor_seconds", "base_seconds", "given_up", "left", "know_base", "known_base", "limit", "restart", "set_label", "skipped", "started", "use",
           "with_hangs"]
