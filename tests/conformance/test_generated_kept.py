"""etops.conformance.generated.kept: a generated task's cases made once and kept
(prepare), answered from there as copies a kernel may write, the same cases
case_of makes from their keys; a kernel whose cases nobody keeps is made as before."""

from __future__ import annotations

import pytest
import torch

from etops.conformance.generated import cases, kept

KERNEL = "aten::add.out"


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(kept, "_KEPT", {})
    monkeypatch.setattr(kept, "_CHANGED", set())


def _same(a: cases.Case, b: cases.Case) -> bool:
    def eq(x, y):
        if isinstance(x, torch.Tensor):
            return isinstance(y, torch.Tensor) and x.dtype == y.dtype and x.stride() == y.stride() and \
                bytes(x.untyped_storage()) == bytes(y.untyped_storage())
        if isinstance(x, (list, tuple)):
            return type(x) is type(y) and len(x) == len(y) and all(eq(p, q) for p, q in zip(x, y))
        return x == y

    return (a.key, a.func, a.valid, a.why) == (b.key, b.func, b.valid, b.why) and eq(a.args, b.args) and \
        eq(sorted(a.kwargs.items()), sorted(b.kwargs.items()))


def test_a_prepared_task_is_made_once_and_answers_with_copies(monkeypatch):
    rows = cases.plan(KERNEL).rows_of("float32")
    made = []
    real = kept.made_case
    monkeypatch.setattr(kept, "made_case", lambda key: made.append(key) or real(key))
    assert kept.prepare(KERNEL, "float32") == len(rows) > 0
    assert kept.prepare(KERNEL, "float32") == 0 and kept.changed() == {KERNEL} and kept.changed() == set()
    key = cases.case_key(KERNEL, rows[0])
    first = kept.case_of(key)
    assert _same(first, real(key)), "the kept case is the one its key makes"
    tensors = [a for a in first.args if isinstance(a, torch.Tensor)]
    tensors[0].fill_(123)  # a kernel writing its input writes its own copy
    assert _same(kept.case_of(key), real(key))
    assert len(made) == len(rows)


def test_kept_cases_come_back_from_another_process_and_other_kernels_are_made_each_time(monkeypatch):
    kept.prepare(KERNEL, "float32")
    handed = kept.of_kernel(KERNEL)
    monkeypatch.setattr(kept, "_KEPT", {})
    made = []
    real = kept.made_case
    monkeypatch.setattr(kept, "made_case", lambda key: made.append(key) or real(key))
    kept.keep(KERNEL, {**handed, "aten::mul.out|x": "not a case"})
    assert kept.prepare(KERNEL, "float32") == 0 and not made
    assert set(kept.of_kernel(KERNEL)) == set(handed)
    other = cases.case_key("aten::mul.out", cases.plan("aten::mul.out").rows_of("float32")[0])
    kept.case_of(other), kept.case_of(other)
    assert made == [other, other] and not kept.kept("aten::mul.out")
