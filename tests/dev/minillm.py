"""A miniature checkout of ExecuTorch's LLM custom ops for the ``etops dev`` tests,
written by the tests (no fetched checkout): ``extension/llm/custom_ops/op_mini_cache.cpp``
implements ``llama::update_cache.out`` (the value's rows copied into the cache from
``start_pos``, contiguous tensors only) and registers it itself, as upstream's
``op_update_cache.cpp`` does (``EXECUTORCH_LIBRARY``), next to its header; no kernel
YAML. ``write(folder)`` makes it a git repository with the file committed (the base
of ``etops dev``); ``plant(folder)`` edits the working tree: batch lines after the
first written one row early when ``start_pos`` is past 0, a bug the update_cache
references' batch-2 cases see (``plant(folder, SHORT_CACHE)``: every line one row early
in a cache of 10 positions, a bug the references, whose caches hold 64, miss and the
upstream-style Python test next to the file, ``test_mini_cache.py``, and the C++ test
``op_mini_cache_test.cpp`` see)."""

from __future__ import annotations

import subprocess
from pathlib import Path

FOLDER = "extension/llm/custom_ops"

HEADER = """\
#pragma once
#include <executorch/runtime/kernel/kernel_includes.h>

namespace torch::executor::native {
executorch::aten::Tensor& update_cache_out(executorch::runtime::KernelRuntimeContext& ctx,
                                           const executorch::aten::Tensor& value, executorch::aten::Tensor& cache,
                                           const int64_t start_pos, executorch::aten::Tensor& out);
}  // namespace torch::executor::native
"""

SOURCE = """\
// The miniature checkout's KV-cache update: cache[b, start_pos + s] = value[b, s].
#include <executorch/extension/llm/custom_ops/op_mini_cache.h>
#include <executorch/extension/kernel_util/make_boxed_from_unboxed_functor.h>
#include <executorch/runtime/core/exec_aten/util/dim_order_util.h>

#include <cstring>

namespace torch::executor::native {

using executorch::aten::Tensor;
using executorch::runtime::KernelRuntimeContext;

Tensor& update_cache_out(KernelRuntimeContext& ctx, const Tensor& value, Tensor& cache, const int64_t start_pos,
                         Tensor& out) {
  ET_KERNEL_CHECK(ctx, value.dim() == 4 && cache.dim() == 4, InvalidArgument, out);
  ET_KERNEL_CHECK(ctx, value.scalar_type() == cache.scalar_type(), InvalidArgument, out);
  ET_KERNEL_CHECK(ctx, value.size(0) == cache.size(0) && value.size(2) == cache.size(2) && value.size(3) == cache.size(3),
                  InvalidArgument, out);
  ET_KERNEL_CHECK(ctx, start_pos >= 0 && start_pos + value.size(1) <= cache.size(1), InvalidArgument, out);
  ET_KERNEL_CHECK(ctx, executorch::runtime::is_contiguous_dim_order(value.dim_order().data(), value.dim()) &&
                  executorch::runtime::is_contiguous_dim_order(cache.dim_order().data(), cache.dim()),
                  InvalidArgument, out);
  const size_t row = static_cast<size_t>(value.size(2) * value.size(3)) * value.element_size();
  const char* from = static_cast<const char*>(value.const_data_ptr());
  char* to = static_cast<char*>(cache.mutable_data_ptr());
  for (int64_t b = 0; b < value.size(0); ++b) {
    const int64_t first = START;
    for (int64_t s = 0; s < value.size(1); ++s) {
      std::memcpy(to + (b * cache.size(1) + first + s) * row, from + (b * value.size(1) + s) * row, row);
    }
  }
  return out;
}

}  // namespace torch::executor::native

EXECUTORCH_LIBRARY(llama, "update_cache.out", torch::executor::native::update_cache_out);
"""

