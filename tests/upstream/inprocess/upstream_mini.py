"""A miniature ExecuTorch checkout for the ``etops report upstream`` tests, all of it
written here (no upstream code): a kernel YAML registering ``aten::sum.IntList_out``,
its kernel source with two planted defects (a float32 accumulator for every dtype,
and an ET_CHECK that aborts on a 0-d input), upstream's test file of it with its
``OperatorTest`` fixture, and small test utilities of our own with upstream's names
(``TensorFactory<ScalarType::...>``, ``EXPECT_TENSOR_CLOSE_WITH_TOL``,
``EXPECT_TENSOR_EQ``, ``ET_EXPECT_KERNEL_FAILURE``) so the generated tests build
against it as they do against a real checkout."""

from __future__ import annotations

from pathlib import Path

OP = "aten::sum.IntList_out"

FUNCTIONS_YAML = """\
- op: sum.IntList_out
  kernels:
    - arg_meta: null
      kernel_name: torch::executor::sum_dim_out
"""

#: The planted kernel: a float accumulator whatever the dtype (float64 sums lose
#: their low bits: [1e8, 1, -1e8] sums to 0), and an abort on a 0-d input.
KERNEL = r"""
template <typename T>
static void total(const Tensor& self, Tensor& out) {
  const T* in = self.const_data_ptr<T>();
  float acc = 0;  // the planted accumulator
  for (int64_t i = 0; i < self.numel(); ++i) acc += static_cast<float>(in[i]);
  out.mutable_data_ptr<T>()[0] = static_cast<T>(acc);
}

Tensor& sum_dim_out(KernelRuntimeContext& ctx, const Tensor& self, std::optional<IntArrayRef> dim, bool keepdim,
                    std::optional<ScalarType> dtype, Tensor& out) {
  (void)ctx; (void)dim; (void)keepdim; (void)dtype;
  ET_CHECK_MSG(self.dim() > 0, "sum of a 0-d tensor");  // the planted abort
  if (self.scalar_type() == ScalarType::Double) {
    total<double>(self, out);
  } else if (self.scalar_type() == ScalarType::Long) {
    total<int64_t>(self, out);
  } else {
    total<float>(self, out);
  }
  return out;
}
"""

#: The kernel with both defects fixed (an accumulator of the input's type, 0-d handled).
FIXED_KERNEL = (KERNEL.replace("float acc = 0;  // the planted accumulator", "T acc = 0;")
                .replace("acc += static_cast<float>(in[i]);", "acc += in[i];")
                .replace('ET_CHECK_MSG(self.dim() > 0, "sum of a 0-d tensor");  // the planted abort', ""))

TEST_UTIL = """\
#pragma once
#include <executorch/runtime/kernel/kernel_includes.h>
#include <executorch/runtime/platform/runtime.h>
#include <gtest/gtest.h>

#define ET_EXPECT_KERNEL_FAILURE(_context, _statement) \\
  do {                                                 \\
    _statement;                                        \\
    expect_failure();                                  \\
  } while (false)

class OperatorTest : public ::testing::Test {
 public:
  void SetUp() override { ::executorch::runtime::runtime_init(); }
  void TearDown() override {
    if (expect_failure_) {
      EXPECT_NE(context_.failure_state(), ::executorch::runtime::Error::Ok);
    } else {
      EXPECT_EQ(context_.failure_state(), ::executorch::runtime::Error::Ok);
    }
  }
  void expect_failure() { expect_failure_ = true; }

 protected:
  ::executorch::runtime::KernelRuntimeContext context_;
  bool expect_failure_ = false;
};
"""

