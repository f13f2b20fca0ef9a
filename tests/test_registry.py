"""The registry as Python objects: listing, lookup, errors, and every registered
kernel's object (schema, repr, registered kernels)."""

from __future__ import annotations


import pytest
import torch

import etops
from etops import _native

NAMESPACES = {"aten", "quantized_decomposed", "dim_order_ops", "executorch_prim", "et_copy"}


def test_namespaces(reg):
    assert set(reg.namespaces) == NAMESPACES


def test_dir_lists_what_exists(reg):
    assert NAMESPACES <= set(dir(reg))
    ops = set(dir(reg.aten))
    assert {"add", "cat", "native_layer_norm", "max", "nonzero"} <= ops
    registered_aten_ops = {n.split("::")[1].split(".")[0] for n in reg.operator_names if n.startswith("aten::")}
    assert ops == registered_aten_ops
    assert dir(reg.aten.add) == ["Scalar_out", "out"]
    assert set(dir(reg.aten.max)) == {o.split(".")[1] for o in reg.operator_names if o.startswith("aten::max.")}
    assert "_schema" in dir(reg.aten.add.out) and "explain" in dir(reg.aten.add.out)


@pytest.mark.parametrize(
    "lookup, asked, suggested",
    [
        (lambda r: r.atne, "atne", "aten"),
        (lambda r: r.aten.addd, "aten::addd", "aten::add"),
        (lambda r: r.aten.add.Tensor, "aten::add.Tensor", "aten::add.out"),
        (lambda r: r.get_kernel("aten::add.Tensor"), "aten::add.Tensor", "aten::add.out"),
        (lambda r: r.get_kernel("aten::addd.out"), "aten::addd.out", "aten::add.out"),
        (lambda r: r.get_kernel("atn::add.out"), "atn::add.out", "aten::add.out"),
        (lambda r: r.quantized_decomposed.quantize_per_tensr, "quantized_decomposed::quantize_per_tensr", "quantized_decomposed::quantize_per_tensor"),
    ],
    ids=["namespace", "op", "overload-attr", "overload-get_kernel", "op-get_kernel", "namespace-get_kernel", "quantized-op"],
)
def test_missing_names(reg, lookup, asked, suggested):
    with pytest.raises(etops.KernelNotFoundError) as info:
        lookup(reg)
    err = info.value
    assert isinstance(err, AttributeError)
    assert isinstance(err, KeyError)
    assert isinstance(err, etops.EtopsError)
    assert asked in str(err)
    assert suggested in str(err)
    assert err.name == asked
    assert suggested in err.suggestions


def test_missing_name_caught_as_attribute_and_key_error(reg):
    assert getattr(reg.aten.add, "Tensor", None) is None
    assert not hasattr(reg, "no_such_namespace")
    try:
        reg.get_kernel("aten::add.Tensor")
    except KeyError:
        pass
    assert "aten::add.out" in reg and "aten::add.Tensor" not in reg


def test_suggestions_are_computed_only_when_the_message_is_shown(reg, monkeypatch):
    """issue 33: a failed lookup (hasattr, getattr with a default) does not compute the
    suggestions; the message, once shown, still names them."""
    import pickle
    import sys

    registry_module = sys.modules["etops.registry"]  # etops.registry is the function
    computed = []
    suggestions = registry_module._suggestions
    monkeypatch.setattr(registry_module, "_suggestions", lambda *a: computed.append(a) or suggestions(*a))
    assert not hasattr(reg.aten.add, "Tensor")
    assert not hasattr(reg.aten, "addd")
    assert getattr(reg, "atne", None) is None
    assert computed == []
    with pytest.raises(etops.KernelNotFoundError) as info:
        reg.aten.add.Tensor
    assert computed == []
    err = info.value
    assert str(err) == "no ExecuTorch kernel is registered for aten::add.Tensor (did you mean aten::add.Scalar_out, aten::add.out?)"
    assert len(computed) == 1
    assert err.suggestions == ("aten::add.Scalar_out", "aten::add.out") and len(computed) == 1  # computed once
    assert repr(err) == f"KernelNotFoundError({str(err)!r})"
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.suggestions == err.suggestions and again.name == "aten::add.Tensor"


def test_malformed_name(reg):
    with pytest.raises(ValueError, match="namespace::op"):
        reg.get_kernel("add")


def test_operator_names(reg):
    names = reg.operator_names
    assert isinstance(names, set)
    assert all(isinstance(n, str) for n in names)
    assert names == {name for name, _key, _address in _native.registered_kernels()}
    assert len(names) == 259
    assert {n.split("::")[0] for n in names} == NAMESPACES
    assert sum(n.startswith("quantized_decomposed::") for n in names) == 19


