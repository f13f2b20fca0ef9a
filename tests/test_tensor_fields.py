"""What torch keeps on a tensor and DLPack does not carry, honoured on every call path
(issue 51; _native/tensor_fields.c): lazy negative and conjugate bits resolved for
inputs and outs (fresh kernels, steady calls of the memo), the version counter of
every written tensor bumped as torch's out= does (autograd then refuses a backward
over overwritten data), and inference tensors refused as outs outside inference
mode. Swept over every registered aten kernel that takes a simple call
(simple_calls.py), and again with the fields off (torch's getters answer)."""

from __future__ import annotations

import warnings

import pytest
import torch

import etops
from etops import _native
from simple_calls import flat, same_results, simple_calls

#: kernels the sweeps must reach (141 take a simple call with this wheel, 140 of them with outs)
ENOUGH_KERNELS = 135


def _negated(t: torch.Tensor) -> torch.Tensor:
    """t's values, held negated in memory with torch's lazy negative bit."""
    return torch._neg_view(-t) if t.dtype != torch.bool else t


@pytest.fixture(params=["fields", "torch getters"])
def fields(request):
    """Each test twice: with the fields read from torch's structures (the fast path)
    and with them off (torch's Python getters answer every question)."""
    if request.param == "torch getters":
        x = torch.ones(2)
        assert not _native.calibrate_tensor_fields({  # pairs that differ in no bit: no layout fits
            "plain": [x], "neg": [(x, x)], "conj": [(x, x)], "views": [], "inference": [], "check": [], "fresh": x,
            "increment_version": torch.autograd.graph.increment_version,
            "is_inference_mode_enabled": torch.is_inference_mode_enabled})
    try:
        yield request.param
    finally:
        assert etops._calibrate_tensor_fields()


def test_the_fields_are_found_in_this_torch():
    """The fast path is on with the installed torch (a torch whose layout does not fit
    turns it off, and torch's getters answer: the `fields` fixture's second case)."""
    assert etops._calibrate_tensor_fields()


def test_every_kernel_reads_negative_views_resolved(fields):
    calls = simple_calls()
    assert len(calls) >= ENOUGH_KERNELS
    wrong = [c.name for c in calls if not same_results(c.kernel(**c.with_tensors(_negated)), c.results)]
    assert wrong == []


def test_every_kernel_writes_negative_view_outs_as_torch_sees_them(fields):
    checked, wrong = 0, []
    for c in simple_calls():
        outs = c.make_outs(lambda r: _negated(torch.zeros_like(r)))
        if outs is None:
            continue
        c.kernel(**c.kwargs, **outs)
        checked += 1
        if not same_results(flat(outs), c.results):
            wrong.append(c.name)
    assert checked >= ENOUGH_KERNELS and wrong == []


def test_conjugate_views_are_resolved_for_inputs_and_outs(reg, fields):
    c = torch.randn(2, 3, dtype=torch.complex64)
    want = c.conj().resolve_conj() + c
    assert torch.equal(reg.aten.add.out(c.conj(), c, out=torch.empty_like(c)), want)
    out = torch.zeros_like(c).conj()  # written through its conjugate bit
    reg.aten.add.out(c.conj(), c, out=out)
    assert torch.equal(out.resolve_conj(), want)


@pytest.mark.parametrize("where", ["input", "out"])
def test_the_memo_never_lets_a_lazy_tensor_ride_a_steady_call(reg, fields, where):
    """Three steady calls remember the signature (kernel_memo.c); the same call with a
    negative view matches it field by field but for the bit: the full path resolves it."""
    op = reg.aten.add.out
    x, out = torch.randn(2, 3), torch.empty(2, 3)
    for _ in range(3):
        op(x, x, out=out)
    if where == "input":
        assert torch.equal(op(_negated(x), x, out=out), 2 * x)
    else:
        lazy_out = _negated(torch.zeros(2, 3))
        op(x, x, out=lazy_out)
        assert torch.equal(lazy_out.resolve_neg(), 2 * x)
    assert torch.equal(op(x, x, out=out), 2 * x)  # and the steady call after it


def test_every_kernel_bumps_the_version_of_its_outs(fields):
    checked, missed = 0, []
    for c in simple_calls():
        outs = c.make_outs(torch.empty_like)
        if outs is None:
            continue
        before = [o._version for o in flat(outs)]
        c.kernel(**c.kwargs, **outs)
        checked += 1
        if any(o._version <= v for o, v in zip(flat(outs), before)):
            missed.append(c.name)
    assert checked >= ENOUGH_KERNELS and missed == []


