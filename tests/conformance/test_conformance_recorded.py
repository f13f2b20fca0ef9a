"""Recorded tasks (etops.conformance.recorded): a task replayed from its recording
gives what running its OpInfo gives, case for case, also under a layout's hooks and
for a seeded-random operator, the first time (recorded, then replayed) and after;
a deadline applies to the replay; what is too big to keep runs the OpInfo."""

from __future__ import annotations

import pytest
import torch

from etops.conformance.dim_orders import AXIS_LAYOUTS
from etops.conformance.recorded import Recorder
from etops.conformance.runner import TaskRunner, default_kmap

#: (OpInfo, dtype, kernel, hooks): a plain task; one whose cases are calls inside a
#: composite (poisson_nll_loss reaches add); one with a finding (float64 sum's
#: float32 accumulation); a seeded-random one; one under the transposed layout
TASKS = [
    ("add", torch.float32, "aten::add.out", None),
    ("nn.functional.poisson_nll_loss", torch.float32, "aten::add.out", None),
    ("sum", torch.float64, "aten::sum.IntList_out", None),
    ("randn", torch.float32, "aten::randn.out", None),
    ("mul", torch.float32, "aten::mul.out", AXIS_LAYOUTS["transposed"]),
]


def _outcome(result):
    counts = {key: {s: n for s, n in tally.counts.items() if n} for key, tally in result.tallies.items()}
    return counts, dict(result.failing), result.samples, result.samples_failed


@pytest.mark.parametrize("opinfo, dtype, kernel, hooks", TASKS, ids=[f"{t[0]}-{t[2]}" for t in TASKS])
def test_a_replayed_task_gives_the_cases_of_its_opinfo_run(opinfo, dtype, kernel, hooks):
    kmap = default_kmap()
    recorder = Recorder()
    torch.manual_seed(0)
    first = TaskRunner(kmap, [kernel], hooks=hooks, sources=recorder.sources()).run(opinfo, dtype)
    assert recorder.replayed == 0 and len(recorder.recordings) == 1
    (recording,) = recorder.recordings.values()
    assert recording.calls, "the task reaches the kernel"
    plain = TaskRunner(kmap, [kernel], hooks=hooks).run(opinfo, dtype)
    torch.manual_seed(1)  # the replay does not depend on the RNG's state before it
    again = TaskRunner(kmap, [kernel], hooks=hooks, sources=recorder.sources()).run(opinfo, dtype)
    assert recorder.replayed == 1
    assert _outcome(again) == _outcome(first) == _outcome(plain)
    if hooks is None:  # (a layout's hooks leave out the cases with no input to lay out)
        assert sum(sum(t.counts.values()) for t in again.tallies.values()) == len(recording.calls)


def test_a_deadline_leaves_replayed_cases_out_and_the_recording_whole():
    kmap, recorder = default_kmap(), Recorder()
    late = TaskRunner(kmap, ["aten::add.out"], sources=recorder.sources(), deadline=0.0)  # every case left out
    result = late.run("add", torch.float32)
    (recording,) = recorder.recordings.values()
    assert late.left_out == len(recording.calls) > 0 and not result.tallies
    again = TaskRunner(kmap, ["aten::add.out"], sources=recorder.sources()).run("add", torch.float32)
    assert recorder.replayed == 1 and sum(sum(t.counts.values()) for t in again.tallies.values()) == len(recording.calls)


def test_what_is_not_recorded_runs_the_opinfo():
    kmap = default_kmap()
    recorder = Recorder(limit_bytes=0)  # no room: nothing is kept
    TaskRunner(kmap, ["aten::add.out"], sources=recorder.sources()).run("add", torch.float32)
    assert recorder.recordings == {}
    other = TaskRunner(kmap, ["aten::mul.out"], sources=recorder.sources(), mode="discover")
    other.run("mul", torch.float32)
    assert recorder.recordings == {} and "aten::mul.out" in other.reached


