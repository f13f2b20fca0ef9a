"""Guarded calls (etops.guard.call) name the argument, the direction and the
distance of every out-of-bounds access, however far it reaches (issue 38): one
kernel of our own reads or writes `at` elements past the end (at > 0: element
numel - 1 + at) or before the start (at < 0: element at) of its input `x`, of
the list item `xs[1]`, or of its out, for 1, 16, 1,024 and 100,000 elements (on
inputs of 10 elements, and of 1,000 alike); farther than the default guard regions reach
(30 million floats) an attribution run places it."""

from __future__ import annotations

import pytest
import torch
from custom_helpers import cache  # noqa: F401

import etops

SOURCE = r"""
Tensor& reach_out(KernelRuntimeContext& ctx, const Tensor& x, TensorList xs, int64_t at, int64_t target,
                  int64_t write, Tensor& out) {
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < out.numel(); i++) o[i] = x.const_data_ptr<float>()[i];
  const Tensor& t = target == 0 ? x : (target == 1 ? xs[1] : out);
  float* p = const_cast<float*>(t.const_data_ptr<float>());
  volatile float* at_p = p + (at < 0 ? at : t.numel() - 1 + at);
  if (write) *at_p = 7.0f; else o[0] = *at_p;
  return out;
}
"""
SCHEMA = "reach.out(Tensor x, Tensor[] xs, int at, int target, int write, *, Tensor(a!) out) -> Tensor(a!)"
TARGETS = {"x": 0, "xs[1]": 1, "out": 2}
_KERNEL: list = []


def _kernel():
    if not _KERNEL:
        _KERNEL.append(etops.register_kernel("gtest::reach.out", SOURCE, schema=SCHEMA).kernel)
    return _KERNEL[0]


def _crash(n: int, at: int, argument: str, access: str) -> etops.KernelCrashed:
    x, xs, out = torch.ones(n), [torch.ones(n), torch.ones(n)], torch.zeros(n)
    with pytest.raises(etops.KernelCrashed) as caught:
        etops.guard.call(_kernel(), x, xs, at, TARGETS[argument], int(access == "write"), out=out)
    return caught.value


def _expected(at: int) -> tuple[str, int]:
    """Where element `at` (as the kernel indexes it) lies and how many bytes beyond:
    0 for the first byte outside on either side."""
    return ("past the end", 4 * (at - 1)) if at > 0 else ("before the start", 4 * -at - 1)


@pytest.mark.parametrize("access", ["read", "write"])
@pytest.mark.parametrize("argument", list(TARGETS))
@pytest.mark.parametrize("at", [1, 16, 1024, 100000, -1, -16, -1024, -100000])
def test_every_access_outside_an_argument_is_named(cache, access, argument, at):
    _check(10, at, argument, access)


@pytest.mark.parametrize("at", [1024, -1024, -100000])
def test_a_larger_input_alike(cache, at):
    _check(1000, at, "x", "read")


def _check(n: int, at: int, argument: str, access: str) -> None:
    err = _crash(n, at, argument, access)
    where, offset = _expected(at)
    assert (err.signal, err.argument, err.access, err.where, err.offset) == ("SIGSEGV", argument, access, where, offset), str(err)
    beyond = "its first byte beyond it" if offset == 0 else f"{offset} bytes beyond it"
    assert f"{access} {where} of argument '{argument}' ({beyond})" in str(err)


@pytest.mark.parametrize("argument", ["xs[1]", "out"])
def test_an_access_beyond_the_default_guard_regions_is_placed_by_an_attribution_run(cache, monkeypatch, argument):
    """3 MB before the start: past the argument's own guard region (a mebibyte), into
    another buffer's or none; the attribution run's regions reach it. (Farther, an
    access can land in memory mapped for something else and fault nowhere.)"""
    from etops.guard import server

    reaches = []
    run = server.run
    monkeypatch.setattr(server, "run", lambda kernel, info, bound, reach=None: reaches.append(reach) or run(kernel, info, bound, reach))
    err = _crash(10, -750_000, argument, "write")
    assert (err.argument, err.access, err.where, err.offset) == (argument, "write", "before the start", 2_999_999), str(err)
    assert len(reaches) == 2 and reaches[0] is None and reaches[1] > 3_000_000, reaches  # one attribution run
    assert etops.guard.guard_pid() is None  # the attribution run's guard process died too


def test_a_clean_call_of_the_kernel_is_unchanged_guarded(cache):
    """at = 0 reads the last element of `xs[1]`: inside, no fault."""
    out = etops.guard.call(_kernel(), torch.arange(4.0), [torch.ones(4), torch.full((4,), 5.0)], 0, 1, 0, out=torch.zeros(4))
    assert out.tolist() == [5.0, 1.0, 2.0, 3.0]