def test_steady_calls_bump_the_version_every_call(reg, fields):
    x, out = torch.randn(3), torch.empty(3)
    for n in range(1, 6):  # the memo's calls from the fourth on
        reg.aten.add.out(x, x, out=out)
        assert out._version == n


def test_more_written_tensors_than_the_call_remembers_are_all_bumped(reg, fields):
    """Past the versions one call keeps (40), every written tensor is bumped through torch."""
    outs = [torch.empty(1) for _ in range(50)]
    reg.aten.split_copy.Tensor_out(torch.randn(50), 1, out=outs)
    assert [o._version for o in outs] == [1] * 50


def test_mutated_inputs_and_list_outs_are_bumped(reg, fields):
    x = torch.randn(4, 2)
    a, b = torch.empty(2, 2), torch.empty(2, 2)
    reg.aten.split_copy.Tensor_out(x, 2, 0, out=[a, b])
    assert a._version >= 1 and b._version >= 1
    target = torch.zeros(3)  # a mutated input (copy_'s self)
    reg.aten.copy_(target, torch.ones(3))
    assert target._version == 1 and torch.equal(target, torch.ones(3))


@pytest.mark.parametrize("steady", [False, True])
def test_a_backward_over_an_overwritten_input_raises_as_torch(reg, fields, steady):
    """w * x saves x; an out= write into x makes autograd refuse the backward (torch's
    out= does the same), instead of a gradient computed from the new values."""
    op = reg.aten.add.out
    ones = torch.ones(3)
    if steady:
        for _ in range(3):
            op(ones, ones, out=torch.empty(3))
    for write in (lambda x: torch.add(ones, ones, out=x), lambda x: op(ones, ones, out=x)):
        w, x = torch.ones(3, requires_grad=True), torch.arange(3.0)
        y = (w * x).sum()
        write(x)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()


def test_every_kernel_refuses_an_inference_out_outside_inference_mode(fields):
    checked, accepted = 0, []
    for c in simple_calls():
        with torch.inference_mode():
            outs = c.make_outs(torch.zeros_like)
        if outs is None:
            continue
        try:
            c.kernel(**c.kwargs, **outs)
            accepted.append(c.name)
        except ValueError as exc:
            assert f"argument '{c.outs[0]}" in str(exc) and "is an inference tensor" in str(exc), exc
        assert all(torch.count_nonzero(o) == 0 for o in flat(outs))  # refused before the kernel ran
        with torch.inference_mode():  # where torch takes it
            c.kernel(**c.kwargs, **outs)
        assert same_results(flat(outs), c.results)
        checked += 1
    assert checked >= ENOUGH_KERNELS and accepted == []


def test_an_inference_out_is_refused_on_the_memo_path_too(reg, fields):
    x = torch.randn(3)
    for _ in range(3):
        reg.aten.add.out(x, x, out=torch.empty(3))
    with torch.inference_mode():
        out = torch.empty(3)
    with pytest.raises(ValueError, match="argument 'out' is an inference tensor"):
        reg.aten.add.out(x, x, out=out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch.inference_mode():
            assert torch.equal(reg.aten.add.out(x, x, out=out), 2 * x)


def test_negative_view_indices_after_steady_calls_are_the_indices_torch_sees(reg, fields):
    """Issue 51's heap corruption: after three steady calls, indices given as a
    negative view (memory holding -i) reached the kernel as they lie in memory."""
    x = torch.randn(1, 1, 4, 4)
    out, indices = torch.ops.aten.max_pool2d_with_indices(x, [2, 2])
    grad = torch.randn_like(out)
    op = reg.aten.max_pool2d_with_indices_backward.grad_input
    grad_input = torch.empty_like(x)
    for given in (indices, indices, indices, _negated(indices)):
        grad_input.zero_()  # the kernel adds into it
        op(grad, x, [2, 2], [2, 2], [0, 0], [1, 1], False, given, grad_input=grad_input)
        assert torch.equal(grad_input, torch.ops.aten.max_pool2d_with_indices_backward(
            grad, x, [2, 2], [2, 2], [0, 0], [1, 1], False, indices))