def test_overload_less_name_is_default(reg):
    k = reg.get_kernel("aten::_local_scalar_dense")
    assert k is reg.aten._local_scalar_dense.default
    assert reg.aten._local_scalar_dense(torch.tensor(2.5)) == 2.5


def test_kernel_object_shows_itself(reg):
    k = reg.aten.add.out
    assert k.name == "aten::add.out"
    assert isinstance(k._schema, torch.FunctionSchema)
    assert str(k._schema) == "aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)"
    assert k.library.endswith("libexecutorch_kernels_optimized.so")
    text = repr(k)
    assert "aten::add.out" in text and "fallback" in text and "Scalar alpha=1" in text
    [entry] = k.kernels
    assert isinstance(entry, etops.RegisteredKernel)
    assert entry.key is None and entry.tensors is None
    assert entry.describe() == "fallback"


def test_quantized_kernels_come_from_quantized_library(reg):
    k = reg.quantized_decomposed.quantize_per_tensor.out
    assert k.library.endswith("libexecutorch_kernels_quantized.so")
    assert isinstance(k._schema, torch.FunctionSchema)


def test_every_registered_kernel(reg):
    """Every registered kernel can be fetched and inspected: a torch FunctionSchema
    or an object that explains it cannot be called and raises SchemaError."""
    entries = _native.registered_kernels()
    by_name: dict[str, list] = {}
    for name, key, _address in entries:
        by_name.setdefault(name, []).append(key)
    callable_count = 0
    for name in sorted(by_name):
        k = reg.get_kernel(name)
        assert k is reg.get_kernel(name)
        namespace, _, rest = name.partition("::")
        op, _, overload = rest.partition(".")
        assert getattr(getattr(getattr(reg, namespace), op), overload or "default") is k
        text = repr(k)
        canonical = name[: -len(".default")] if name.endswith(".default") else name
        assert canonical in text
        # The registered name, as ExecuTorch spells it (some end in ".default").
        kernels = k.kernels
        assert [e.key for e in kernels] == by_name[name]
        for e in kernels:
            assert e.library.endswith(".so")
            if e.key is None:
                assert e.describe() == "fallback"
            else:
                assert e.tensors == etops.kernel.decode_key(e.key)
                assert e.key in text or e.describe() in text
        if isinstance(k, etops.UncallableKernel):
            assert not k.callable
            assert "not callable" in text and "set_schema" in text
            with pytest.raises(etops.SchemaError, match=name):
                k()
        else:
            callable_count += 1
            assert isinstance(k, etops.Kernel)
            assert isinstance(k._schema, torch.FunctionSchema)
            schema_name = k._schema.name + ("." + k._schema.overload_name if k._schema.overload_name else "")
            assert schema_name == name
            assert str(k._schema) in text
    assert callable_count >= 255


def test_all_fallback_only(reg):
    """The wheel's 259 operators all register a fallback kernel only."""
    entries = _native.registered_kernels()
    assert len(entries) == 259
    assert all(key is None for _name, key, _address in entries)


def test_kernels_listing(reg):
    ks = reg.kernels()
    assert len(ks) == 259
    assert ks == [reg.get_kernel(n) for n in sorted(reg.operator_names)]


def test_registered_default_overload_name(reg):
    """ExecuTorch registers executorch_prim::et_view as 'executorch_prim::et_view.default':
    the kernel object still finds its registered kernel and library."""
    assert "executorch_prim::et_view.default" in reg.operator_names
    k = reg.get_kernel("executorch_prim::et_view.default")
    assert k is reg.executorch_prim.et_view.default
    assert [e.key for e in k.kernels] == [None]
    assert k.library.endswith("libexecutorch.so")


def test_uncallable_prim_and_user_schema(reg, user_schemas):
    name = "executorch_prim::floordiv.int"
    k = reg.get_kernel(name)
    if isinstance(k, etops.UncallableKernel):
        with pytest.raises(etops.SchemaError, match="set_schema"):
            k(7, 2)
    k = reg.get_kernel(name, schema="executorch_prim::floordiv.int(int a, int b) -> int")
    assert isinstance(k, etops.Kernel)
    assert reg.get_kernel(name) is k
    assert k(7, 2) == 3
    assert k(9, 3) == 3


def test_user_schema_must_name_the_op(reg, user_schemas):
    with pytest.raises(ValueError):
        etops.set_schema("executorch_prim::mod.int", "executorch_prim::floordiv.int(int a, int b) -> int")


def test_registry_repr(reg):
    text = repr(reg)
    assert "259" in text and "aten" in text
    assert "aten::add" in repr(reg.aten.add) and "out" in repr(reg.aten.add)
