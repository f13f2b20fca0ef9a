"""The fuzzer's adversarial classes (etops.fuzz.classes, issue 33): every kernel gets
integer extremes (and INT_MIN / -1), zero-size dims, wrong-dtype, too-small and
overlapping outs, and sizes that overflow, derived from a call it accepts; the
sequences under malloc checking name what killed a process."""

from __future__ import annotations

import os
from collections import Counter

import pytest
import torch

import etops
from etops.fuzz import classes, sequences, worker
from etops.fuzz.runner import callable_kernels

pytest.importorskip("hypothesis")

REG = etops.registry()


def _cases(name):
    kernel = REG.get_kernel(name)
    return classes.class_cases(kernel, classes.canonical_case(kernel))


def _tensor(case, name):
    return dict(case["args"] + case["kwargs"])[name]


def test_int_min_by_minus_one_in_every_integer_dtype_and_rounding_mode():
    traps = [c for c in _cases("aten::div.out_mode") if c["mutation"] == "int_div_trap"]
    seen = {(_tensor(c, "self")[2], _tensor(c, "self")[5], _tensor(c, "other")[5], _tensor(c, "rounding_mode")[1]) for c in traps}
    for dtype in ("int64", "int32"):
        for mode in (None, "trunc", "floor"):
            assert (dtype, "int_min", "minus_one", mode) in seen, (dtype, mode, seen)
    assert {c["out_dtype"] for c in traps} == {"int64", "int32"}


def test_int_min_by_minus_one_into_scalars():
    traps = [c for c in _cases("executorch_prim::floordiv.Scalar") if c["mutation"] == "int_div_trap"]
    assert traps and [v for _n, v in traps[0]["args"] + traps[0]["kwargs"]] == [("V", classes.INT64_MIN), ("V", -1)]
    extremes = {c["target"]: [] for c in _cases("aten::remainder.Scalar_out") if c["mutation"] == "int_extreme"}
    assert set(extremes) == {"other"}


def test_int_extremes_into_every_int_argument_and_int_list():
    cases = _cases("aten::avg_pool2d.out")
    extreme = Counter(c["target"] for c in cases if c["mutation"] == "int_extreme")
    assert extreme["kernel_size"] == len(classes.INT_EXTREMES)
    values = {tuple(_tensor(c, "kernel_size")[1]) for c in cases if c["target"] == "kernel_size" and c["mutation"] == "int_extreme"}
    assert values == {(v, v) for v in classes.INT_EXTREMES}
    overflow = [_tensor(c, "kernel_size")[1] for c in cases if c["mutation"] == "size_overflow" and c["target"] == "kernel_size"]
    assert [2**32, 2**32] in overflow


def test_zero_size_in_every_dim_spatial_ones_included():
    cases = _cases("aten::avg_pool2d.out")
    assert _tensor(classes.canonical_case(REG.aten.avg_pool2d.out), "self")[1] == (1, 2, 5, 5)
    zero = {c["target"]: _tensor(c, "self")[1] for c in cases if c["mutation"] == "zero_size"}
    assert zero == {"self:dim0": (0, 2, 5, 5), "self:dim1": (1, 0, 5, 5), "self:dim2": (1, 2, 0, 5), "self:dim3": (1, 2, 5, 0)}


def test_zero_size_in_every_tensor_at_once():
    cases = [c for c in _cases("aten::add.out") if c["mutation"] == "zero_size" and c["target"].startswith("*")]
    assert [(_tensor(c, "self")[1], _tensor(c, "other")[1]) for c in cases] == [((0, 3), (0, 3)), ((2, 0), (2, 0))]


def test_wrong_dtype_too_small_and_overlapping_outs_for_every_out():
    cases = _cases("aten::var_mean.correction_out")
    outs = {(c["mutation"], c["target"], c["outs"][c["target"]]) for c in cases if c["mutation"].startswith("out")}
    assert ("out_wrong_dtype", "out0", ("dtype", "float64")) in outs
    assert ("out_wrong_dtype", "out1", ("dtype", "float64")) in outs
    assert ("out_too_small", "out1", ("small", "one")) in outs
    assert ("out_partial_overlap", "out0", ("shifted", "self")) in outs
    assert ("outs_overlap", "out1", ("shifted_out", "out0")) in outs


