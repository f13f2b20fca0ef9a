"""etops gtest on a test of a kernel that registers itself (upstream's
extension/llm/custom_ops/op_sdpa_test.cpp, op_tile_crop_test.cpp, ...): the
self-registering source next to the header the test includes is not compiled
into the test (its static registrations would abort the process that loaded the
wheel's LLM library); the test links the library that registered those kernels,
so it runs the wheel's kernels. And a C source next to a header a helper source
includes is compiled with the test (spinquant's FFHT reference, dumb_fht.c).
The miniature LLM checkout is the dev tests' (tests/dev/minillm.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "dev"))

import minillm  # noqa: E402
from googletest_available import needs_googletest  # noqa: E402
from etops.custom import cache_dir  # noqa: E402
from etops.checkout.layout import include_root  # noqa: E402
from etops.gtest import layout  # noqa: E402

#: upstream's style: the kernel's C++ function, declared by the kernel's own header, called directly
TEST = r"""
#include <executorch/extension/llm/custom_ops/op_mini_cache.h>
#include <executorch/runtime/platform/runtime.h>

#include <gtest/gtest.h>

#include <vector>

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;

TEST(MiniCacheTest, WritesTheRowsAtStartPos) {
  executorch::runtime::runtime_init();
  std::vector<float> value = {1, 2, 3, 4}, cache(8, 0.0f), out(8, 0.0f);
  TensorImpl::SizesType value_sizes[] = {1, 2, 1, 2}, cache_sizes[] = {1, 4, 1, 2};
  TensorImpl::DimOrderType order[] = {0, 1, 2, 3};
  TensorImpl::StridesType value_strides[] = {4, 2, 2, 1}, cache_strides[] = {8, 2, 2, 1};
  TensorImpl v(ScalarType::Float, 4, value_sizes, value.data(), order, value_strides);
  TensorImpl c(ScalarType::Float, 4, cache_sizes, cache.data(), order, cache_strides);
  TensorImpl o(ScalarType::Float, 4, cache_sizes, out.data(), order, cache_strides);
  Tensor value_t(&v), cache_t(&c), out_t(&o);
  executorch::runtime::KernelRuntimeContext context;
  torch::executor::native::update_cache_out(context, value_t, cache_t, 1, out_t);
  EXPECT_EQ(context.failure_state(), executorch::runtime::Error::Ok);
  EXPECT_EQ(cache, (std::vector<float>{0, 0, 1, 2, 3, 4, 0, 0}));
}
"""


def _checkout(root: Path) -> Path:
    kernel = minillm.write(root)
    # the checkout's own copy of the kernel writes every row one place late: a test compiled with it fails
    kernel.write_text(minillm.SOURCE.replace("START", "start_pos + 1"))
    test = kernel.with_name("op_mini_cache_test.cpp")
    test.write_text(TEST)
    return test


def test_a_self_registering_source_is_linked_from_its_library_not_compiled(tmp_path):
    test = _checkout(tmp_path)
    described = layout.describe(test, tmp_path.resolve(), include_root(tmp_path.resolve(), cache_dir()))
    assert described.registering == (test.with_name("op_mini_cache.cpp"),)
    assert described.helpers == ()


def test_a_c_source_next_to_a_header_a_helper_includes_is_compiled_with_the_test(tmp_path):
    folder = tmp_path / "extension" / "llm" / "custom_ops"
    (folder / "ffht").mkdir(parents=True)
    (folder / "ffht" / "plain.h").write_text("#pragma once\nvoid plain(float* x);\n")
    (folder / "ffht" / "plain.c").write_text('#include "plain.h"\nvoid plain(float* x) { x[0] = 0; }\n')
    (folder / "impl.h").write_text("#pragma once\nvoid impl();\n")
    (folder / "impl.cpp").write_text("#include <executorch/extension/llm/custom_ops/ffht/plain.h>\nvoid impl() {}\n")
    test = folder / "op_plain_test.cpp"
    test.write_text("#include <executorch/extension/llm/custom_ops/impl.h>\n")
    described = layout.describe(test, tmp_path.resolve(), include_root(tmp_path.resolve(), cache_dir()))
    assert described.helpers == ((folder / "impl.cpp").resolve(), (folder / "ffht" / "plain.c").resolve())


@needs_googletest
def test_the_test_runs_the_kernel_of_the_library_that_registered_it(tmp_path):
    test = _checkout(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "etops", "gtest", str(test), "--json", str(tmp_path / "gtest.json")],
                          capture_output=True, text=True, timeout=900)
    result = json.loads((tmp_path / "gtest.json").read_text())
    [file] = result["files"]
    assert file["build_error"] is None, file["build_error"]
    assert [(t["name"], t["status"]) for t in file["tests"]] == [("MiniCacheTest.WritesTheRowsAtStartPos", "passed")]
    assert proc.returncode == 0, proc.stdout + proc.stderr
