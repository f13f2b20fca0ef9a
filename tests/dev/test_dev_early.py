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
