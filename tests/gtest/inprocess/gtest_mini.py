"""A miniature ExecuTorch checkout for the etops gtest tests: a kernel YAML, one
kernel (registered through etops.custom, with a planted bug, an abort and a crash),
its test file in upstream's style, and the glue upstream's checkout would provide
(TestUtil.h, supported_features.yaml, a generator), all written here: no test needs
a fetched checkout. ``NATIVE_TEST`` is a test in the style of a kernel folder's own
(``kernels/quantized/test/``): it calls the kernel by its C++ name through the
folder's generated ``NativeFunctions.h``, with a context and without one."""

from __future__ import annotations

from pathlib import Path

OP = "etops_gtest_mini::scale.out"
SCHEMA = "scale.out(Tensor self, float factor, *, Tensor(a!) out) -> Tensor(a!)"

FUNCTIONS_YAML = """\
- func: etops_gtest_mini::scale.out(Tensor self, float factor, *, Tensor(a!) out) -> Tensor(a!)
  kernels:
    - arg_meta: null
      kernel_name: torch::executor::native::scale_out
- func: etops_gtest_mini::unregistered.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  kernels:
    - arg_meta: null
      kernel_name: torch::executor::native::unregistered_out
"""

#: The kernel: out = self * factor for float and double; planted bug: a tensor of
#: more than 4 elements loses its last one. Aborts on a NaN factor, crashes on 13.
KERNEL = r"""
template <typename T>
static void scale(const Tensor& self, double factor, Tensor& out) {
  const T* in = self.const_data_ptr<T>();
  T* o = out.mutable_data_ptr<T>();
  int64_t n = self.numel();
  if (n > 4) n -= 1;  // the planted bug
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(in[i] * factor);
}

Tensor& scale_out(KernelRuntimeContext& ctx, const Tensor& self, double factor, Tensor& out) {
  ET_CHECK_MSG(factor == factor, "factor is NaN");
  if (factor == 7) {  // a refusal: the context fails
    ctx.fail(Error::InvalidArgument);
    return out;
  }
  if (factor == 13) {
    volatile int* nowhere = nullptr;
    *nowhere = 1;
  }
  if (self.scalar_type() == ScalarType::Double) {
    scale<double>(self, factor, out);
  } else {
    scale<float>(self, factor, out);
  }
  return out;
}
"""

#: What ExecuTorch's kernels/test/TestUtil.h gives a test, in a few lines of our own.
TEST_UTIL = """\
#pragma once
#include <executorch/runtime/kernel/kernel_includes.h>
#include <executorch/runtime/platform/runtime.h>
#include <gtest/gtest.h>

class OperatorTest : public ::testing::Test {
 public:
  void SetUp() override { ::executorch::runtime::runtime_init(); }
  void TearDown() override { EXPECT_EQ(context_.failure_state(), ::executorch::runtime::Error::Ok); }

 protected:
  ::executorch::runtime::KernelRuntimeContext context_;
};
"""

FEATURES_YAML = """\
- namespace: op_scale
  dtype_double:
    type: bool
    default: true
    docstring: True if the kernel supports double dtype
"""

#: A generator with upstream's command line: the header from supported_features.yaml,
#: the definition from a supported_features_def.yaml.
GENERATOR = '''\
import sys
import yaml

path = sys.argv[1]
data = yaml.safe_load(open(path)) or []
if "supported_features_def" in path:
    fields = "".join(f"  instance.{e['namespace']}_{k} = {str(v).lower()};\\n" for e in data for k, v in e.items() if k != "namespace")
    print("#include <executorch/kernels/test/supported_features.h>\\n"
          "namespace torch::executor::testing {\\n"
          "SupportedFeatures* SupportedFeatures::get() {\\n"
          "  static SupportedFeatures instance;\\n"
          "  static bool once = [] {\\n" + fields + "  return true; }();\\n"
          "  (void)once;\\n"
          "  return &instance;\\n"
          "}\\n"
          "}  // namespace torch::executor::testing")
else:
    fields = "".join(f"  bool {e['namespace']}_{k} = {str(p['default']).lower()};\\n" for e in data for k, p in e.items() if k != "namespace")
    print("#pragma once\\nnamespace torch::executor::testing {\\nstruct SupportedFeatures {\\n"
          "  static SupportedFeatures* get();\\n" + fields + "};\\n}  // namespace torch::executor::testing")
'''

