"""The torch side and exported programs: custom_op through torch.export -> to_edge ->
to_executorch -> .pte -> executorch.runtime; overrides seen by programs loaded
afterwards (not by one loaded before); a Python kernel called from a .pte."""

from __future__ import annotations

import pytest
import torch
from custom_helpers import INSTRUMENTED_ADD, cache, export_to_pte, run_pte, scaled_add  # noqa: F401

import etops


class ScaledAddModel(torch.nn.Module):
    def forward(self, x, y):
        return torch.ops.mylib.scaled_add(torch.relu(x), y, 0.5) * 2


class AddModel(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def test_custom_op_eager(scaled_add):
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    want = a + 0.5 * b
    c = torch.empty(3, 4)
    scaled_add.out(a, b, 0.5, out=c)
    torch.testing.assert_close(c, want)
    torch.testing.assert_close(torch.ops.mylib.scaled_add(a, b, 0.5), want)
    torch.testing.assert_close(scaled_add(a, b, 0.5), want)
    torch.testing.assert_close(torch.ops.mylib.scaled_add.out(a, b, 0.5, out=torch.empty(3, 4)), want)
    # fake implementation: shapes without running anything
    with torch._subclasses.fake_tensor.FakeTensorMode():
        fake = torch.ops.mylib.scaled_add(torch.empty(5, 2), torch.empty(5, 2), 1.0)
    assert fake.shape == (5, 2)
    assert str(etops.registry().mylib.scaled_add.out._schema) == (
        "mylib::scaled_add.out(Tensor a, Tensor b, float alpha, *, Tensor(a!) out) -> Tensor(a!)"
    )


def test_custom_op_end_to_end_pte(scaled_add, export_to_pte, run_pte):
    inputs = (torch.randn(2, 3), torch.randn(2, 3))
    pte = export_to_pte(ScaledAddModel(), inputs)
    got = run_pte(pte).execute(list(inputs))[0]
    torch.testing.assert_close(got, (torch.relu(inputs[0]) + 0.5 * inputs[1]) * 2)


def test_override_seen_by_pte_loaded_afterwards(cache, export_to_pte, run_pte):
    a, b = torch.ones(3), torch.full((3,), 2.0)
    pte = export_to_pte(AddModel(), (a, b))
    before = run_pte(pte)  # loaded before the override: keeps the built-in kernel
    schema = str(etops.registry().aten.add.out._schema)
    with etops.override("aten::add.out", INSTRUMENTED_ADD, schema=schema) as ov:
        after = run_pte(pte)
        assert after.execute([a, b])[0].tolist() == [103.0] * 3
        assert before.execute([a, b])[0].tolist() == [3.0] * 3
        assert etops.registry().aten.add.out(a, b, out=torch.empty(3)).tolist() == [103.0] * 3
        assert ov.origin["kind"] == "custom"
    # restored: a program loaded now runs the built-in again
    assert run_pte(pte).execute([a, b])[0].tolist() == [3.0] * 3
    assert etops.registry().aten.add.out(a, b, out=torch.empty(3)).tolist() == [3.0] * 3


def test_python_kernel_called_from_pte(cache, export_to_pte, run_pte):
    seen = []

    def clamp_square(x, lo, out):
        seen.append((tuple(x.shape), x.dtype, lo))
        return torch.clamp(x, min=lo) ** 2

    op = etops.custom_op("pyk::clamp_square(Tensor x, float lo) -> Tensor", python=clamp_square)
    assert op.handle.origin["kind"] == "python"

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.pyk.clamp_square(x + 1, 0.5)

    x = torch.randn(4, 3)
    pte = export_to_pte(M(), (x,))
    seen.clear()
    got = run_pte(pte).execute([x])[0]
    torch.testing.assert_close(got, torch.clamp(x + 1, min=0.5) ** 2)
    assert seen == [((4, 3), torch.float32, 0.5)]  # the .pte called back into Python


def test_python_kernel_errors_and_scalar_returns(cache):
    def fails(x, out):
        raise ValueError("bad input")

    h = etops.register_python_kernel("pyk::fails.out", fails, "fails.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    with pytest.raises(etops.KernelError, match="ValueError: bad input") as info:
        h(torch.ones(2), out=torch.empty(2))
    assert info.value.error_name == "Internal"
    h.deregister()

    s = etops.register_python_kernel("pyk::numel", lambda x: x.numel() * 2, "numel(Tensor x) -> int")
    assert s(torch.ones(3, 2)) == 12
    s.deregister()

    # zero-copy: the function sees the caller's memory
    def inplace(x, out):
        out.fill_(x.data_ptr() == ptr)

    ptr = None
    v = etops.register_python_kernel("pyk::same.out", inplace, "same.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    x = torch.ones(5)
    ptr = x.data_ptr()
    assert v(x, out=torch.zeros(5)).tolist() == [1.0] * 5
    v.deregister()


def test_replacing_the_kernel_of_a_custom_op(cache, export_to_pte, run_pte):
    src = "Tensor& k_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) { for (ssize_t i = 0; i < x.numel(); i++) out.mutable_data_ptr<float>()[i] = SCALE * x.const_data_ptr<float>()[i]; return out; }"
    op = etops.custom_op("loop::k(Tensor x) -> Tensor", src.replace("SCALE", "2.0f"))

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.loop.k(x)

    x = torch.arange(3.0)
    pte = export_to_pte(M(), (x,))
    assert run_pte(pte).execute([x])[0].tolist() == [0.0, 2.0, 4.0]
    op2 = etops.custom_op("loop::k(Tensor x) -> Tensor", src.replace("SCALE", "5.0f"))
    assert op2.handle.index == op.handle.index  # same registry slot
    assert run_pte(pte).execute([x])[0].tolist() == [0.0, 5.0, 10.0]
    assert torch.ops.loop.k(x).tolist() == [0.0, 5.0, 10.0]


def test_custom_op_with_shape_function(cache):
    src = r"""
Tensor& rowsum_out(KernelRuntimeContext& ctx, const Tensor& x, Tensor& out) {
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < x.size(0); i++) {
    o[i] = 0;
    for (ssize_t j = 0; j < x.size(1); j++) o[i] += in[i * x.size(1) + j];
  }
  return out;
}
"""
    op = etops.custom_op("shapes::rowsum(Tensor x) -> Tensor", src, shape=lambda x: (x.shape[0],))
    x = torch.randn(4, 3)
    torch.testing.assert_close(torch.ops.shapes.rowsum(x), x.sum(1))
    torch.testing.assert_close(op.out(x), x.sum(1))  # out allocated from torch's functional op
