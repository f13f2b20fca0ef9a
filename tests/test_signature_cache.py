"""etops.signature_cache: torch's answers about a call (out shapes, torch's checks)
kept per operator and argument signature, whichever kernel object asks, and handed
back by a forked process to the one that forked it."""

from __future__ import annotations

import pytest
import torch

from etops import out_shapes, signature_cache, torch_checks
from etops.dev.background import Background
from etops.kernel import KernelInfo


def _another_info(info):
    """A second KernelInfo of the same operator (as an edit swapped in gets)."""
    return KernelInfo(info.name, info._schema, info.schema_source, info._plan, info._plan_error)


def test_every_kernel_object_of_an_operator_shares_torchs_out_shapes(reg, monkeypatch):
    info = reg.aten.mul.out._info
    worked_out = []
    real = out_shapes._infer_outs_uncached
    monkeypatch.setattr(out_shapes, "_infer_outs_uncached", lambda i, b: worked_out.append(i) or real(i, b))
    bound = {"self": torch.ones(3, 17, 2), "other": torch.ones(17, 1)}
    first = out_shapes.infer_outs(info, bound)
    again = out_shapes.infer_outs(_another_info(info), {k: v.clone() for k, v in bound.items()})
    assert again == first and len(worked_out) <= 1  # none when an earlier test asked already
    assert first["out"][0] == (3, 17, 2)


def test_torchs_checks_are_kept_for_calls_it_accepts_and_refuses(reg, monkeypatch):
    """A refusal is kept too (a meta kernel sees the signature, never a tensor's
    values): asked once, then made again from the cache, the same exception in the
    same words naming the same argument, for every kernel object of the operator.
    Before, every refused call asked torch's meta kernel again (in a new process of
    etops dev, the first such call imports torch._dynamo: seconds inside a case's limit)."""
    info = reg.aten.mul.out._info
    asked = []
    real = torch_checks.check_with_torch
    monkeypatch.setattr(torch_checks, "check_with_torch", lambda *a: asked.append(a[2]) or real(*a))
    good = {"self": torch.ones(5, 13, 3), "other": torch.ones(3), "out": torch.empty(5, 13, 3)}
    info.validate(good)
    _another_info(info).validate({k: v.clone() for k, v in good.items()})
    assert len(asked) <= 1
    bad = {"self": torch.ones(5, 13, 3), "other": torch.ones(4), "out": torch.empty(5, 13, 3)}
    refusals = []
    for validate in (info.validate, _another_info(info).validate, info.validate):
        with pytest.raises(ValueError, match="torch refuses") as caught:
            validate({k: v.clone() for k, v in bad.items()})
        refusals.append((type(caught.value), str(caught.value), getattr(caught.value, "argument", None)))
    assert refusals[0] == refusals[1] == refusals[2]
    assert sum(a["other"].shape == (4,) for a in asked) == 1


def test_torchs_refused_out_shapes_are_kept_and_raised_again_alike(reg, monkeypatch):
    """An allocating call torch's meta kernel refuses (shapes that do not broadcast)
    is refused from the cache the next time, the same exception in the same words."""
    info = reg.aten.add.out._info
    worked_out = []
    real = out_shapes._infer_outs_uncached
    monkeypatch.setattr(out_shapes, "_infer_outs_uncached", lambda i, b: worked_out.append(i) or real(i, b))
    bound = {"self": torch.ones(7), "other": torch.ones(8, dtype=torch.float64), "alpha": 1}
    refusals = []
    for _ in range(2):
        with pytest.raises((TypeError, ValueError)) as caught:
            out_shapes.infer_outs(_another_info(info), dict(bound))
        refusals.append((type(caught.value), str(caught.value), getattr(caught.value, "argument", None)))
    assert refusals[0] == refusals[1] and "torch refuses" in refusals[0][1]
    assert len(worked_out) <= 1


def test_entries_made_in_a_forked_process_come_back_and_are_taken_once():
    cache = signature_cache.SignatureCache("test handed back", 8)

    def in_the_fork():
        signature_cache.made_here()  # what the fork inherited is not its own
        cache.put(("op", 1), {"out": ((2,), torch.float32, None)})
        cache.put(("op", 2), {"out": ((3,), torch.int64, None)})
        return signature_cache.made_here(), signature_cache.made_here()

    made, then = Background(in_the_fork).result()
    assert then == {} and made == {"test handed back": {("op", 1): {"out": ((2,), torch.float32, None)},
                                                         ("op", 2): {"out": ((3,), torch.int64, None)}}}
    assert cache.get(("op", 1)) is None
    signature_cache.keep(made)
    assert cache.get(("op", 2)) == {"out": ((3,), torch.int64, None)}
    assert "test handed back" not in signature_cache.made_here()  # kept, not made here
    for i in range(20):  # a full cache is emptied, never grows past its limit
        cache.put(("more", i), i)
    assert len(cache._entries) <= cache.limit


def test_a_signature_tells_tensors_by_shape_strides_and_dtype_and_numbers_by_type():
    sig = signature_cache.signature
    assert sig(torch.ones(2, 3)) == sig(torch.zeros(2, 3))
    assert sig(torch.ones(2, 3)) != sig(torch.ones(3, 2).t())
    assert sig(torch.ones(2, 3)) != sig(torch.ones(2, 3, dtype=torch.float64))
    assert len({sig(2), sig(2.0), sig(True)}) == 3
    with pytest.raises(TypeError):
        sig({"a": 1})