TEST_FILE = r"""
#include <executorch/kernels/test/FunctionHeaderWrapper.h>  // Declares the operator
#include <executorch/kernels/test/TestUtil.h>
#include <executorch/kernels/test/supported_features.h>

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;
using torch::executor::testing::SupportedFeatures;

// A tensor over a vector of its own (what TensorFactory does upstream).
template <typename T, ScalarType DTYPE>
struct Owned {
  std::vector<T> data;
  std::vector<TensorImpl::SizesType> sizes;
  std::vector<TensorImpl::DimOrderType> order;
  std::vector<TensorImpl::StridesType> strides;
  std::unique_ptr<TensorImpl> impl;
  Owned(std::vector<T> values) : data(std::move(values)) {
    sizes = {static_cast<TensorImpl::SizesType>(data.size())};
    order = {0};
    strides = {1};
    impl = std::make_unique<TensorImpl>(DTYPE, 1, sizes.data(), data.data(), order.data(), strides.data());
  }
  Tensor tensor() { return Tensor(impl.get()); }
};

class OpScaleOutTest : public OperatorTest {
 protected:
  Tensor& op_scale_out(const Tensor& self, double factor, Tensor& out) {
    return torch::executor::etops_gtest_mini::scale_outf(context_, self, factor, out);
  }
};

TEST_F(OpScaleOutTest, SmallTensor) {
  Owned<float, ScalarType::Float> in({1, 2, 3, 4}), out({0, 0, 0, 0});
  Tensor o = out.tensor();
  op_scale_out(in.tensor(), 2.0, o);
  EXPECT_EQ(out.data, (std::vector<float>{2, 4, 6, 8}));
}

TEST_F(OpScaleOutTest, LargeTensor) {
  Owned<float, ScalarType::Float> in({1, 2, 3, 4, 5, 6}), out({0, 0, 0, 0, 0, 0});
  Tensor o = out.tensor();
  op_scale_out(in.tensor(), 3.0, o);
  EXPECT_EQ(out.data, (std::vector<float>{3, 6, 9, 12, 15, 18})) << "the last element was not scaled";
}

TEST_F(OpScaleOutTest, NanFactorDies) {
  Owned<float, ScalarType::Float> in({1}), out({0});
  Tensor o = out.tensor();
  EXPECT_DEATH(op_scale_out(in.tensor(), std::nan(""), o), "factor is NaN");
}

TEST_F(OpScaleOutTest, DoubleInputs) {
  if (!SupportedFeatures::get()->op_scale_dtype_double) {
    GTEST_SKIP() << "this kernel set has no double scale";
  }
  Owned<double, ScalarType::Double> in({0.5, 1.5}), out({0, 0});
  Tensor o = out.tensor();
  op_scale_out(in.tensor(), 4.0, o);
  EXPECT_EQ(out.data, (std::vector<double>{2, 6}));
}

TEST_F(OpScaleOutTest, UnluckyFactorCrashes) {
  Owned<float, ScalarType::Float> in({1}), out({0});
  Tensor o = out.tensor();
  op_scale_out(in.tensor(), 13.0, o);
}

TEST_F(OpScaleOutTest, ZyxAfterTheCrash) {
  Owned<float, ScalarType::Float> in({5}), out({0});
  Tensor o = out.tensor();
  op_scale_out(in.tensor(), -1.0, o);
  EXPECT_EQ(out.data[0], -5.0f);
}

TEST_F(OpScaleOutTest, ZzzUnregisteredOperator) {
  Owned<float, ScalarType::Float> in({1}), out({0});
  Tensor o = out.tensor();
  torch::executor::etops_gtest_mini::unregistered_outf(context_, in.tensor(), o);
}
"""

