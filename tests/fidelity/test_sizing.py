"""Call fidelity, sizing outs: torch's meta kernel sizes them; ATen's real kernel runs
on the real inputs only for operators the rules table says are sized from the data,
and only once torch's fake kernel reported a data-dependent shape."""

import pytest
import torch
from torch.testing import assert_close

import etops
from etops import out_shapes
from etops.ops import Rule, Sizing, rules_for
from etops.ops.rules import merge


def test_refused_by_meta_never_runs_aten(reg, monkeypatch):
    """batch_norm no_stats with a weight of the wrong rank: meta refuses it and ATen's
    CPU kernel (which segfaults on it) is never called."""
    info = reg.aten._native_batch_norm_legit.no_stats_out._info
    functional = info.functional_overload()
    devices = []

    class Recording:
        _schema = functional._schema

        def __call__(self, *args, **kwargs):
            devices.extend(a.device.type for a in args if isinstance(a, torch.Tensor))
            return functional(*args, **kwargs)

    monkeypatch.setattr(type(info), "functional_overload", lambda self: Recording())
    out_shapes.OUT_SHAPES.clear()  # torch's out shapes worked out again, by the recording functional
    with pytest.raises(ValueError, match="_native_batch_norm_legit.no_stats_out: torch refuses .*torch says"):
        reg.aten._native_batch_norm_legit.no_stats_out(torch.randn(2, 3, 4), torch.randn(3, 3), None, True, 0.1, 1e-5)
    assert devices and set(devices) == {"meta"}


def test_bool_mask_index_is_sized_from_the_data(reg):
    x = torch.randn(6)
    for mask in (x > 0, x > 10, torch.ones(6, dtype=torch.bool)):
        assert_close(reg.aten.index.Tensor_out(x, [mask]), x[mask])


def test_repeat_interleave_is_sized_from_the_data(reg):
    for repeats in (torch.tensor([1, 2, 3]), torch.tensor([0, 0, 4])):
        assert_close(reg.aten.repeat_interleave.Tensor_out(repeats), torch.repeat_interleave(repeats))


def test_sized_from_data_ops_are_never_cached_by_signature():
    assert out_shapes.is_data_dependent(etops.registry().aten.index.Tensor_out._info)
    assert rules_for("aten::index.Tensor_out").sizing.sized_from_data
    assert not rules_for("aten::add.out").sizing.sized_from_data


def test_invalid_arguments_to_a_sized_from_data_op_raise(reg):
    """repeats must be 1-D: torch's own check (before any compute) refuses it, and
    the refusal is a ValueError naming the operator."""
    with pytest.raises(ValueError, match="aten::repeat_interleave.Tensor_out: torch refuses .*1D"):
        reg.aten.repeat_interleave.Tensor_out(torch.ones(2, 2, dtype=torch.int64))


def test_upper_bound_and_sized_from_data_conflict():
    rules = [Rule(("aten::nonzero.out",), sizing=Sizing(upper_bound=lambda bound: {})), Rule(("aten::nonzero.out",), sizing=Sizing(sized_from_data=True))]
    with pytest.raises(ValueError, match="sized from the data"):
        merge("aten::nonzero.out", rules)


def test_no_meta_kernel_asks_for_the_outs():
    """An operator torch has no meta kernel for (and that is not sized from the data)
    asks for the outs instead of running ATen."""

    class NoMeta:
        name = "etops_test::no_meta.out"

        class _schema:  # noqa: N801 - the shape of an OpOverload's schema
            name, overload_name = "etops_test::no_meta", ""
            arguments = ()

        def __call__(self):
            raise NotImplementedError("no meta kernel")

    class Info:
        name = "etops_test::no_meta.out"
        entry = rules_for(name)

        def out_names(self):
            return ("out",)

        def functional_overload(self):
            return NoMeta()

    with pytest.raises(etops.SchemaError, match="pass the outs"):
        out_shapes._infer_outs_uncached(Info(), {})
