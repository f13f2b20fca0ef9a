"""Kernel selection is ExecuTorch's own (key from dtypes and dim orders; exact,
then fallback); `explain` says which kernel runs and why; keys decode."""

from __future__ import annotations

import pytest
import torch

import etops
from etops import _native
from etops.kernel import decode_key


def test_decode_key():
    assert decode_key("v1/6;0,1|4;0") == (("float32", (0, 1)), ("int64", (0,)))
    assert decode_key(None) is None
    assert decode_key("v1/6;0,2,3,1") == (("float32", (0, 2, 3, 1)),)
    assert decode_key("v1/11;|3;0") == (("bool", ()), ("int32", (0,)))


def test_make_key_matches_decode():
    key = _native.make_key([(6, (0, 1)), (4, (0,))])
    assert key == "v1/6;0,1|4;0"
    assert decode_key(key) == (("float32", (0, 1)), ("int64", (0,)))


def test_explain_names_key_and_fallback(reg):
    a, b = torch.ones(2, 3), torch.ones(2, 3)
    text = reg.aten.add.out.explain(a, b, out=torch.empty(2, 3))
    assert "aten::add.out" in text
    assert "v1/6;0,1|6;0,1|6;0,1" in text
    assert "fallback" in text
    assert "self: float32" in text and "out: float32" in text
    assert "libexecutorch_kernels_optimized.so" in text


def test_explain_reflects_dtypes_and_dim_order(reg):
    x = torch.ones(1, 2, 3, 3, dtype=torch.float64).to(memory_format=torch.channels_last)
    text = reg.aten.add.out.explain(x, x, out=torch.empty_like(x))
    assert "7;0,2,3,1" in text
    assert "float64" in text
    i = torch.ones(3, dtype=torch.int32)
    assert "3;0" in reg.aten.add.out.explain(i, i)


def test_explain_without_outs(reg):
    text = reg.aten.add.out.explain(torch.ones(2), torch.ones(2))
    assert "fallback" in text and "6;0" in text


def test_explain_optional_and_list_tensors(reg):
    text = reg.aten.native_layer_norm.out.explain(torch.ones(2, 3), [3], None, None, 1e-5)
    assert "input: float32" in text and "fallback" in text


def test_explain_checks_arguments(reg):
    with pytest.raises(TypeError, match="'other'"):
        reg.aten.add.out.explain(torch.ones(2), "x")


def test_explain_uncallable(reg):
    k = reg.get_kernel("executorch_prim::et_copy_index.tensor")
    if isinstance(k, etops.UncallableKernel):
        with pytest.raises(etops.SchemaError):
            k.explain()


def test_lookup_exact_then_fallback():
    err, address = _native.lookup("aten::add.out", [(6, (0, 1))] * 4)
    assert err == 0 and address != 0
    fallback = [a for n, k, a in _native.registered_kernels() if n == "aten::add.out" and k is None]
    assert address == fallback[0]


def test_lookup_unknown_operator():
    err, _address = _native.lookup("aten::no_such_op.out", [(6, (0,))])
    assert err != 0


def test_fallback_runs_for_any_dtype(reg):
    for dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16):
        x = torch.ones(3, dtype=dtype)
        got = reg.aten.add.out(x, x)
        assert got.dtype == dtype
        assert torch.equal(got, x + x)


def test_registry_state(reg):
    generation, has_specialized, has_fallback = reg.aten.add.out._registry_state()
    assert has_fallback and not has_specialized
    assert generation == _native.registry_generation()


def test_explain_builds_the_key_the_call_builds_and_names_the_kernel_that_runs():
    """Without out=, the call allocates its out and ExecuTorch's key has it (twice:
    argument and return): explain builds that key, so a kernel registered for
    float32 2-D tensors is the one it names, as the call runs it. A fresh
    interpreter: the registration stays for the process."""
    from fresh_python import run_python

    proc = run_python("""
        import torch, etops
        ran = []
        def mine(self, other, alpha=1, out=None):
            ran.append(1)
            return self + other
        etops.register_python_kernel("aten::add.out", mine, kernel_key=[(torch.float32, 2)] * 3)
        op = etops.registry().get_kernel("aten::add.out")
        x, y = torch.ones(2, 3), torch.ones(2, 3)
        text = op.explain(x, y)
        print(text)
        assert "kernel key: v1/6;0,1|6;0,1|6;0,1|6;0,1" in text, text
        assert "runs: the python kernel registered for exactly this key" in text, text
        assert "outs allocated by the call (no out= given): out" in text, text
        op(x, y)
        assert ran == [1]
        # a 1-D call: the fallback, both in explain and in the call
        assert "runs: the built-in fallback kernel" in op.explain(torch.ones(3), torch.ones(3))
        op(torch.ones(3), torch.ones(3))
        assert ran == [1]
        # a Python number for a Tensor parameter goes as a 0-dim float64 tensor: in the key too
        def numbered(self, other, alpha=1, out=None):
            ran.append(2)
            return self + other
        etops.register_python_kernel("aten::add.out", numbered, kernel_key=[(torch.float32, 1), (torch.float64, 0), (torch.float32, 1)])
        text = op.explain(torch.ones(3), 2.0)
        assert "other: float64, dim order []" in text and "runs: the python kernel registered for exactly this key" in text, text
        op(torch.ones(3), 2.0)
        assert ran == [1, 2]
        print("OK")
    """)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr
