"""Lowered XNNPACK subgraphs (linear + activation, conv + batch norm + pooling,
attention) run directly with etops.delegate.load: within tolerance of ATen, and bit
for bit what the program's .pte computes through executorch.runtime."""

from __future__ import annotations

import pytest
import torch
import torch.utils._pytree as pytree

from delegate_helpers import Attention, ConvBnPool, LinearRelu, XnnpackLowered, bit_identical, trained_batch_norm

import etops

MODELS = {
    "linear_relu": lambda: (LinearRelu(), (torch.randn(4, 16),)),
    "conv_bn_pool": lambda: (trained_batch_norm(ConvBnPool()), (torch.randn(2, 3, 8, 8),)),
    "attention": lambda: (Attention(), (torch.randn(2, 5, 16),)),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def lowered(request):
    torch.manual_seed(0)
    model, inputs = MODELS[request.param]()
    return XnnpackLowered(model, inputs)


def outputs_of(result) -> list:
    return [result] if isinstance(result, torch.Tensor) else list(result)


def test_every_model_is_one_xnnpack_delegate(lowered):
    assert [lw.backend_id for _, lw, _ in lowered.calls] == ["XnnpackBackend"]
    assert etops.delegate.lowered_modules(lowered.edge) == [lw for _, lw, _ in lowered.calls]


def test_direct_run_matches_aten(lowered):
    for attr, lw, node in lowered.calls:
        run = etops.delegate.load(lw, name=attr)
        inputs = lowered.call_inputs[node.name]
        got = outputs_of(run(*inputs))
        expected = run._info.reference(*inputs)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)


def test_direct_run_matches_pte_bit_for_bit(lowered):
    ((attr, lw, node),) = lowered.calls
    got = outputs_of(etops.delegate.load(lw, name=attr)(*lowered.call_inputs[node.name]))
    assert all(bit_identical(g, p) for g, p in zip(got, lowered.pte_outputs))
    for g, e in zip(got, lowered.eager_outputs):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)


def test_given_outs_are_written_and_returned(lowered):
    attr, lw, node = lowered.calls[0]
    run = etops.delegate.load(lw, name=attr)
    inputs = lowered.call_inputs[node.name]
    expected = outputs_of(run(*inputs))
    outs = {spec.name: torch.full_like(e, float("nan")) for spec, e in zip(run._info.outputs, expected)}
    got = outputs_of(run(*inputs, **outs))
    assert all(g is outs[spec.name] for g, spec in zip(got, run._info.outputs))
    assert all(bit_identical(g, e) for g, e in zip(got, expected))


def test_empty_out_is_resized_as_torch_does(lowered):
    attr, lw, node = lowered.calls[0]
    run = etops.delegate.load(lw, name=attr)
    inputs = lowered.call_inputs[node.name]
    expected = outputs_of(run(*inputs))
    if len(expected) != 1:
        pytest.skip("one-output delegates only")
    out = torch.empty(0)
    assert run(*inputs, out=out) is out
    assert bit_identical(out, expected[0])


def test_inputs_are_not_written(lowered):
    attr, lw, node = lowered.calls[0]
    inputs = lowered.call_inputs[node.name]
    before = [t.clone() for t in inputs]
    etops.delegate.load(lw, name=attr)(*inputs)
    assert all(torch.equal(a, b) for a, b in zip(inputs, before))


def test_describes_itself(lowered):
    attr, lw, node = lowered.calls[0]
    run = etops.delegate.load(lw, name=attr)
    text = repr(run)
    assert f"XnnpackBackend::{attr}" in text and "ops inside:" in text
    assert str(run._schema).startswith(f"XnnpackBackend::{attr}(")
    assert run._info.ops and all("." in op for op in run._info.ops)
    assert [s.name for s in run._info.inputs] == [p for p in lw.original_module.graph_signature.user_inputs]


def test_loaded_is_initialised_once_per_lowered_module(lowered):
    _, lw, _ = lowered.calls[0]
    assert etops.delegate.loaded(lw) is etops.delegate.loaded(lw)


def test_dynamic_batch_sizes_outputs_from_the_inputs():
    torch.manual_seed(0)
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    model = LinearRelu().eval()
    batch = torch.export.Dim("batch", min=1, max=8)
    edge = to_edge_transform_and_lower(
        torch.export.export(model, (torch.randn(4, 16),), dynamic_shapes=({0: batch},)), partitioner=[XnnpackPartitioner()]
    )
    (lw,) = etops.delegate.lowered_modules(edge)
    run = etops.delegate.load(lw)
    for n in (1, 5, 8):  # 1 too, as the .pte takes it (torch.export's range starts at 2)
        x = torch.randn(n, 16)
        y = run(x)
        assert y.shape == (n, 8)
        torch.testing.assert_close(y, model(x).detach(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"argument 'x' dim 0 is 9; the delegate takes .* in \[1, 8\]"):
        run(torch.randn(9, 16))


def test_lowered_modules_takes_every_program_kind(lowered):
    expected = [lw for _, lw, _ in lowered.calls]
    ep = lowered.edge.exported_program()
    assert etops.delegate.lowered_modules(ep) == expected
    assert etops.delegate.lowered_modules(ep.graph_module) == expected
    with pytest.raises(TypeError, match="program must be"):
        etops.delegate.lowered_modules(object())
    assert pytree.tree_leaves(lowered.inputs)  # the fixture's inputs stay usable
