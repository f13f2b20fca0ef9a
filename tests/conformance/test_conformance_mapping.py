"""The ATen call -> ExecuTorch kernel mapping, from schemas and under the dispatch mode."""

from __future__ import annotations

import pytest
import torch

import etops
from etops.conformance.mapping import KernelMap
from etops.conformance.runner import TaskRunner, default_kmap

aten = torch.ops.aten


@pytest.fixture(scope="module")
def kmap():
    return default_kmap()


@pytest.mark.parametrize(
    "func, kernel",
    [
        (aten.add.Tensor, "aten::add.out"),  # functional -> out variant
        (aten.add.Scalar, "aten::add.Scalar_out"),
        (aten.add_.Tensor, "aten::add.out"),  # in-place -> out variant of the base op
        (aten.max.dim, "aten::max.dim_max"),  # multi-out, odd overload name
        (aten.topk.default, "aten::topk.values"),
        (aten.t.default, "aten::t_copy.out"),  # view -> its _copy twin
        (aten.split.Tensor, "aten::split_copy.Tensor_out"),  # view returning a list
        (aten.empty.memory_format, "aten::empty.out"),  # TensorOptions dropped
        (aten.copy_.default, "aten::copy_"),  # registered under the called name itself
        (aten._local_scalar_dense.default, "aten::_local_scalar_dense"),
        (aten.convolution.default, "aten::convolution.out"),
    ],
)
def test_schema_mapping(kmap, func, kernel):
    assert kmap.target(func) == kernel


def test_unregistered_and_non_aten_map_to_nothing(kmap):
    assert kmap.target(aten.cholesky.default) is None  # no ExecuTorch kernel
    assert kmap.target(aten.add.out) == "aten::add.out"  # an out variant called as such is itself
    assert KernelMap(["aten::mul.out"]).target(aten.add.Tensor) is None


def test_overrides_stand_a_kernel_in_for_an_aten_op():
    kmap = KernelMap(["aten::sub.out"], overrides={"aten::add.Tensor": "aten::sub.out"})
    assert kmap.target(aten.add.Tensor) == "aten::sub.out"
    assert kmap.target(aten.sub.Tensor) is None


def _reached(opinfo, dtype=torch.float32):
    runner = TaskRunner(default_kmap(), None, mode="discover")
    runner.run(opinfo, dtype)
    return runner.reached


def test_dispatch_mode_sees_direct_call():
    assert "aten::add.out" in _reached("add")


def test_dispatch_mode_sees_through_wrappers():
    # nn.functional.conv2d is Python and CompositeImplicit: the mode sees aten::convolution
    reached = _reached("nn.functional.conv2d")
    assert "aten::convolution.out" in reached
    assert not any("conv2d" in k for k in reached)
    # indexing reaches aten::index.Tensor
    assert "aten::index.Tensor_out" in _reached("__getitem__")


def test_checking_through_a_wrapper_calls_the_kernel():
    runner = TaskRunner(default_kmap(), ["aten::convolution.out"])
    result = runner.run("nn.functional.conv2d", torch.float32)
    tally = result.tallies[("aten::convolution.out", "float32")]
    assert sum(tally.counts.values()) == result.samples > 0
    assert tally.opinfos == {"nn.functional.conv2d"}


def test_selected_kernels_only():
    runner = TaskRunner(default_kmap(), ["aten::unsqueeze_copy.out"])
    result = runner.run("nn.functional.conv2d", torch.float32)
    assert {k for k, _ in result.tallies} <= {"aten::unsqueeze_copy.out"}


def test_registry_names(kmap):
    assert set(kmap.registered) == {n for n in etops.registry().operator_names if n.startswith("aten::")}
