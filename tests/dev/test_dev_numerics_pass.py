"""etops.dev.numerics_pass: which operators get the numerics axis in ``etops dev``
(torch's reduction tag, and the accumulating families torch tags nowhere), its
passes (one per transform, limited to those operators), and the integer inputs its
transforms move (check's axis leaves them)."""

from __future__ import annotations

import pytest
import torch

from etops.conformance import numerics
from etops.dev.numerics_pass import ACCUMULATING, NUMERICS, NUMERICS_TRANSFORMS, accumulates, numerics_operators, numerics_tasks


def test_reductions_scans_softmaxes_normalizations_and_products_get_the_axis():
    tagged = ["aten::sum.IntList_out", "aten::mean.out", "aten::prod.int_out", "aten::var.correction_out", "aten::amax.out"]
    listed = ["aten::cumsum.out", "aten::_softmax.out", "aten::_log_softmax.out", "aten::native_layer_norm.out",
              "aten::native_group_norm.out", "aten::_native_batch_norm_legit.out", "aten::var_mean.correction_out",
              "aten::mm.out", "aten::bmm.out", "aten::addmm.out", "aten::linear.out", "aten::convolution.out"]
    for op in tagged:  # torch's own fact: the overload carries Tag.reduction
        base, _, overload = op[6:].partition(".")
        assert torch.Tag.reduction in getattr(getattr(torch.ops.aten, base), overload).tags, op
        assert accumulates(op), op
    for op in listed:
        assert accumulates(op), op
    for op in ("aten::add.out", "aten::mul.out", "aten::abs.out", "aten::cat.out", "aten::gather.out", "aten::relu.out",
               "aten::floor_divide.Scalar_out", "aten::index_select.out", "quantized_decomposed::add.out", "aten::no_such_op.out"):
        assert not accumulates(op), op
    assert not ({"sum", "mean", "prod", "var", "amax"} & ACCUMULATING)  # those come from the tag, not the list


def test_a_bad_operator_name_is_refused_naming_the_argument():
    for bad in (None, 3, "sum.IntList_out"):
        with pytest.raises(TypeError, match="argument 'op'"):
            accumulates(bad)


def _tasks(*ids):
    return [{"opinfo": i, "dtype": d} for i in ids for d in ("float32", "int16")]


def test_the_passes_run_the_accumulating_operators_own_tasks_one_pass_per_transform():
    plan = {"aten::sum.IntList_out": _tasks("sum", "nanmean", "trapz"), "aten::add.out": _tasks("add", "sum"),
            "aten::cumsum.out": _tasks("cumsum", "logcumsumexp"), "aten::var_mean.correction_out": _tasks("cov", "corrcoef")}
    assert numerics_operators(plan) == {"aten::sum.IntList_out", "aten::cumsum.out", "aten::var_mean.correction_out"}
    # the OpInfos named after the operator when it has any (the other OpInfos reach it inside a composite)
    assert numerics_tasks(plan) == {("aten::sum.IntList_out", "sum"), ("aten::cumsum.out", "cumsum"),
                                    ("aten::var_mean.correction_out", "cov"), ("aten::var_mean.correction_out", "corrcoef")}
    passes = NUMERICS.passes(plan, guarded=True, deadline=123.0)
    assert [p.name for p in passes] == [f"edit, numerics:{t}" for t in NUMERICS_TRANSFORMS]
    assert NUMERICS_TRANSFORMS == tuple(numerics.TRANSFORMS)
    assert all(p.tasks == numerics_tasks(plan) and p.deadline == 123.0 for p in passes)
    assert all(hasattr(p.hooks, "transform") and hasattr(p.hooks, "invoke") for p in passes)  # guarded transforms
    assert NUMERICS.passes({"aten::add.out": _tasks("add"), "aten::mul.out": _tasks("mul")}, guarded=True, deadline=None) == []
    assert NUMERICS.findings({}, [], None, None, None, None, base_kind="git", guarded=True, moved=[], report_dir=None,
                             base_key=None) == ([], [], {})


def test_dev_transforms_move_integer_inputs_so_a_narrow_accumulator_overflows():
    x = torch.arange(-9, 11, dtype=torch.int16).reshape(4, 5)
    with_ints, floats_only = numerics.Transform("offset", integers=True), numerics.Transform("offset")
    [moved], _ = with_ints.values([x], {})
    assert moved.dtype == torch.int16 and int(moved.min()) >= torch.iinfo(torch.int16).max // 8 - 9
    assert int(moved.to(torch.int64).sum()) > torch.iinfo(torch.int16).max  # a sum of 20 overflows int16, not int64
    assert with_ints.applies(None, [x], {}) and not floats_only.applies(None, [x], {})  # check's axis leaves integers
    [big], _ = numerics.Transform("huge", integers=True).values([x], {})
    assert int(big.abs().max()) <= torch.iinfo(torch.int16).max // 4 and int(big.abs().max()) > 4000
    assert numerics.Transform("long", integers=True).values([x], {})[0][0].shape == (4, 2050)
    # a call with a floating tensor moves only that one (an index stays an index)
    f, idx = torch.randn(4, 5), torch.tensor([0, 2])
    args, _ = with_ints.values([f, idx], {})
    assert args[1] is idx and not torch.equal(args[0], f)
    # cancel and tiny leave integers: nothing changed, so the case is left out (no second run of it)
    assert numerics.Transform("tiny", integers=True).transform(None, torch.ops.aten.sum.default, [x], {}) is None
    new_args, _kwargs, expected = with_ints.transform(None, torch.ops.aten.sum.default, [x], {})
    assert expected.dtype == torch.int64 and int(expected) == int(new_args[0].to(torch.int64).sum())


def test_a_transform_name_must_be_known():
    with pytest.raises(ValueError, match="argument 'name'"):
        numerics.Transform("sideways")


def test_a_pass_limited_to_some_tasks_runs_only_those_and_they_come_right_after_float32():
    """run_passes: a later pass's ``tasks`` limit it (the numerics axis runs an
    operator's own OpInfo), and those tasks run right after the float32 ones, so a
    budget cuts the other OpInfos' tasks first."""
    from etops.dev.cases import plan
    from etops.dev.judge import Pass, run_passes

    planned = plan(["aten::sum.IntList_out"], ["float32", "float64"])["aten::sum.IntList_out"]
    others = sorted({t["opinfo"] for t in planned} - {"sum"})[:2]
    tasks = {"aten::sum.IntList_out": [t for t in planned if t["opinfo"] in {"sum", *others}]}
    assert len({t["dtype"] for t in tasks["aten::sum.IntList_out"] if t["opinfo"] == "sum"}) == 2
    own = frozenset({("aten::sum.IntList_out", "sum")})
    (edit, ran), (limited, limited_ran) = run_passes([Pass("edit", None), Pass("limited", None, tasks=own)], tasks)
    assert [(r[1], r[2]) for r in limited_ran] == [("sum", "float32"), ("sum", "float64")]
    assert limited.cases["aten::sum.IntList_out"] > 0 and limited.cases["aten::sum.IntList_out"] < edit.cases["aten::sum.IntList_out"]
    float32 = [r for r in ran if r[2] == "float32"]
    assert ran[:len(float32)] == float32 and ran[len(float32)] == ("aten::sum.IntList_out", "sum", "float64")