#: an upstream-style Python test of the file: torch.ops.llama.update_cache against its own
#: expectation, on a cache of 10 positions (one test skipped, as upstream skips some); the
#: out variant with an out of its own (the kernel never writes it: the functional variant
#: would return the bytes of the out etops allocates, which no run repeats)
PYTHON_TEST = """\
import unittest

import torch

from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401


class UpdateCacheTest(unittest.TestCase):
    def test_update_cache_at_start(self):
        value, cache = torch.randn(1, 2, 2, 4), torch.zeros(1, 10, 2, 4)
        torch.ops.llama.update_cache.out(value, cache, 0, out=torch.zeros(1))
        self.assertTrue(torch.equal(cache[:, :2], value))

    def test_update_cache_in_the_middle(self):
        value, cache = torch.randn(2, 3, 2, 4), torch.zeros(2, 10, 2, 4)
        expected = cache.clone()
        expected[:, 4:7] = value
        torch.ops.llama.update_cache.out(value, cache, 4, out=torch.zeros(1))
        self.assertTrue(torch.equal(cache, expected))

    @unittest.skip("needs a model")
    def test_update_cache_of_a_model(self):
        pass
"""

#: an upstream-style C++ test of the file (as op_sdpa_test.cpp is of op_sdpa.cpp): the kernel's
#: function called directly, two rows written at position 4 of a cache of 10
GTEST = r"""
#include <executorch/extension/llm/custom_ops/op_mini_cache.h>
#include <executorch/runtime/platform/runtime.h>

#include <gtest/gtest.h>

#include <vector>

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;

TEST(MiniCacheTest, WritesTwoRowsInTheMiddleOfTheCache) {
  executorch::runtime::runtime_init();
  std::vector<float> value = {1, 2, 3, 4}, cache(20, 0.0f), out(20, 0.0f);
  TensorImpl::SizesType value_sizes[] = {1, 2, 1, 2}, cache_sizes[] = {1, 10, 1, 2};
  TensorImpl::DimOrderType order[] = {0, 1, 2, 3};
  TensorImpl::StridesType value_strides[] = {4, 2, 2, 1}, cache_strides[] = {20, 2, 2, 1};
  TensorImpl v(ScalarType::Float, 4, value_sizes, value.data(), order, value_strides);
  TensorImpl c(ScalarType::Float, 4, cache_sizes, cache.data(), order, cache_strides);
  TensorImpl o(ScalarType::Float, 4, cache_sizes, out.data(), order, cache_strides);
  Tensor value_t(&v), cache_t(&c), out_t(&o);
  executorch::runtime::KernelRuntimeContext context;
  torch::executor::native::update_cache_out(context, value_t, cache_t, 4, out_t);
  EXPECT_EQ(context.failure_state(), executorch::runtime::Error::Ok);
  EXPECT_EQ(cache, (std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}));
}
"""

RIGHT = "start_pos"
#: batch lines after the first land one row early (start_pos > 0)
PLANTED = "(b > 0 && start_pos > 0) ? start_pos - 1 : start_pos"
#: every line one row early in a cache of 10 positions (start_pos > 0): the references' caches hold 64
SHORT_CACHE = "(cache.size(1) == 10 && start_pos > 0) ? start_pos - 1 : start_pos"


def kernel_file(folder: Path) -> Path:
    return Path(folder) / FOLDER / "op_mini_cache.cpp"


def write(folder: Path, python_test: bool = False, gtest: bool = False) -> Path:
    """Writes the checkout into `folder` as a git repository with the kernel file
    committed (with `python_test`, PYTHON_TEST next to it as test_mini_cache.py; with
    `gtest`, GTEST as op_mini_cache_test.cpp); returns the kernel file."""
    folder = Path(folder)
    (folder / FOLDER).mkdir(parents=True, exist_ok=True)
    (folder / FOLDER / "op_mini_cache.h").write_text(HEADER)
    kernel_file(folder).write_text(SOURCE.replace("START", RIGHT))
    if python_test:
        (folder / FOLDER / "test_mini_cache.py").write_text(PYTHON_TEST)
    if gtest:
        (folder / FOLDER / "op_mini_cache_test.cpp").write_text(GTEST)

    def git(*args):
        subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)

    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=etops", "-c", "user.email=etops@localhost", "commit", "-q", "-m", "mini LLM checkout")
    return kernel_file(folder)


def plant(folder: Path, bug: str = PLANTED) -> None:
    """The planted `bug` (PLANTED, SHORT_CACHE), in the working tree (the base stays the committed file)."""
    kernel_file(folder).write_text(SOURCE.replace("START", bug))
