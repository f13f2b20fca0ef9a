"""etops.compare (policies, comparison kinds, NaN/inf, complex, exact integers,
nests, merge) and etops.layouts (dim order <-> dense strides)."""

import itertools
import math

import pytest
import torch

from etops import compare as c
from etops.layouts import dim_order_of, is_dense, strides_for


def t(*values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


def test_equal_tensors_are_ok_with_infinite_snr():
    d = c.diff(t(1.0, 2.0), t(1.0, 2.0))
    assert d.ok and d.mismatched == 0 and d.numel == 2 and d.snr == math.inf and d.problem is None


def test_torch_policy_is_torch_testing_default_per_dtype():
    assert c.TORCH.pair(torch.float32) == (1.3e-6, 1e-5)
    assert c.TORCH.pair(torch.float16) == (0.001, 1e-5)
    assert c.TORCH.pair(torch.int32) == (0.0, 0.0)
    # 1e-6 off at 1.0: inside float32's tolerance, outside float64's
    assert c.diff(t(1.0 + 1e-6), t(1.0)).ok
    d = c.diff(t(1.0 + 1e-5, dtype=torch.float64), t(1.0, dtype=torch.float64))
    assert not d.ok and d.mismatched == 1 and d.max_abs == pytest.approx(1e-5) and d.max_rel == pytest.approx(1e-5)


def test_override_fixes_rtol_and_atol():
    strict = c.TORCH.override(rtol=0, atol=0)
    assert strict.pair(torch.float32) == (0, 0)
    assert not c.diff(t(1.0 + 1e-6), t(1.0), strict).ok
    loose = c.TORCH.override(atol=1.0)
    assert loose.pair(torch.float32) == (1.3e-6, 1.0)
    assert c.diff(t(1.5), t(1.0), loose).ok
    assert c.TORCH.override() is c.TORCH


def test_policies_by_name_and_unknown_name():
    assert c.policy("fuzz") is c.FUZZ and c.policy(c.BENCH) is c.BENCH
    assert set(c.POLICIES) == {"torch", "opinfo", "fuzz", "bench"}
    with pytest.raises(ValueError, match="tolerance must be"):
        c.diff(t(1.0), t(1.0), "nope")
    with pytest.raises(ValueError, match="kind must be"):
        c.diff(t(1.0), t(1.0), kind="nope")


def test_fuzz_policy_loose_for_half_strict_for_double():
    assert c.diff(t(1.01, dtype=torch.float16), t(1.0, dtype=torch.float16), "fuzz").ok
    assert not c.diff(t(1.01, dtype=torch.float16), t(1.0, dtype=torch.float16), "torch").ok
    assert not c.diff(t(1.0 + 1e-6, dtype=torch.float64), t(1.0, dtype=torch.float64), "fuzz").ok
    # integers exact whatever the table says
    assert c.FUZZ.pair(torch.int64) == (0.0, 0.0)


def test_bench_policy_scales_atol_with_the_reference():
    big = t(1000.0, 0.0)
    assert c.diff(t(1000.0, 0.5), big, "bench").ok  # atol 1e-3 * 1000
    assert not c.diff(t(1000.0, 0.5), big, "torch").ok
    assert not c.diff(t(1.0, 0.5), t(1.0, 0.0), "bench").ok


def test_opinfo_policy_matches_assert_close_and_gives_its_message():
    a, e = t(1.0, 2.0), t(1.0, 2.1)
    assert not c.diff(a, e, "opinfo").ok
    message = c.torch_testing_message(a, e, "opinfo")
    assert message.startswith("Tensor-likes are not close!") and "\n" not in message
    assert c.torch_testing_message(a, a, "opinfo") is None
    assert c.torch_testing_message(a, e, c.OPINFO.override(rtol=0.1, atol=0.1)) is None
    assert c.diff(a, e, c.OPINFO.override(rtol=0.1, atol=0.1)).ok
    assert c.torch_testing_message(t(1.0), 1.0).startswith("cannot compare") or c.torch_testing_message(t(1.0), 1.0)


@pytest.mark.parametrize("policy", sorted(c.POLICIES))
def test_nan_where_reference_has_nan_agrees_elsewhere_infinite_error(policy):
    nan, inf = math.nan, math.inf
    assert c.diff(t(nan, inf, -inf), t(nan, inf, -inf), policy).ok
    d = c.diff(t(nan, 1.0), t(1.0, 1.0), policy)
    assert d.mismatched == 1 and d.max_abs == math.inf
    d = c.diff(t(1.0), t(nan), policy)
    assert d.mismatched == 1
    d = c.diff(t(inf), t(-inf), policy)
    assert d.mismatched == 1 and d.max_abs == math.inf
    # a finite value where the reference is infinite is off, whatever rtol
    assert not c.diff(t(1.0), t(inf), c.policy(policy).override(rtol=0.5)).ok


def test_complex_compared_by_parts_or_by_magnitude():
    a, e = torch.tensor([1 + 1j, 2 + 2j]), torch.tensor([1 + 1j, 2 + 3j])
    d = c.diff(a, e)
    assert d.mismatched == 1 and d.numel == 2 and d.max_abs == pytest.approx(1.0)
    assert c.diff(a, a).ok
    assert not c.diff(a, e, "opinfo").ok
    assert c.diff(a, e, c.OPINFO.override(rtol=0, atol=1.0)).ok  # |dz| = 1
    assert math.isfinite(d.snr) and d.snr > 0


@pytest.mark.parametrize("dtype", [torch.bool, torch.int8, torch.int64])
def test_bool_and_integers_are_exact(dtype):
    a = torch.tensor([1, 0, 1], dtype=dtype)
    assert c.diff(a, a.clone()).ok
    e = torch.tensor([1, 1, 1], dtype=dtype)
    for policy in c.POLICIES:
        d = c.diff(a, e, policy)
        assert d.mismatched == 1 and d.snr == -math.inf, policy


def test_large_int64_exact_in_own_dtype():
    a, e = torch.tensor([2**53 + 1]), torch.tensor([2**53])
    assert not c.diff(a, e, "opinfo").ok and not c.diff(a, e, "fuzz").ok


def test_structural_differences_named():
    assert c.diff(t(1.0), t(1.0, 2.0)).structural == c.Structural("shape", [1], [2], 0)
    assert c.diff(t(1.0), t(1.0, dtype=torch.float64)).problem == "dtype torch.float32 vs torch.float64"
    assert c.diff(1.0, t(1.0)).structural.what == "type"
    assert c.diff([t(1.0)], [t(1.0), t(2.0)]).problem == "1 values vs 2 expected"
    assert not c.diff(t(1.0), t(1.0, 2.0)).ok


def test_nested_outputs_merge_worst_errors_and_counts():
    a = (t(1.0, 2.0), [t(3.0), {"x": t(4.0)}])
    e = (t(1.0, 2.5), [t(3.0), {"x": t(5.0)}])
    d = c.diff(a, e)
    assert d.mismatched == 2 and d.numel == 4 and d.max_abs == pytest.approx(1.0)
    bad = c.diff((t(1.0), t(1.0)), (t(1.0), t(1.0, 2.0)))
    assert bad.structural.leaf == 1


def test_merge():
    one = c.Diff(max_abs=1.0, max_rel=0.1, mismatched=1, numel=4, snr=20.0)
    two = c.Diff(max_abs=0.5, max_rel=0.3, mismatched=2, numel=6, snr=10.0, structural=c.Structural("dtype", 1, 2))
    m = one.merge(two)
    assert (m.max_abs, m.max_rel, m.mismatched, m.numel, m.snr) == (1.0, 0.3, 3, 10, 10.0)
    assert m.structural == two.structural and not m.ok
    assert c.Diff().merge(c.Diff()).ok


def test_describe_is_one_line():
    assert "1 of 2 elements beyond tolerance" in c.diff(t(1.0, 2.0), t(1.0, 3.0)).describe()
    assert c.diff(t(1.0), t(1.0, 2.0)).describe() == "shape [1] vs [2]"
    assert c.diff(t(1.0), t(1.0)).describe().startswith("equal")


def test_metadata_kind_compares_only_shape_and_dtype():
    assert c.diff(t(1.0, 2.0), t(5.0, 6.0), kind=c.METADATA).ok
    assert not c.diff(t(1.0), t(5.0, 6.0), kind=c.METADATA).ok
    assert not c.diff(t(1.0), t(5.0, dtype=torch.float64), kind=c.METADATA).ok
    assert c.diff(3, 4, kind=c.METADATA).ok


def test_ties_kind_integer_outputs_by_metadata_floats_by_value():
    values, indices = t(3.0, 3.0), torch.tensor([0, 1])
    assert c.diff((values, indices), (values, torch.tensor([1, 0])), kind=c.TIES).ok
    assert not c.diff((t(3.0, 2.0), indices), (values, indices), kind=c.TIES).ok
    assert not c.diff(torch.tensor([0]), torch.tensor([0, 1]), kind=c.TIES).ok
    assert c.KINDS == (c.VALUES, c.METADATA, c.TIES)


def test_python_scalars():
    assert c.diff(3, 3).ok and not c.diff(3, 4).ok
    assert c.diff(1.0, 1.0 + 1e-10, "fuzz").ok and not c.diff(1.0, 1.001, "fuzz").ok
    assert c.diff(math.nan, math.nan).ok
    assert c.diff(1, 1.0, "fuzz").structural.what == "type"
    assert c.diff(1, 1.0, "torch").ok
    assert c.diff(None, None).ok


def test_empty_tensors_agree():
    assert c.diff(torch.empty(0, 3), torch.empty(0, 3)).ok


def test_snr():
    e = t(1.0, 1.0)
    assert c.snr(e, e) == math.inf and c.snr(torch.empty(0), torch.empty(0)) == math.inf
    assert c.snr(e, t(1.1, 0.9)) == pytest.approx(20.0)


# ---- layouts ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 3, 1, 5), (2, 0, 3), (7,), ()])
def test_strides_for_every_dim_order_is_torch_permuted_layout(shape):
    for order in itertools.permutations(range(len(shape))):
        dense = torch.empty(tuple(shape[d] for d in order)).permute([order.index(d) for d in range(len(shape))])
        assert strides_for(shape, order) == tuple(dense.stride())
        assert is_dense(shape, strides_for(shape, order))
    assert strides_for(shape) == torch.empty(shape).stride()


def test_dim_order_of_and_is_dense():
    assert dim_order_of((2, 3, 4, 5), (60, 1, 15, 3)) == (0, 2, 3, 1)  # channels last
    assert dim_order_of((2, 3), (3, 1)) == (0, 1)
    assert dim_order_of((2, 3), (6, 2)) is None  # every other element
    assert not is_dense((2, 3), (0, 1))  # broadcast
    assert is_dense((2, 3, 1), (3, 1, 99))  # a dim of size 1 may have any stride
    with pytest.raises(ValueError, match="dim_order"):
        strides_for((2, 3), (0, 0))
    with pytest.raises(ValueError, match="strides"):
        dim_order_of((2, 3), (1,))


@pytest.mark.parametrize("policy", ["torch", "opinfo", "bench", "fuzz"])
def test_equal_values_give_what_the_element_wise_steps_give(policy):
    """Equal tensors take a shortcut (one torch.equal); its Diff is, field by
    field, the one the element-wise steps give (the shortcut switched off)."""
    import dataclasses

    cases = [torch.tensor([0.0, -0.0, 1.5]), torch.arange(6, dtype=torch.int32), torch.tensor([True, False]),
             torch.tensor([1 + 2j, -3j]).conj(), torch.randn(3, 4, dtype=torch.float64).t()]
    for value in cases:
        same = c.diff(value.clone(), value, policy)
        assert c.equal_values(value.clone(), value)
        assert same.ok and same.mismatched == 0 and same.max_abs == 0.0 and same.max_rel == 0.0
        assert same.snr == math.inf and same.numel == value.numel()
        # the element-wise steps on the same pair (the shortcut switched off) agree field by field
        original = c.equal_values
        c.equal_values = lambda *_: False
        try:
            slow = c.diff(value.clone(), value, policy)
        finally:
            c.equal_values = original
        assert dataclasses.asdict(slow) == dataclasses.asdict(same)


def test_equal_values_is_false_for_nan_and_for_dtypes_torch_equal_refuses():
    nan = torch.tensor([1.0, math.nan])
    assert not c.equal_values(nan, nan.clone()) and c.diff(nan, nan.clone(), "torch").ok  # NaN where the reference has NaN
    half = torch.tensor([1 + 1j], dtype=torch.complex32)
    assert not c.equal_values(half, half.clone())


def test_the_message_of_two_plain_tensors_imports_no_dtensor_and_is_assert_closes_own():
    """Wording a mismatch of two plain tensors does not import torch.distributed.tensor
    (about half of `import torch`, once in each of etops dev's task processes); the
    message is the one assert_close gives with it imported, and the switch is back after."""
    import subprocess
    import sys

    script = (
        "import sys, torch\n"
        "from etops import compare as c\n"
        "a, e = torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.1])\n"
        "first = c.torch_testing_message(a, e, 'opinfo')\n"
        "print('dtensor' if 'torch.distributed.tensor' in sys.modules else 'none')\n"
        "import torch.distributed.tensor\n"
        "from torch.testing import _comparison\n"
        "print(_comparison._HAS_DTENSOR, first == c.torch_testing_message(a, e, 'opinfo'), first.startswith('Tensor-likes'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["none", "True", "True", "True"], done.stdout + done.stderr[-2000:]
