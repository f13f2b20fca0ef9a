"""Recorded tasks: an OpInfo task's cases recorded once and replayed, without
running the OpInfo again.

An OpInfo task runs the OpInfo's samples under the runner's dispatch mode; most of
its time goes to making the samples and to the ATen calls around the ones that
reach a selected kernel. The cases themselves (each call's inputs, ATen's result)
depend on torch and the task only, not on the kernel judged: ``etops dev`` judges
the same tasks on the edit, on the base and in each dim-order layout, and again on
every ``--watch`` round. A ``Recorder`` gives a runner task sources that record
each OpInfo task's calls the first time it is asked for (the runner in mode
"record": the OpInfo runs, no kernel is called; the inputs exactly cloned, with
the RNG state before a seeded-random call, their description, ATen's result and the
time ATen took, which the case's time limit is derived from: etops.conformance.case_clock)
and then replay them, that first time too: each call goes through the runner's
``handle`` as a run of the OpInfo would give it, so hooks, comparisons and results
are those of such a run; ATen is not called again (its recorded result is the
case's expected one) and the recorded inputs are copied once, for the kernel. Every side
judged through one Recorder gets the same cases the same way (a case that a live
run would give otherwise, the edit and the base alike see as replayed).

A task whose recording passes ``limit_bytes`` of inputs runs the OpInfo, on every
side (unrecorded); one asked for in another mode than "check" runs the OpInfo.

May import: torch, etops.conformance's runner, case and values.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .runner import SOURCES, run_opinfo_task
from .case import describe_call
from .effective import MEASURED, wide_reference
from .values import exact_clone, leaves

#: inputs kept for all recordings of a Recorder, at most (bytes)
LIMIT_BYTES = 512 << 20


@dataclass
class RecordedCall:
    """One call of a task that reached a selected kernel, as the runner's handle got it."""

    func: object  #: the ATen overload
    target: str  #: the kernel's name
    sample: int
    call: int
    args: tuple
    kwargs: dict
    rng: torch.Tensor | None  #: the CPU RNG state before the call, for a seeded-random op
    inputs: str = ""  #: the arguments described (a case's ``inputs``)
    expected: object = None  #: ATen's result on `args` / `kwargs` (keep_result)
    #: ATen's result on the inputs widened to float64 (effective.wide_reference), once asked for
    #: (an empty tuple: ATen has none)
    wide: tuple | None = None
    seconds: float | None = None  #: ATen's time for the call (part of the case's limit: etops.conformance.case_clock)

    def keep_result(self, expected, seconds: float | None = None) -> None:
        """Keeps ATen's result of the recorded call (copied: the task goes on with its
        own) and the time ATen took (None: not measured)."""
        self.expected = exact_clone(expected)
        self.seconds = seconds

    def wide_reference(self) -> list | None:
        """ATen's result on the recorded inputs widened to float64, its leaves (None:
        no wide version), computed once: the edit, the base and every round measure
        their errors against the same reference."""
        if self.wide is None:
            self.wide = tuple(wide_reference(self.func, self.args, self.kwargs) or ())
        return list(self.wide) or None

    def wants_wide(self) -> bool:
        """Whether ATen's result is float16, bfloat16 or float32 (measured against a wide
        reference) of an operator that writes none of its arguments (those are measured
        on the runner's copies, never on the recording's)."""
        mutable = self.func._schema.is_mutable  # type: ignore[attr-defined]
        return not mutable and any(isinstance(v, torch.Tensor) and v.dtype in MEASURED for v in leaves(self.expected))


@dataclass
class Recording:
    """An OpInfo task's calls and what its run told of its samples."""

    atol: float
    rtol: float
    op: object
    calls: list = field(default_factory=list)
    samples: int = 0
    samples_failed: int = 0
    sample_error: str = ""
    nbytes: int = 0


def _nbytes(value) -> int:
    if isinstance(value, torch.Tensor):
        return value.untyped_storage().nbytes()
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    return 0


