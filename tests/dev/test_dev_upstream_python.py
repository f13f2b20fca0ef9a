"""etops dev's upstream Python tests of an LLM kernel file: which test files next
to it are run (those calling a torch op routed to one of its operators, read from
their syntax tree), and the comparison of the edit's run with the base's on the
tests' statuses (a test passing on the base and failing on the edit, or cut off by
the edit's process ending, is a regression; one failing on both is not)."""

from __future__ import annotations

from etops.conformance.llm_upstream import files_calling, torch_ops_called
from etops.dev.upstream_python import compare


def test_the_torch_ops_a_test_calls_are_read_from_its_syntax_tree():
    source = ("import torch\nop = torch.ops.llama.update_cache\ntorch.ops.llama.custom_sdpa.default(q)\n"
              "# torch.ops.llama.fallback in a comment\ntext = 'torch.ops.llama.gated_delta_rule'\n")
    assert torch_ops_called(source) == {("llama", "update_cache"), ("llama", "custom_sdpa")}


def test_the_test_files_run_are_those_calling_the_files_operators(tmp_path):
    (tmp_path / "test_cache.py").write_text("import torch\ntorch.ops.llama.update_cache(v, c, 0)\n")
    (tmp_path / "test_sdpa.py").write_text("import torch\ntorch.ops.llama.custom_sdpa(q, k, v, 0)\n")
    (tmp_path / "test_broken.py").write_text("def (:\n")
    (tmp_path / "helper.py").write_text("import torch\ntorch.ops.llama.update_cache(v, c, 0)\n")
    assert files_calling(tmp_path, ["llama::update_cache.out"]) == [tmp_path / "test_cache.py"]
    assert files_calling(tmp_path, ["llama::fallback.out"]) == []


def _name(path):
    return f"checkout/{path}"


BASE = {"t.py": [("T.test_a", "passed", ""), ("T.test_b", "passed", ""), ("T.test_c", "failed", "AssertionError"),
                 ("T.test_d", "skipped", "needs a model")]}


def test_a_test_the_base_passes_and_the_edit_fails_is_a_regression_one_failing_on_both_is_not():
    edit = {"t.py": [("T.test_a", "passed", ""), ("T.test_b", "failed", "AssertionError: off by one"),
                     ("T.test_c", "failed", "AssertionError"), ("T.test_d", "skipped", "needs a model")]}
    out = compare(BASE, edit, _name)
    assert [(r["file"], r["test"], r["before"], r["status"]) for r in out["regressions"]] == [
        ("checkout/t.py", "T.test_b", "passed", "failed")]
    assert out["base_failing"] == ["T.test_c"] and out["counts"] == {"passed": 1, "failed": 2, "skipped": 1}
    assert compare(BASE, BASE, _name)["regressions"] == []


def test_the_edit_ending_its_process_makes_each_test_the_base_passed_a_regression():
    out = compare(BASE, "its process ended with signal 11 (SIGSEGV) without a result", _name)
    assert [(r["test"], r["status"]) for r in out["regressions"]] == [("T.test_a", "crashed"), ("T.test_b", "crashed")]


def test_without_a_base_every_failing_test_is_new_and_a_dead_base_compares_nothing():
    edit = {"t.py": [("T.test_a", "failed", "AssertionError")]}
    assert [r["before"] for r in compare(None, edit, _name)["regressions"]] == ["no base"]
    dead = compare("its process ended with signal 6 (SIGABRT) without a result", edit, _name)
    assert dead["regressions"] == [] and dead["not_run"][0]["why"].startswith("the base's run did not end")


def test_what_executorch_code_logs_during_the_tests_stays_off_the_terminal():
    """A logging handler holds the terminal's stream (redirect_stderr does not reach
    it): the library's ATen wrappers log "No temp allocator provided" while the
    tests compute their expected values; the tests' outcomes are the result."""
    import contextlib
    import logging
    import types
    import unittest

    from etops import _logs
    from etops.conformance.llm_upstream import _run_module

    class Logs(unittest.TestCase):
        def test_logs_an_error(self):
            _logs.logger.error("No temp allocator provided (planted)")

    module = types.ModuleType("planted_upstream_test")
    module.Logs = Logs
    Logs.__module__ = module.__name__
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    _logs.logger.addHandler(handler)
    try:
        outcomes = _run_module(module, None, contextlib.nullcontext())
    finally:
        _logs.logger.removeHandler(handler)
    assert [o.status for o in outcomes] == ["passed"]
    assert seen == [] and not _logs.logger.disabled
