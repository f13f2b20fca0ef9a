"""etops.dev.early: the early pass runs only when the round streams and discovery is
not on disk; its tasks are at float32 unless the round's dtypes leave it out, and
are those of the OpInfos named after the operator (no discovery)."""

from __future__ import annotations

import torch

from etops.dev import early, stream


def test_the_early_dtype_is_float32_unless_the_rounds_dtypes_leave_it_out():
    assert early.early_dtype(None) == "float32"
    assert early.early_dtype([torch.float64, torch.float32]) == "float32"
    assert early.early_dtype(["int16", "float64"]) == "int16"


def test_the_early_pass_runs_only_when_the_round_streams_and_discovery_is_not_on_disk():
    assert not early.needed(discovered=False), "the Python API streams nothing: no early pass"
    with stream.enabled(lambda line: None):
        assert early.needed(discovered=False)
        assert not early.needed(discovered=True), "with discovery on disk the judge streams float32 first itself"


def test_the_early_tasks_are_the_named_opinfos_at_one_dtype():
    plan = early.early_plan(["aten::mul.out", "etops_test::nothing_named.out"], ["float32", "float64"], generated=False)
    assert list(plan) == ["aten::mul.out"], "an operator with no named OpInfo and no reference has no early task"
    tasks = plan["aten::mul.out"]
    assert {t["dtype"] for t in tasks} == {"float32"}
    assert "mul" in {t["opinfo"] for t in tasks}


def test_while_building_runs_both_at_once_and_raises_the_builds_error_first():
    import threading

    import pytest

    started = threading.Event()
    order = []

    def build():
        assert started.wait(30), "meanwhile() did not run while the build ran"
        order.append("built")
        return "library"

    def meanwhile():
        started.set()
        order.append("recorded")

    assert early.while_building(build, meanwhile) == "library" and sorted(order) == ["built", "recorded"]

    def failing_build():
        raise RuntimeError("the build failed")

    def failing_meanwhile():
        raise ValueError("recording failed")

    with pytest.raises(RuntimeError, match="the build failed"):
        early.while_building(failing_build, failing_meanwhile)
    with pytest.raises(ValueError, match="recording failed"):
        early.while_building(lambda: "library", failing_meanwhile)