#: A kernel folder's own test (upstream's kernels/quantized/test/ style): the kernel by
#: its C++ name (the YAML's kernel_name) from the folder's NativeFunctions.h, called
#: with a context and without one (upstream's context-free overloads).
NATIVE_TEST = r"""
#include <executorch/kernels/mini/NativeFunctions.h>  // Declares the kernels
#include <executorch/runtime/kernel/kernel_includes.h>
#include <executorch/runtime/platform/runtime.h>

#include <gtest/gtest.h>

#include <vector>

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;
using torch::executor::native::scale_out;

struct Floats {
  std::vector<float> data;
  TensorImpl::SizesType size;
  TensorImpl::DimOrderType order = 0;
  TensorImpl::StridesType stride = 1;
  TensorImpl impl;
  explicit Floats(std::vector<float> values)
      : data(std::move(values)), size(static_cast<TensorImpl::SizesType>(data.size())),
        impl(ScalarType::Float, 1, &size, data.data(), &order, &stride) {}
  Tensor tensor() { return Tensor(&impl); }
};

TEST(OpScaleNativeTest, WithContext) {
  ::executorch::runtime::runtime_init();
  ::executorch::runtime::KernelRuntimeContext context;
  Floats in({1, 2}), out({0, 0});
  Tensor o = out.tensor();
  torch::executor::native::scale_out(context, in.tensor(), 2.0, o);
  EXPECT_EQ(out.data, (std::vector<float>{2, 4}));
}

TEST(OpScaleNativeTest, WithoutContextLarge) {
  ::executorch::runtime::runtime_init();
  Floats in({1, 2, 3, 4, 5}), out({0, 0, 0, 0, 0});
  Tensor o = out.tensor();
  scale_out(in.tensor(), 2.0, o);
  EXPECT_EQ(out.data, (std::vector<float>{2, 4, 6, 8, 10})) << "the last element was not scaled";
}

TEST(OpScaleNativeTest, WithoutContextRefused) {
  ::executorch::runtime::runtime_init();
  Floats in({1}), out({0});
  Tensor o = out.tensor();
  scale_out(in.tensor(), 7.0, o);  // the kernel fails the context the call made for itself
}

TEST(OpScaleNativeTest, WithoutContextUnregistered) {
  ::executorch::runtime::runtime_init();
  Floats in({1}), out({0});
  Tensor o = out.tensor();
  torch::executor::native::unregistered_out(in.tensor(), o);
}
"""

#: The kernel's fix, for an override: every element scaled.
FIXED_KERNEL = KERNEL.replace("if (n > 4) n -= 1;  // the planted bug", "")


def write(root: Path) -> Path:
    """Writes the miniature checkout under `root`; returns its test file (the
    shared folder's, kernels/test/op_scale_test.cpp)."""
    files = {
        "kernels/mini/functions.yaml": FUNCTIONS_YAML,
        "kernels/mini/op_scale.cpp": KERNEL,
        "kernels/portable/test/supported_features_def.yaml": "- namespace: op_scale\n  dtype_double: false\n",
        "kernels/plain/test/supported_features_def.yaml": "# no override\n",
        "kernels/test/TestUtil.h": TEST_UTIL,
        "kernels/test/supported_features.yaml": FEATURES_YAML,
        "kernels/test/gen_supported_features.py": GENERATOR,
        "kernels/test/op_scale_test.cpp": TEST_FILE,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "kernels/test/op_scale_test.cpp"


def write_folder_test(root: Path, folder: str = "kernels/mini") -> Path:
    """Writes NATIVE_TEST as `folder`'s own test (``<folder>/test/op_scale_test.cpp``)
    in the miniature checkout under `root`; returns it."""
    path = root / folder / "test" / "op_scale_test.cpp"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(NATIVE_TEST.replace("executorch/kernels/mini/", f"executorch/{folder}/"))
    return path