class Recorder:
    """Task sources that record OpInfo tasks and replay them (see the module doc);
    one Recorder is shared by the runners whose tasks it should remember."""

    def __init__(self, limit_bytes: int = LIMIT_BYTES) -> None:
        self.recordings: dict = {}  #: (task id, dtype, selected kernels) -> Recording
        self.limit_bytes = limit_bytes
        self.nbytes = 0
        self.replayed = 0  #: tasks replayed (not run)
        self.unkept: set = set()  #: keys of tasks too big to keep (run live)

    def keep_only(self, kernels) -> None:
        """Forgets the recordings of tasks that selected other kernels than `kernels`."""
        kernels = set(kernels)
        for key in [k for k in self.recordings if k[2] is None or not k[2] <= kernels]:
            self.nbytes -= self.recordings.pop(key).nbytes
        self.unkept = {k for k in self.unkept if k[2] is not None and k[2] <= kernels}

    def measure_ahead(self, task_id: str, dtype: torch.dtype) -> None:
        """Computes the wide reference of every recorded call of the task that wants one
        (RecordedCall.wide_reference) now, in this process: processes forked after this
        measure against it without computing it each."""
        for key, recording in self.recordings.items():
            if key[0] == task_id and key[1] == dtype:
                for c in recording.calls:
                    if c.wide is None and c.wants_wide():
                        c.wide_reference()

    def sources(self) -> tuple:
        """A runner's ``sources``: SOURCES with the OpInfo source recorded and replayed."""
        return tuple((prefix, self._run if run is run_opinfo_task else run) for prefix, run in SOURCES)

    def prepare(self, runner, task_id: str, dtype: torch.dtype) -> bool:
        """Records the task now, in this process, when `runner` would run it from
        OpInfo's source and it is not recorded yet (processes forked after this
        then replay it rather than each record it for itself); whether it did."""
        for prefix, run in runner.sources:
            if task_id.startswith(prefix):
                if run != self._run or runner.mode != "check":
                    return False
                key = _key(runner, task_id, dtype)
                if key in self.recordings or key in self.unkept:
                    return False
                self._recording(runner, task_id, dtype)
                return True
        return False

    def _run(self, runner, task_id: str, dtype: torch.dtype):
        if runner.mode != "check":
            return run_opinfo_task(runner, task_id, dtype)
        if _key(runner, task_id, dtype) in self.recordings:
            self.replayed += 1
        recording = self._recording(runner, task_id, dtype)
        if recording is None:  # too big to keep: the OpInfo, live
            return run_opinfo_task(runner, task_id, dtype)
        return replay(runner, task_id, dtype, recording)

    def _recording(self, runner, task_id: str, dtype: torch.dtype) -> Recording | None:
        """The task's recording, made now when there is none; None when it would
        pass the limit (kept nowhere)."""
        key = _key(runner, task_id, dtype)
        if key in self.recordings or key in self.unkept:
            return self.recordings.get(key)
        calls: list = []
        recorder = runner.recorder
        runner.recorder, runner.mode = (lambda *call: record_call(calls, *call)), "record"
        try:
            recorded = run_opinfo_task(runner, task_id, dtype)
        finally:
            runner.recorder, runner.mode = recorder, "check"
        nbytes = sum(_nbytes(c.args) + _nbytes(c.kwargs) + _nbytes(c.expected) for c in calls)
        if self.nbytes + nbytes > self.limit_bytes:
            self.unkept.add(key)
            return None
        recording = self.recordings[key] = Recording(runner.atol, runner.rtol, runner.op, calls, recorded.samples,
                                                     recorded.samples_failed, recorded.sample_error, nbytes)
        self.nbytes += nbytes
        return recording


def _key(runner, task_id: str, dtype: torch.dtype) -> tuple:
    """A recording's key: the task, its dtype and the kernels the runner selects."""
    return task_id, dtype, frozenset(runner.selected) if runner.selected is not None else None


def record_call(recorder: list, func, target: str, sample: int, call: int, args, kwargs) -> RecordedCall:
    """Appends one call, as the runner's handle got it (before ATen runs on it), to
    `recorder`; returns it (the runner keeps ATen's result in it)."""
    seeded = torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())
    kept = RecordedCall(func, target, sample, call, exact_clone(args), exact_clone(kwargs),
                        torch.random.get_rng_state() if seeded else None, describe_call(args, kwargs))
    recorder.append(kept)
    return kept


def replay(runner, task_id: str, dtype: torch.dtype, recording: Recording):
    """The task's recorded calls through `runner`'s handle, in order; its TaskResult."""
    runner.begin(task_id, dtype, recording.atol, recording.rtol, op=recording.op)
    start = time.perf_counter()
    for c in recording.calls:
        runner.sample_index, runner.call_index = c.sample, c.call
        if c.rng is not None:
            torch.random.set_rng_state(c.rng)
        runner.handle(c.func, c.target, c.args, c.kwargs, recorded=c)
    runner.result.samples, runner.result.samples_failed = recording.samples, recording.samples_failed
    runner.result.sample_error = recording.sample_error
    runner.result.seconds = time.perf_counter() - start
    return runner.result


__all__ = ["LIMIT_BYTES", "RecordedCall", "Recorder", "Recording", "record_call", "replay"]