def test_keep_only_forgets_other_kernels_recordings():
    kmap = default_kmap()
    recorder = Recorder()
    for kernel, opinfo in (("aten::add.out", "add"), ("aten::mul.out", "mul")):
        TaskRunner(kmap, [kernel], sources=recorder.sources()).run(opinfo, torch.float32)
    before = recorder.nbytes
    recorder.keep_only(["aten::mul.out"])
    assert [key[2] for key in recorder.recordings] == [frozenset({"aten::mul.out"})]
    assert 0 < recorder.nbytes < before


class _SeenByATen:
    """A comparison that keeps ATen's result of every case and judges none."""

    name = "seen"

    def __init__(self) -> None:
        self.results: list = []

    def reference(self, runner, case, func, args, kwargs, expected):
        from etops.conformance.runner import NO_REFERENCE

        self.results.append(expected.clone())
        return NO_REFERENCE


def test_a_seeded_random_call_is_replayed_with_the_rng_state_it_had():
    """ATen's randn in a replay returns the values it returned in the OpInfo's run:
    the RNG state before each seeded-random call is part of the recording."""
    kmap, recorder = default_kmap(), Recorder()
    first, again = _SeenByATen(), _SeenByATen()
    TaskRunner(kmap, ["aten::randn.out"], sources=recorder.sources(), comparisons=(first,)).run("randn", torch.float32)
    torch.manual_seed(123)
    TaskRunner(kmap, ["aten::randn.out"], sources=recorder.sources(), comparisons=(again,)).run("randn", torch.float32)
    assert recorder.replayed == 1 and len(first.results) == len(again.results) > 0
    assert all(torch.equal(a, b) for a, b in zip(first.results, again.results))
    assert any(a.numel() > 0 for a in first.results)


def test_a_replay_calls_no_aten_and_leaves_the_recording_as_recorded():
    """A replayed case takes ATen's recorded result and gives the kernel a copy of
    the recorded inputs: ATen is not called, and after the replay the recording
    (inputs, ATen's result) holds what it held."""
    from etops.conformance import recorded

    kmap, recorder = default_kmap(), Recorder()
    TaskRunner(kmap, ["aten::add.out"], sources=recorder.sources()).run("add", torch.float32)
    (recording,) = recorder.recordings.values()
    before = [recorded.exact_clone((c.args, c.kwargs, c.expected)) for c in recording.calls]
    assert all(c.expected is not None and c.inputs for c in recording.calls)
    aten_calls = []

    class Counting:
        """The recorded functions, counting their calls."""

        def __init__(self, func):
            self.func, self._schema, self.tags = func, func._schema, getattr(func, "tags", ())

        def __call__(self, *args, **kwargs):
            aten_calls.append(self.func)
            return self.func(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self.func, name)

    originals = [c.func for c in recording.calls]
    for c in recording.calls:
        c.func = Counting(c.func)
    try:
        again = TaskRunner(kmap, ["aten::add.out"], sources=recorder.sources()).run("add", torch.float32)
    finally:
        for c, f in zip(recording.calls, originals):
            c.func = f
    assert aten_calls == [] and recorder.replayed == 1
    assert sum(sum(t.counts.values()) for t in again.tallies.values()) == len(recording.calls)
    for c, (args, kwargs, expected) in zip(recording.calls, before):
        for kept, was in zip(torch.utils._pytree.tree_leaves((c.args, c.kwargs, c.expected)),
                             torch.utils._pytree.tree_leaves((args, kwargs, expected))):
            assert not isinstance(kept, torch.Tensor) or torch.equal(kept, was)


