"""etops.dev.upstream_tests.edit_gtest_timeout: an upstream test binary's run on the edit is
bounded by the base's run of it (a kernel that never returns costs that, not the
300 s etops gtest allows a binary)."""

from __future__ import annotations

from types import SimpleNamespace

from etops.dev.upstream_tests import GTEST_FACTOR, GTEST_FLOOR, edit_gtest_timeout


def _run(*seconds):
    return SimpleNamespace(files=[SimpleNamespace(run_seconds=s) for s in seconds])


def test_the_edits_test_run_is_bounded_by_the_bases():
    assert edit_gtest_timeout(_run(0.2, 4.0)) == GTEST_FACTOR * 4.0
    assert edit_gtest_timeout(_run(0.01)) == GTEST_FLOOR  # never under the floor
    assert edit_gtest_timeout(None) == 300.0  # no base run: etops gtest's own limit
    assert edit_gtest_timeout(_run(0.0)) == 300.0  # a file that never ran says nothing
