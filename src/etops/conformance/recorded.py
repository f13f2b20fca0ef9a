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
side (unrecorded); one asked for in another mode than "check" runs the OpInfo,
except a capture of one call (a finding's inputs found again), which a recording
holding that call answers.

With a ``store`` (etops.learned_store), the recordings outlive the process: one
made here is written there by ``save()`` (with the wide references worked out so
far), and a task not recorded in this process is read from there before its
OpInfo is run, keyed by the task, its dtype, the kernels selected and the seed
its samples are made with (the store adds torch's, executorch's and etops'
versions). ``recomputed`` counts the tasks recorded here, ``loaded`` those read.

May import: torch, the core, etops.conformance's runner, case and values.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import torch

from .runner import SOURCES, run_opinfo_task, task_seed
from .case import describe_call
from .effective import MEASURED, wide_reference
from .values import dtype_name, exact_clone, leaves

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

    def __init__(self, limit_bytes: int = LIMIT_BYTES, store=None) -> None:
        self.recordings: dict = {}  #: (task id, dtype, selected kernels) -> Recording
        self.limit_bytes = limit_bytes
        self.nbytes = 0
        self.replayed = 0  #: tasks replayed (not run)
        self.unkept: set = set()  #: keys of tasks too big to keep (run live)
        self.store = store  #: an etops.learned_store.Store keeping the recordings for later processes, or None
        self.recomputed = 0  #: tasks recorded (their OpInfo run) in this process
        self.loaded = 0  #: tasks whose recording was read from the store
        self._unsaved: set = set()  #: keys of recordings made here and not in the store yet

    def keep_only(self, kernels) -> None:
        """Forgets the recordings of tasks that selected other kernels than `kernels`."""
        kernels = set(kernels)
        for key in [k for k in self.recordings if k[2] is None or not k[2] <= kernels]:
            self.nbytes -= self.recordings.pop(key).nbytes
            self._unsaved.discard(key)
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
        if runner.mode == "capture" and self._capture(runner, task_id, dtype):
            return runner.result if hasattr(runner, "result") else None
        if runner.mode != "check":
            return run_opinfo_task(runner, task_id, dtype)
        if _key(runner, task_id, dtype) in self.recordings:
            self.replayed += 1
        recording = self._recording(runner, task_id, dtype)
        if recording is None:  # too big to keep: the OpInfo, live
            return run_opinfo_task(runner, task_id, dtype)
        return replay(runner, task_id, dtype, recording)

    def _capture(self, runner, task_id: str, dtype: torch.dtype) -> bool:
        """Answers a capture runner (mode "capture") from the task's recordings, when
        one holds the call asked for exactly as a live run numbers it: a recording
        with the runner's selection, or the one recording among those of a single
        selected kernel (in memory or in the store) with calls in that sample, when
        it has the call (a sample reaching one selected kernel numbers its calls
        alike either way). Whether it answered."""
        sample, call = runner.capture_at
        selections = [None if runner.selected is None else frozenset(runner.selected)]
        selections += [frozenset({k}) for k in sorted(runner.selected or ())]
        exact = self._known((task_id, dtype, selections[0]))
        if exact is not None:
            chosen = [exact]
        else:
            chosen = [r for r in (self._known((task_id, dtype, s)) for s in selections[1:] if len(selections) > 2)
                      if r is not None and any(c.sample == sample for c in r.calls)]
            if len(chosen) != 1:
                return False
        found = [c for c in chosen[0].calls if (c.sample, c.call) == (sample, call)]
        if not found:
            return False
        c = found[0]
        runner.captured = (c.func, c.target, exact_clone(c.args), exact_clone(c.kwargs))
        return True

    def _known(self, key) -> Recording | None:
        """The recording of `key` in memory, else in the store (kept in memory then), else None."""
        if key in self.recordings:
            return self.recordings[key]
        if self.store is None or key in self.unkept:
            return None
        found = self.store.load(_disk_key(key))
        if not isinstance(found, Recording):
            return None
        if self.nbytes + found.nbytes > self.limit_bytes:
            return None
        self.recordings[key] = found
        self.nbytes += found.nbytes
        self.loaded += 1
        return found

    def save(self) -> int:
        """Writes the recordings made in this process to the store (none without
        one), each with the wide references worked out so far; how many."""
        if self.store is None:
            return 0
        written = 0
        for key in sorted(self._unsaved, key=repr):
            recording = self.recordings.get(key)
            if recording is not None and self.store.save(_disk_key(key), replace(recording, op=None)):
                written += 1
        self._unsaved.clear()
        return written

    def _recording(self, runner, task_id: str, dtype: torch.dtype) -> Recording | None:
        """The task's recording: in memory, else in the store, else made now; None
        when it would pass the limit (kept nowhere)."""
        key = _key(runner, task_id, dtype)
        if key in self.recordings or key in self.unkept:
            return self.recordings.get(key)
        if self._known(key) is not None:
            return self.recordings[key]
        self.recomputed += 1
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
        self._unsaved.add(key)
        return recording


def _disk_key(key: tuple) -> tuple:
    """A recording's key in the store: the task, its dtype's name, the kernels
    selected (sorted; None: all) and the seed of its samples."""
    task_id, dtype, kernels = key
    return ("recording", task_id, dtype_name(dtype), None if kernels is None else sorted(kernels),
            task_seed(task_id, dtype))


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