def test_a_guarded_replay_gives_the_recorded_inputs_uncopied_and_leaves_them_as_recorded():
    """Hooks whose call never writes its inputs (``leaves_inputs``: a guarded call
    places copies of its own) get the recorded tensors themselves, no copy per case;
    an unguarded replay gets copies. Either way the recording holds what it held."""
    import etops

    leaves = torch.utils._pytree.tree_leaves
    kmap, recorder = default_kmap(), Recorder()
    TaskRunner(kmap, ["aten::add.out"], sources=recorder.sources()).run("add", torch.float32)
    (recording,) = recorder.recordings.values()
    before = [[t.clone() if isinstance(t, torch.Tensor) else t for t in leaves((c.args, c.kwargs))] for c in recording.calls]
    recorded = {id(t) for c in recording.calls for t in leaves((c.args, c.kwargs)) if isinstance(t, torch.Tensor)}

    class Seeing:
        """Guarded calls, noting the tensors they are given."""

        def __init__(self, leaves_inputs):
            self.leaves_inputs, self.given = leaves_inputs, []

        def invoke(self, kernel, args, kwargs):
            self.given += [id(t) for t in leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            return etops.guard.call(kernel, *args, **kwargs)

    guarded, copying = Seeing(True), Seeing(False)
    for hooks in (guarded, copying):
        again = TaskRunner(kmap, ["aten::add.out"], hooks=hooks, sources=recorder.sources()).run("add", torch.float32)
        assert sum(t.counts.get("pass", 0) for t in again.tallies.values()) == len(recording.calls)
    assert recorded & set(guarded.given)  # the recording's own tensors
    assert not recorded & set(copying.given)  # copies
    for c, was in zip(recording.calls, before):
        for kept, old in zip(leaves((c.args, c.kwargs)), was):
            assert not isinstance(kept, torch.Tensor) or torch.equal(kept, old)


def _store(tmp_path, monkeypatch):
    from etops.learned_store import Store

    monkeypatch.setenv("ETOPS_CACHE_DIR", str(tmp_path))
    return Store("recording")


def test_a_recording_saved_is_replayed_by_a_later_recorder_without_running_the_opinfo(tmp_path, monkeypatch):
    """A Recorder with a store writes its recordings (save); a new one (a later
    process) replays them from there, recording nothing, case for case alike; a
    capture of one call is answered from the recording."""
    from etops.conformance import runner as runner_module

    kmap, store = default_kmap(), _store(tmp_path, monkeypatch)
    first = Recorder(store=store)
    made = TaskRunner(kmap, ["aten::add.out"], sources=first.sources()).run("add", torch.float32)
    assert first.recomputed == 1 and first.save() == 1
    (recording,) = first.recordings.values()
    later = Recorder(store=store)

    def no_opinfos():
        raise AssertionError("an OpInfo was run")

    monkeypatch.setattr(runner_module, "opinfos", no_opinfos)
    again = TaskRunner(kmap, ["aten::add.out"], sources=later.sources()).run("add", torch.float32)
    assert later.recomputed == 0 and later.loaded == 1
    assert _outcome(again) == _outcome(made)
    call = recording.calls[-1]
    found = runner_module.capture(kmap, ["aten::add.out", "aten::mul.out"], "add", torch.float32, call.sample, call.call,
                                  sources=later.sources())
    func, target, args, _kwargs = found
    assert func is call.func and target == "aten::add.out"
    assert all(torch.equal(a, b) for a, b in zip(args, call.args) if isinstance(a, torch.Tensor))


def test_a_recording_is_keyed_by_its_task_dtype_and_kernels(tmp_path, monkeypatch):
    kmap, store = default_kmap(), _store(tmp_path, monkeypatch)
    first = Recorder(store=store)
    TaskRunner(kmap, ["aten::add.out"], sources=first.sources()).run("add", torch.float32)
    first.save()
    later = Recorder(store=store)
    TaskRunner(kmap, ["aten::add.out"], sources=later.sources()).run("add", torch.float64)  # another dtype
    TaskRunner(kmap, ["aten::add.out", "aten::mul.out"], sources=later.sources()).run("add", torch.float32)  # more kernels
    assert later.recomputed == 2 and later.loaded == 0
