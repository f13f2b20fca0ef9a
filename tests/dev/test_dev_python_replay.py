"""etops dev's replay of the upstream Python tests' kernel calls: the base's run is
recorded (etops.conformance.llm_replay), and an edit's run replays the recording on
the edit first: an edit that changes nothing a call gives back gets the base's
statuses from the replay alone; one that changes a call's result stops the replay
there and the tests run for real, the failing test gating; the recording is kept
under a key that changes with the test files' texts and with torch's, executorch's
and etops' versions and sources."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import minillm
from etops.dev.upstream_python import REPLAY_SWITCH, replay_wanted

#: the reference cases only, no axis, no timing, no C++ test: the Python tests are what is judged here
QUICK = ["--no-timing", "--no-gtest", "--no-dim-orders", "--no-numerics", "--no-generated"]


def _dev(path, json_path):
    proc = subprocess.run([sys.executable, "-m", "etops", "dev", str(path), *QUICK, "--json", str(json_path)],
                          capture_output=True, text=True, timeout=900, env=dict(os.environ, **{REPLAY_SWITCH: "1"}))
    return proc, json.loads(json_path.read_text())["files"][0]


def _statuses(tests):
    [ran] = tests["files"]
    return {t["test"].rsplit(".", 1)[-1]: (t["base"], t["status"]) for t in ran["tests"]}


def test_an_edit_changing_no_call_is_judged_by_the_replay_and_one_changing_a_call_runs_the_tests(tmp_path):
    path = minillm.write(tmp_path / "checkout", python_test=True)
    path.write_text(path.read_text() + "\n// an edit no call can observe\n")
    proc, result = _dev(path, tmp_path / "dev.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tests = result["python_tests"]
    assert tests["replay"]["outcome"] == "equal" and tests["replay"]["calls"] == 2, tests["replay"]
    assert _statuses(tests) == {"test_update_cache_at_start": ("passed", "passed"),
                                "test_update_cache_in_the_middle": ("passed", "passed"),
                                "test_update_cache_of_a_model": ("skipped", "skipped")}
    assert "the base's 2 kernel calls replayed on the edit gave back bitwise what they gave the base" in proc.stdout

    minillm.plant(tmp_path / "checkout", minillm.SHORT_CACHE)  # the second call (start_pos 4) writes a row early
    proc, result = _dev(path, tmp_path / "dev.json")  # a new process: the base's run and recording from disk
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert result["learned"]["base-python-tests"] == {"loaded": 1, "recomputed": 0}
    tests = result["python_tests"]
    assert tests["replay"]["outcome"] == "differs" and tests["replay"]["calls"] == 1
    assert tests["replay"]["why"].startswith("call 2 of 2 (llama::update_cache.out, ")
    assert "test_update_cache_in_the_middle" in tests["replay"]["why"]
    assert _statuses(tests)["test_update_cache_in_the_middle"] == ("passed", "failed")  # the real run's
    [regression] = tests["regressions"]
    assert regression["test"].endswith("test_update_cache_in_the_middle")


def test_the_recording_is_kept_under_the_test_texts_and_the_environment(tmp_path, monkeypatch):
    from etops import learned_store
    from etops.dev.learned import replay_folder

    monkeypatch.setenv("ETOPS_CACHE_DIR", str(tmp_path))
    key = (("a" * 64, "headers"), ("llama::custom_sdpa.out",), (("test_sdpa.py", "def test(): pass\n"),))
    folder = replay_folder(key)
    assert folder.parent == tmp_path / "python-replay" and replay_folder(key) == folder
    edited = (key[0], key[1], (("test_sdpa.py", "def test(): assert False\n"),))
    assert replay_folder(edited) != folder
    assert replay_folder(((("a" * 63) + "b", "headers"), key[1], key[2])) != folder  # another base
    assert replay_folder(((None, "headers"), key[1], key[2])) is None  # a base that is no build: nothing kept
    torch_version, executorch_version, etops_version, sources = learned_store.environment()
    for changed in ((torch_version + "+other", executorch_version, etops_version, sources),
                    (torch_version, executorch_version + "+other", etops_version, sources),
                    (torch_version, executorch_version, etops_version + "+other", sources),
                    (torch_version, executorch_version, etops_version, "other sources")):
        monkeypatch.setattr(learned_store, "_environment", changed)
        assert replay_folder(key) != folder


#: a test file that imports a way to run programs (ExecuTorch's pybindings' loader):
#: kernels may be reached without the routed torch ops, so it always runs; each run
#: appends a line to RUNS (a path written into it)
UNROUTED_TEST = """\
import unittest

import torch

from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
from executorch.extension.pybindings.portable_lib import _load_for_executorch  # noqa: F401


class ProgramTest(unittest.TestCase):
    def test_update_cache_then_note_the_run(self):
        cache = torch.zeros(1, 10, 2, 4)
        torch.ops.llama.update_cache.out(torch.ones(1, 2, 2, 4), cache, 4, out=torch.zeros(1))
        with open(RUNS, "a") as f:
            f.write("ran\\n")
        self.assertTrue(torch.equal(cache[:, 4:6], torch.ones(1, 2, 2, 4)))
"""


def test_a_test_file_that_may_reach_kernels_unrouted_runs_and_the_others_replay(tmp_path):
    path = minillm.write(tmp_path / "checkout", python_test=True)
    runs = tmp_path / "runs.txt"
    path.with_name("test_mini_program.py").write_text(UNROUTED_TEST.replace("RUNS", repr(str(runs))))
    path.write_text(path.read_text() + "\n// an edit no call can observe\n")
    proc, result = _dev(path, tmp_path / "dev.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tests = result["python_tests"]
    assert tests["replay"]["outcome"] == "equal" and tests["replay"]["calls"] == 2  # test_mini_cache.py's calls only
    assert [f["file"].rsplit("/", 1)[-1] for f in tests["files"]] == ["test_mini_cache.py", "test_mini_program.py"]
    assert tests["counts"] == {"passed": 3, "failed": 0, "skipped": 1}
    assert runs.read_text() == "ran\nran\n"  # on the base and on the edit


def test_the_replay_is_off_unless_asked_for(monkeypatch):
    monkeypatch.delenv(REPLAY_SWITCH, raising=False)
    assert not replay_wanted()
    monkeypatch.setenv(REPLAY_SWITCH, "0")
    assert not replay_wanted()
    monkeypatch.setenv(REPLAY_SWITCH, "1")
    assert replay_wanted()
