"""Hypothesis over a delegate's call path (the fuzz of `make test` covers kernels):
any inputs and outs a user can pass to an XNNPACK delegate give its result or a
TypeError / ValueError / etops error naming the delegate and the argument; inputs
are never written; an error raised before the backend runs leaves the outs as they
were; the interpreter survives."""

from __future__ import annotations

import warnings

import pytest
import torch

from delegate_helpers import ConvBnPool, XnnpackLowered, trained_batch_norm

import etops

hypothesis = pytest.importorskip("hypothesis")
st = pytest.importorskip("hypothesis.strategies")

DTYPES = [torch.float32, torch.float32, torch.float16, torch.float64, torch.int32, torch.int8, torch.bool, torch.bfloat16]
LAYOUTS = ["contiguous", "contiguous", "channels_last", "strided", "transposed", "expanded", "numpy"]


@pytest.fixture(scope="module")
def conv():
    torch.manual_seed(0)
    lowered = XnnpackLowered(trained_batch_norm(ConvBnPool()), (torch.randn(1, 3, 8, 8),))
    attr, lw, node = lowered.calls[0]
    return etops.delegate.load(lw, name=attr), lowered.call_inputs[node.name][0]


@st.composite
def tensors(draw, near):
    """Tensors around `near`'s shape: right, wrong rank, wrong sizes, zero sizes;
    every dtype; dense, channels-last, strided, transposed, expanded, numpy."""
    shape = list(near)
    kind = draw(st.sampled_from(["same", "same", "resized", "rank", "zero"]))
    if kind == "resized":
        shape = [draw(st.sampled_from([1, 2, 3, 8, 16])) for _ in shape]
    elif kind == "rank":
        shape = [draw(st.sampled_from([1, 2, 8])) for _ in range(draw(st.integers(0, 6)))]
    elif kind == "zero" and shape:
        shape[draw(st.integers(0, len(shape) - 1))] = 0
    dtype = draw(st.sampled_from(DTYPES))
    layout = draw(st.sampled_from(LAYOUTS))
    t = (torch.rand(shape) * 4 - 2).to(dtype)
    if layout == "channels_last" and t.dim() == 4:
        t = t.contiguous(memory_format=torch.channels_last)
    elif layout == "strided" and t.dim() >= 1:
        wide = torch.zeros([2 * s for s in shape], dtype=dtype)
        t = wide[tuple(slice(None, None, 2) for _ in shape)]
    elif layout == "transposed" and t.dim() >= 2:
        t = t.transpose(0, 1)
    elif layout == "expanded" and t.dim() >= 1:
        t = t.flatten()[:1].reshape([1] * t.dim()).expand(shape) if t.numel() else t
    elif layout == "numpy" and dtype not in (torch.bfloat16,):
        t = t.numpy()
    return t


def snapshot(x):
    if isinstance(x, torch.Tensor):
        return x.clone(), tuple(x.shape)
    return x.copy(), x.shape


def unchanged(x, snap):
    before, shape = snap
    if isinstance(x, torch.Tensor):
        return tuple(x.shape) == shape and torch.equal(x, before)
    return x.shape == shape and (x == before).all()


@hypothesis.settings(max_examples=300, deadline=None, suppress_health_check=list(hypothesis.HealthCheck), derandomize=True)
@hypothesis.given(data=st.data())
def test_any_call_gives_the_result_or_a_clear_error(conv, data):
    run, good = conv
    expected = run._info.reference(good)[0]
    args = [data.draw(tensors(tuple(good.shape)), label="x")]
    if data.draw(st.integers(0, 9), label="extra") == 0:
        args.append(data.draw(tensors(tuple(good.shape)), label="extra input"))
    kwargs = {}
    which = data.draw(st.sampled_from(["none", "out", "out", "alias"]), label="out kind")
    if which == "out":
        kwargs["out"] = data.draw(tensors(tuple(expected.shape)), label="out")
    elif which == "alias":
        kwargs["out"] = args[0]
    inputs_before = [snapshot(a) for a in args]
    out_before = snapshot(kwargs["out"]) if "out" in kwargs and kwargs["out"] is not args[0] else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = run(*args, **kwargs)
    except (TypeError, ValueError, etops.EtopsError) as exc:
        message = str(exc)
        assert run._info.name in message, message
        assert "'x'" in message or "'out'" in message or "positional" in message, message
        if out_before is not None and not isinstance(exc, etops.KernelError):
            assert unchanged(kwargs["out"], out_before), f"an error before the backend ran changed the out: {message}"
    else:
        assert which != "alias", "an out aliasing the input was taken"
        x = torch.as_tensor(inputs_before[0][0])
        torch.testing.assert_close(torch.as_tensor(result), run._info.reference(x.contiguous())[0], rtol=1e-4, atol=1e-4)
        if "out" in kwargs:
            assert result is kwargs["out"]
    for a, snap in zip(args, inputs_before):
        if a is not kwargs.get("out"):
            assert unchanged(a, snap), "an input was written"
