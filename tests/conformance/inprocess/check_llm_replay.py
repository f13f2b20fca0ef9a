"""Record and replay of the kernel calls upstream-style LLM tests make
(etops.conformance.llm_replay): a run of a test file records its routed calls; the
recording replayed on the same kernel gives back bitwise what it gave (the tests'
draws were unseeded: the replay uses the recorded ones); replayed on a kernel that
writes one row late, on one that answers differently from call to call, or on one
that accepts what the recorded kernel refused, it stops at the first differing call;
each call is replayed at the thread count it was made with. (Run in a fresh
interpreter: loading the library registers its kernels.)"""

from __future__ import annotations

import importlib

import torch

import etops
from etops.conformance import llm_replay, llm_upstream
from etops.conformance.references import llm_math as m

importlib.import_module(llm_upstream.LIBRARY)

#: an upstream-style test file: two updates of one cache (the second reads the first's
#: result), unseeded draws, and a call the kernel refuses (a value past the cache's end);
#: the out variant with outs of its own (the functional one returns the out etops
#: allocates, which update_cache never writes: bytes no run repeats)
TEST_FILE = """\
import unittest

import torch

from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool


class CacheTest(unittest.TestCase):
    def test_two_updates(self):
        _unsafe_reset_threadpool(3)
        cache = torch.zeros(1, 10, 2, 4)
        first, second = torch.randn(1, 2, 2, 4), torch.randn(1, 3, 2, 4)
        out = torch.zeros(1)
        torch.ops.llama.update_cache.out(first, cache, 0, out=out)
        torch.ops.llama.update_cache.out(second, cache, 2, out=out)
        self.assertTrue(torch.equal(cache[:, 2:5], second))

    def test_a_value_past_the_end_is_refused(self):
        with self.assertRaises(RuntimeError):
            torch.ops.llama.update_cache.out(torch.randn(1, 4, 2, 4), torch.zeros(1, 10, 2, 4), 8, out=torch.zeros(1))
"""


def _call(kernel, variant, args, kwargs):
    return llm_upstream.kernel_call(kernel, variant)(*args, **kwargs)


def _record(tmp_path, pattern=None):
    test = tmp_path / "test_replayed_cache.py"
    test.write_text(TEST_FILE)
    recorder = llm_replay.Recorder(tmp_path / "recording")
    outcomes = llm_upstream.run_test_file(test, ["llama::update_cache.out"], pattern, recorder=recorder)
    assert {o.status for o in outcomes} == {"passed"}
    recorder.finish()
    recorder.publish()
    recording = llm_replay.load(tmp_path / "recording")
    assert recording is not None and recording.replayable
    return recording


def test_a_recording_replayed_on_the_same_kernel_gives_back_what_it_gave(tmp_path):
    recording = _record(tmp_path)
    assert [(c.kernel, c.test.rsplit(".", 1)[-1]) for c in recording.calls] == [
        ("llama::update_cache.out", "test_a_value_past_the_end_is_refused"),
        ("llama::update_cache.out", "test_two_updates"), ("llama::update_cache.out", "test_two_updates")]
    assert recording.calls[0].outcome[0] == "raised" and recording.calls[1].outcome[0] == "returned"
    assert recording.calls[2].storages[1][0] == "after"  # the second update reads the cache the first left
    assert {c.threads for c in recording.calls[1:]} == {3}
    done = llm_replay.replay(recording, tmp_path / "recording", _call)
    assert done.equal and done.calls == 3, done.first_difference


def _update_cache_one_late(value, cache, start_pos, out=None):
    start = min(start_pos + 1, cache.shape[1] - value.shape[1])
    cache.copy_(m.write_cache(value, cache, start))
    return out


def test_a_kernel_writing_other_bytes_stops_the_replay_at_that_call(tmp_path):
    recording = _record(tmp_path)
    with etops.override("llama::update_cache.out", _update_cache_one_late):
        done = llm_replay.replay(recording, tmp_path / "recording", _call)
    assert not done.equal and done.calls == 0  # the refused call is accepted: its outcome differs first
    assert "call 1 of 3" in done.first_difference and "raised" in done.first_difference


def test_a_kernel_answering_differently_each_time_is_not_replayed_equal(tmp_path):
    recording = _record(tmp_path, "test_two_updates")

    def noisy(value, cache, start_pos, out=None):
        cache[:, start_pos:start_pos + value.shape[1]] = value + torch.rand(()) * 1e-6
        return out

    with etops.override("llama::update_cache.out", noisy):
        done = llm_replay.replay(recording, tmp_path / "recording", _call)
    assert not done.equal and done.calls == 0
    assert done.first_difference.startswith("call 1 of 2 (llama::update_cache.out, ")
    assert "argument storage 1 left with other bytes" in done.first_difference


def test_each_call_is_replayed_at_the_thread_count_it_was_made_with(tmp_path):
    from executorch.extension.pybindings.portable_lib import _threadpool_get_thread_count, _unsafe_reset_threadpool

    recording = _record(tmp_path, "test_two_updates")
    seen = []

    def counting(value, cache, start_pos, out=None):
        seen.append(_threadpool_get_thread_count())
        cache[:, start_pos:start_pos + value.shape[1]] = value
        return out

    _unsafe_reset_threadpool(1)
    with etops.override("llama::update_cache.out", counting):
        llm_replay.replay(recording, tmp_path / "recording", _call)
    assert seen == [3, 3]


def test_past_its_limit_a_recording_is_not_replayable(tmp_path):
    test = tmp_path / "test_replayed_cache.py"
    test.write_text(TEST_FILE)
    recorder = llm_replay.Recorder(tmp_path / "recording", limit=100)
    outcomes = llm_upstream.run_test_file(test, ["llama::update_cache.out"], recorder=recorder)
    assert [o.status for o in outcomes] == ["passed", "passed"]  # the tests ran all the same
    recording = recorder.finish()
    assert not recording.replayable and "more than 0 MB" in recording.why


def test_a_test_running_programs_reaches_kernels_unrouted():
    assert not llm_replay.reaches_kernels_unrouted(TEST_FILE)
    assert llm_replay.reaches_kernels_unrouted(
        "from executorch.extension.pybindings.portable_lib import _load_for_executorch\n")
    assert llm_replay.reaches_kernels_unrouted("import executorch.runtime\n")
    assert llm_replay.reaches_kernels_unrouted("from executorch.runtime import Runtime\n")