def test_every_kernel_gets_classes():
    """Every callable kernel with an argument gets class cases; every kernel with a
    tensor gets zero-size dims and an int dtype; every one with a tensor out the out
    classes (tensor-list outs, split_copy's, get none yet)."""
    for kernel in callable_kernels():
        cases = classes.class_cases(kernel, classes.canonical_case(kernel))
        kinds = {c["mutation"] for c in cases}
        given = [v for _n, v in classes.canonical_case(kernel)["kwargs"]]
        if any(v[0] == "T" and v[1] for v in given):
            assert {"zero_size", "int_tensor_extremes"} <= kinds, kernel.name
        if any(e.flags & etops.plan.F_OUT and e.kind == etops.plan.K_TENSOR for e in kernel._info._plan.args):
            assert {"out_wrong_dtype", "out_too_small"} <= kinds, kernel.name


def test_values_of_the_extremes():
    assert classes.values((4,), torch.int64, "extremes").tolist() == [classes.INT64_MIN, classes.INT64_MAX, -1, 0]
    assert classes.values((2,), torch.int32, "int_min").tolist() == [-(2**31)] * 2
    assert classes.values((2,), torch.uint8, "extremes").tolist() == [0, 255]
    assert classes.values((1,), torch.int64, "huge").tolist() == [2**40]


def test_overlapping_outs_share_memory_one_element_in():
    x = torch.arange(6.0).reshape(2, 3)
    args = {"self": x}
    out = classes.make_out(("shifted", "self"), torch.empty(2, 3), {}, args, {})
    moved = args["self"]
    assert moved is not x and torch.equal(moved, x)
    assert out.untyped_storage().data_ptr() == moved.untyped_storage().data_ptr() and out.storage_offset() == 1
    outs = {"out0": torch.zeros(3)}
    second = classes.make_out(("shifted_out", "out0"), torch.empty(3), {}, {}, outs)
    assert second.untyped_storage().data_ptr() == outs["out0"].untyped_storage().data_ptr()
    assert classes.make_out(("shifted", "self"), torch.empty(0), {}, {"self": x}, {}) is None  # nothing to overlap


def test_snippet_writes_overlapping_tensors_as_views_of_one_buffer():
    args = {"self": torch.tensor([1.0, -2.0, 3.0])}
    out = classes.make_out(("shifted", "self"), torch.empty(3), {}, args, {})
    code = classes.snippet("aten::abs.out", [args["self"]], {"out": out})
    assert ".set_(buf0, 1, [3], [1])" in code and "copy_(torch.tensor([1.0, -2.0, 3.0]" in code
    namespace: dict = {}
    exec(code.replace("etops.as_program(", "(lambda k: (lambda *a, **kw: (a, kw)))("), namespace)  # builds the tensors


def test_an_overlapping_out_the_call_accepts_is_a_finding_never_a_pass():
    case = next(c for c in _cases("aten::abs.out") if c["mutation"] == "out_partial_overlap")
    out = worker.run_case(case)
    kinds = [kind for kind, _m in out["violations"]]
    assert (out["status"] == "raised" and not kinds) or "overlap_accepted" in kinds, out


@pytest.mark.skipif(not os.path.exists(sequences.MALLOC_DEBUG), reason="needs libc6's malloc debug library")
@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""), reason="ASan's allocator replaces glibc's malloc checking")
def test_a_sequence_names_the_signal_and_the_call_that_killed_it():
    clean = sequences.draw_cases(REG.aten.add.out, 2)
    cases = clean + [{"op": "<selftest:fpe>", "mode": "invalid", "mutation": "int_div_trap"}] + clean
    survived, done, log = sequences.run_sequence(cases)
    assert not survived and done == len(clean)
    assert sequences.death_class(sequences.last()["returncode"], log).startswith("SIGFPE")
    assert sequences._culprit(cases, done) == (len(clean), True)
    assert sequences.death_class(-6, "free(): invalid pointer") == "heap corruption (glibc malloc check)"


def test_the_campaign_runs_the_classes_of_a_kernel():
    """make fuzz: after a kernel's random calls, its classes from the canonical call
    (and the valid calls it returned from), at most `limit`."""
    from etops.fuzz.runner import IsolatedRunner, fuzz_classes

    expected = len(_cases("aten::abs.out"))
    with IsolatedRunner(timeout=120) as runner:
        report = fuzz_classes(runner, REG.aten.abs.out, [], limit=100)
        capped = fuzz_classes(runner, REG.aten.abs.out, [], limit=3)
    assert report.mode == "classes" and report.cases == expected and report.crash is None
    assert report.ok + report.raised == expected and not report.harness_errors
    assert capped.cases == 3