TENSOR_FACTORY = """\
#pragma once
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace torch::executor::testing {

// Dense tensors over storage the factory keeps alive.
template <executorch::aten::ScalarType DTYPE>
class TensorFactory {
 public:
  using ctype = typename executorch::runtime::ScalarTypeToCppType<DTYPE>::type;
  using Impl = executorch::aten::TensorImpl;

  executorch::aten::Tensor make(std::vector<int32_t> sizes, std::vector<ctype> data) {
    auto s = std::make_unique<Storage>();
    s->data = std::move(data);
    s->sizes.assign(sizes.begin(), sizes.end());
    const size_t n = sizes.size();
    s->order.resize(n);
    s->strides.resize(n);
    Impl::StridesType stride = 1;
    for (size_t i = n; i-- > 0;) {
      s->order[i] = static_cast<Impl::DimOrderType>(i);
      s->strides[i] = stride;
      stride *= s->sizes[i];
    }
    s->impl = std::make_unique<Impl>(DTYPE, static_cast<ssize_t>(n), s->sizes.data(), s->data.data(),
                                     s->order.data(), s->strides.data());
    executorch::aten::Tensor t(s->impl.get());
    kept_.push_back(std::move(s));
    return t;
  }

  executorch::aten::Tensor zeros(std::vector<int32_t> sizes) {
    size_t n = 1;
    for (int32_t s : sizes) n *= static_cast<size_t>(s);
    return make(sizes, std::vector<ctype>(n, ctype(0)));
  }

 private:
  struct Storage {
    std::vector<ctype> data;
    std::vector<Impl::SizesType> sizes;
    std::vector<Impl::DimOrderType> order;
    std::vector<Impl::StridesType> strides;
    std::unique_ptr<Impl> impl;
  };
  std::vector<std::unique_ptr<Storage>> kept_;
};

}  // namespace torch::executor::testing
"""

TENSOR_UTIL = """\
#pragma once
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <gtest/gtest.h>

#include <cmath>

namespace etops_mini {

inline double element(const executorch::aten::Tensor& t, ssize_t i) {
  switch (t.scalar_type()) {
    case executorch::aten::ScalarType::Double: return t.const_data_ptr<double>()[i];
    case executorch::aten::ScalarType::Float: return t.const_data_ptr<float>()[i];
    case executorch::aten::ScalarType::Long: return static_cast<double>(t.const_data_ptr<int64_t>()[i]);
    default: return std::nan("");
  }
}

inline ::testing::AssertionResult close(const executorch::aten::Tensor& a, const executorch::aten::Tensor& b,
                                        double rtol, double atol) {
  if (a.scalar_type() != b.scalar_type() || a.numel() != b.numel() || a.dim() != b.dim()) {
    return ::testing::AssertionFailure() << "dtype, rank or size differ";
  }
  for (ssize_t i = 0; i < a.numel(); ++i) {
    const double x = element(a, i), y = element(b, i);
    if (!(std::isnan(x) && std::isnan(y)) && !(std::fabs(x - y) <= atol + rtol * std::fabs(y))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << x << " vs " << y;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace etops_mini

#define EXPECT_TENSOR_CLOSE_WITH_TOL(a, b, rtol, atol) EXPECT_TRUE(::etops_mini::close((a), (b), (rtol), (atol)))
#define EXPECT_TENSOR_EQ(a, b) EXPECT_TRUE(::etops_mini::close((a), (b), 0.0, 0.0))
"""

TEST_FILE = r"""
#include <executorch/kernels/test/FunctionHeaderWrapper.h>  // Declares the operator
#include <executorch/kernels/test/TestUtil.h>
#include <executorch/runtime/core/exec_aten/testing_util/tensor_factory.h>
#include <executorch/runtime/core/exec_aten/testing_util/tensor_util.h>

#include <gtest/gtest.h>

#include <limits>
#include <optional>

using executorch::aten::ArrayRef;
using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using torch::executor::testing::TensorFactory;

class OpSumOutTest : public OperatorTest {
 protected:
  Tensor& op_sum_intlist_out(const Tensor& self, std::optional<ArrayRef<int64_t>> dim, bool keepdim,
                             std::optional<ScalarType> dtype, Tensor& out) {
    return torch::executor::aten::sum_outf(context_, self, dim, keepdim, dtype, out);
  }
};

TEST_F(OpSumOutTest, SmallFloat) {
  TensorFactory<ScalarType::Float> tf;
  Tensor self = tf.make({2}, {1.5f, 2.5f});
  Tensor out = tf.zeros({});
  int64_t dim[] = {0};
  op_sum_intlist_out(self, ArrayRef<int64_t>(dim, 1), false, std::nullopt, out);
  EXPECT_TENSOR_EQ(out, tf.make({}, {4.0f}));
}
"""


def write(root: Path) -> Path:
    """Writes the miniature checkout under `root`; returns its root."""
    files = {
        "kernels/portable/functions.yaml": FUNCTIONS_YAML,
        "kernels/portable/cpu/op_sum.cpp": KERNEL,
        "kernels/test/TestUtil.h": TEST_UTIL,
        "kernels/test/op_sum_test.cpp": TEST_FILE,
        "runtime/core/exec_aten/testing_util/tensor_factory.h": TENSOR_FACTORY,
        "runtime/core/exec_aten/testing_util/tensor_util.h": TENSOR_UTIL,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
    return root
