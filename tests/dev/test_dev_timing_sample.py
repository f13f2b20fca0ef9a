"""The timing input of ``etops dev`` (etops.dev.timing.timing_sample): OpInfo's
sample scaled, else the kernel's etops reference sample scaled, at each size."""

from __future__ import annotations

import pytest
import torch

import etops
from etops.dev.timing import SIZES, timing_sample


@pytest.mark.parametrize("label, size", SIZES)
def test_a_kernel_no_opinfo_reaches_is_timed_on_its_reference_sample(label, size):
    kernel = etops.registry().get_kernel("dim_order_ops::_clone_dim_order.out")
    sample = timing_sample(kernel, size, "float32", ["ref:dim_order_ops::_clone_dim_order.out"])  # the judge's tasks
    assert sample is not None and sample.source.startswith("etops reference sample")
    wanted = {"1k": 1024, "64k": 65536, "1M": 1 << 20}[size]
    assert sample.size == pytest.approx(wanted, rel=0.35), sample.shapes()


def test_an_opinfo_sample_comes_first_and_a_kernel_with_neither_has_none():
    add = timing_sample(etops.registry().get_kernel("aten::add.out"), "64k", "float32")
    assert add is not None and add.source.startswith("OpInfo 'add'")
    # the judge's tasks for it are a reference's only: OpInfo's database is not searched
    empty = etops.registry().get_kernel("dim_order_ops::_empty_dim_order.out")
    assert timing_sample(empty, "64k", "float32", ["ref:dim_order_ops::_empty_dim_order.out"]) is None


def test_an_operator_without_a_float32_sample_is_timed_at_an_integer_dtype():
    sample = timing_sample(etops.registry().get_kernel("aten::bitwise_and.Tensor_out"), "64k", "float32")
    assert sample is not None and sample.dtype in (torch.int32, torch.int64, torch.bool), sample.source
