"""Scalar returns (prim ops), then the binding rules of a kernel call (positional and
keyword arguments, defaults, keyword-only outs, unknown, duplicate and missing
arguments) and wrong Python types, each refused naming the argument. The argument
types themselves: test_arguments.py."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import etops

aten = torch.ops.aten

def test_scalar_returns(reg):
    prim = reg.executorch_prim
    assert prim.add.Scalar(2, 3) == 5 and type(prim.add.Scalar(2, 3)) is int
    assert prim.add.Scalar(2.5, 3) == 5.5
    assert prim.mul.Scalar(4, 0.5) == 2.0
    assert prim.eq.Scalar(2, 2) is True
    assert prim.lt.Scalar(3, 2) is False
    assert prim.truediv.Scalar(7, 2) == 3.5
    assert prim.neg.Scalar(4) == -4
    assert prim.sym_max.Scalar(3, 9) == 9
    assert reg.aten._local_scalar_dense(torch.tensor(3.5)) == 3.5
    assert reg.aten._local_scalar_dense(torch.tensor(7)) == 7


# ---- binding -----------------------------------------------------------------------


def test_positional_and_keyword(reg):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    want = torch.add(a, b, alpha=2)
    assert_close(reg.aten.add.out(a, b, alpha=2), want)
    assert_close(reg.aten.add.out(self=a, other=b, alpha=2), want)
    assert_close(reg.aten.add.out(a, other=b, alpha=2, out=torch.empty(2, 3)), want)
    assert_close(reg.aten.max.dim_max(a, dim=1, keepdim=True)[0], torch.max(a, 1, True).values)


def test_defaults_filled(reg):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    assert_close(reg.aten.add.out(a, b), a + b)  # alpha=1
    x = torch.randn(3, 4)
    assert_close(reg.aten.stack.out([x, x]), torch.stack([x, x]))  # dim=0
    assert_close(reg.aten.max.dim_max(x, 1)[0], torch.max(x, 1).values)  # keepdim=False
    assert_close(reg.aten.avg_pool2d.out(torch.ones(1, 1, 4, 4), [2, 2]), aten.avg_pool2d(torch.ones(1, 1, 4, 4), [2, 2]))  # stride=[]


def test_out_is_keyword_only(reg):
    x = torch.randn(2, 3)
    with pytest.raises(TypeError, match="'out'"):
        reg.aten.abs.out(x, torch.empty(2, 3))
    with pytest.raises(TypeError, match="'out'"):
        reg.aten.cat.out([x, x], 0, torch.empty(4, 3))
    with pytest.raises(TypeError, match="'alpha'"):
        reg.aten.add.out(x, x, 1, torch.empty(2, 3))


def test_kwarg_only_alpha_positionally(reg):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    with pytest.raises(TypeError, match="'alpha'"):
        reg.aten.add.out(a, b, 2)


def test_unknown_keyword(reg):
    a = torch.randn(2, 3)
    with pytest.raises(TypeError, match="'bogus'"):
        reg.aten.add.out(a, a, bogus=1)
    with pytest.raises(TypeError, match="'bogus'"):
        reg.aten.add.out(a, a, bogus=1, out=torch.empty(2, 3))


def test_duplicate_value(reg):
    a = torch.randn(2, 3)
    with pytest.raises(TypeError, match="'self'"):
        reg.aten.add.out(a, a, self=a, out=torch.empty(2, 3))
    with pytest.raises(TypeError, match="'self'"):
        reg.aten.add.out(a, a, self=a)


def test_missing_required(reg):
    a = torch.randn(2, 3)
    with pytest.raises(TypeError, match="'other'"):
        reg.aten.add.out(a, out=torch.empty(2, 3))
    with pytest.raises(TypeError, match="'other'"):
        reg.aten.add.out(a)
    with pytest.raises(TypeError, match="'rounding_mode'|'other'"):
        reg.aten.div.out_mode(a)


# ---- wrong Python types: TypeError naming the argument, with or without outs -------

_A = torch.ones(2, 3)

WRONG = [
    ("aten::add.out", (_A, "x"), {}, "other"),
    ("aten::pow.Tensor_Tensor_out", (_A, 3), {}, "exponent"),  # torch takes no number there
    ("aten::add.out", (_A, _A), {"alpha": "x"}, "alpha"),
    ("aten::add.out", (_A, _A), {"alpha": None}, "alpha"),
    ("aten::add.out", (_A, _A), {"alpha": [1]}, "alpha"),
    ("aten::add.out", (_A, _A), {"alpha": 1j}, "alpha"),
    ("aten::cat.out", (_A,), {}, "tensors"),
    ("aten::cat.out", ([_A, "x"],), {}, "tensors"),
    ("aten::cat.out", ([_A, _A], 1.5), {}, "dim"),
    ("aten::cat.out", ([_A, _A], True), {}, "dim"),
    ("aten::cumsum.out", (_A, "0"), {}, "dim"),
    ("aten::permute_copy.out", (_A, [1, "0"]), {}, "dims"),
    ("aten::permute_copy.out", (_A, 1.0), {}, "dims"),
    ("aten::max.dim_max", (_A, 1, 1), {}, "keepdim"),
    ("aten::max.dim_max", (_A, 1, "yes"), {}, "keepdim"),
    ("aten::native_layer_norm.out", (_A, [3], None, None, "eps"), {}, "eps"),
    ("aten::native_layer_norm.out", (_A, [3], 1.0, None, 1e-5), {}, "weight"),
    ("aten::gelu.out", (_A,), {"approximate": 1}, "approximate"),
    ("aten::div.out_mode", (_A, _A), {"rounding_mode": 0}, "rounding_mode"),
    ("aten::index.Tensor_out", (_A, [None, 1]), {}, "indices"),
    ("aten::index.Tensor_out", (_A, None), {}, "indices"),
    ("aten::logit.out", (_A, "eps"), {}, "eps"),
    ("aten::clamp.out", (_A, "lo"), {}, "min"),
    ("aten::upsample_bilinear2d.vec_out", (torch.ones(1, 1, 2, 2), None, False, ["2"]), {}, "scale_factors"),
    ("aten::sum.IntList_out", (_A, [1]), {"dtype": "float64"}, "dtype"),
    ("aten::sum.IntList_out", (_A, [1]), {"dtype": 6}, "dtype"),
    ("aten::clone.out", (_A,), {"memory_format": "contiguous"}, "memory_format"),
]


def _out_for(name):
    return {
        "aten::add.out": {"out": torch.empty(2, 3)},
        "aten::pow.Tensor_Tensor_out": {"out": torch.empty(2, 3)},
        "aten::cat.out": {"out": torch.empty(4, 3)},
        "aten::cumsum.out": {"out": torch.empty(2, 3)},
        "aten::permute_copy.out": {"out": torch.empty(3, 2)},
        "aten::max.dim_max": {"max": torch.empty(2), "max_values": torch.empty(2, dtype=torch.int64)},
        "aten::native_layer_norm.out": {"out0": torch.empty(2, 3), "out1": torch.empty(2, 1), "out2": torch.empty(2, 1)},
        "aten::gelu.out": {"out": torch.empty(2, 3)},
        "aten::div.out_mode": {"out": torch.empty(2, 3)},
        "aten::index.Tensor_out": {"out": torch.empty(2, 3)},
        "aten::logit.out": {"out": torch.empty(2, 3)},
        "aten::clamp.out": {"out": torch.empty(2, 3)},
        "aten::upsample_bilinear2d.vec_out": {"out": torch.empty(1, 1, 4, 4)},
        "aten::sum.IntList_out": {"out": torch.empty(2)},
        "aten::clone.out": {"out": torch.empty(2, 3)},
    }[name]


@pytest.mark.parametrize("with_outs", [True, False], ids=["outs", "no-outs"])
@pytest.mark.parametrize("name, args, kwargs, argument", WRONG, ids=[f"{w[0]}-{w[3]}-{i}" for i, w in enumerate(WRONG)])
def test_wrong_python_type(reg, name, args, kwargs, argument, with_outs):
    kernel = reg.get_kernel(name)
    extra = _out_for(name) if with_outs else {}
    with pytest.raises(TypeError, match=f"'{argument}"):
        kernel(*args, **kwargs, **extra)


def test_out_of_range_int(reg):
    with pytest.raises(OverflowError, match="'dim'"):
        reg.aten.cumsum.out(_A, 2**70, out=torch.empty(2, 3))
