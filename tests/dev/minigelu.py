"""A miniature optimized-kernels checkout with ARM-only code, written by the tests
(this project's own gelu, not upstream's): ``kernels/optimized/optimized.yaml`` and
``kernels/optimized/cpu/op_gelu.cpp``, float32 only (other dtypes refused with
InvalidArgument, in the base as in the edit), whose last step (the halving of
``x * (1 + erf(x / sqrt 2))``, or its tanh form) is a NEON loop inside
``#if defined(__aarch64__)`` and a plain loop elsewhere. A git repository committed
unplanted (``etops dev``'s base is the file at HEAD); ``plant(checkout, where)``
edits the working tree: the halving's 0.5 made 0.55 in the aarch64 branch (compiled
on aarch64 only) or in the portable one.

Used by tests/aarch64/lane_dev.py (inside the arm64 root) and
tests/dev/test_dev_arm_only_code.py (x86_64)."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "inprocess"))  # minicheckout's git helpers

from minicheckout import commit, git, write_file  # noqa: E402

OPTIMIZED_YAML = """\
# the miniature optimized checkout's operators (the format of kernels/optimized/optimized.yaml)
- op: gelu.out
  kernels:
    - arg_meta: null
      kernel_name: torch::executor::opt_gelu_out
"""

GELU = """\
// The miniature optimized gelu (etops' aarch64 tests): float32 only, the halving of
// x * (1 + erf(x / sqrt 2)) (or its tanh form) in NEON on aarch64.
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

#include <cmath>
#include <string_view>

#include <executorch/runtime/kernel/kernel_includes.h>

namespace torch {
namespace executor {
namespace native {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;

namespace {

// x * (1 + erf(x / sqrt 2)), or x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
float twice_gelu(float x, bool tanh_form) {
  if (tanh_form) {
    return x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
  }
  return x * (1.0f + std::erf(x * 0.70710678118f));
}

}  // namespace

Tensor& opt_gelu_out(KernelRuntimeContext& ctx, const Tensor& in, std::string_view approximate, Tensor& out) {
  ET_KERNEL_CHECK(ctx, in.scalar_type() == ScalarType::Float && out.scalar_type() == ScalarType::Float,
                  InvalidArgument, out);
  const bool tanh_form = approximate == "tanh";
  ET_KERNEL_CHECK(ctx, tanh_form || approximate == "none", InvalidArgument, out);
  ET_KERNEL_CHECK(ctx, resize_tensor(out, in.sizes()) == Error::Ok, InvalidArgument, out);
  const float* x = in.const_data_ptr<float>();
  float* y = out.mutable_data_ptr<float>();
  const size_t n = in.numel();
  for (size_t i = 0; i < n; ++i) {
    y[i] = twice_gelu(x[i], tanh_form);
  }
  size_t i = 0;
#if defined(__aarch64__)
  const float32x4_t half = vdupq_n_f32(NEON_HALF);
  for (; i + 4 <= n; i += 4) {
    vst1q_f32(y + i, vmulq_f32(vld1q_f32(y + i), half));
  }
#endif
  for (; i < n; ++i) {
    y[i] *= PORTABLE_HALF;
  }
  return out;
}

}  // namespace native
}  // namespace executor
}  // namespace torch
"""

#: where a plant goes: the 0.5 of the NEON loop (aarch64 only) or of the portable one
PLANTS = {"aarch64": "NEON_HALF", "portable": "PORTABLE_HALF"}
#: the planted halving (gelu 10 % too large)
PLANTED = "0.55f"


def gelu_source(planted_in: str | None = None) -> str:
    """op_gelu.cpp, the halving planted (PLANTED) in branch `planted_in` ("aarch64",
    "portable") or in neither (None)."""
    if planted_in is not None and planted_in not in PLANTS:
        raise ValueError(f"gelu_source: argument 'planted_in' must be one of {sorted(PLANTS)} or None, got {planted_in!r}")
    text = GELU
    for branch, marker in PLANTS.items():
        text = text.replace(marker, PLANTED if branch == planted_in else "0.5f")
    return text


def write(folder: pathlib.Path, name: str = "arm-checkout") -> pathlib.Path:
    """The checkout as `folder`/`name` (which must not exist), a git repository with
    the unplanted file at HEAD and in the working tree; returns it. Not named
    executorch: etops links a checkout into its cache as executorch/ for the includes."""
    checkout = folder / name
    if checkout.exists():
        raise FileExistsError(f"minigelu.write: {checkout} exists already")
    write_file(checkout / "kernels/optimized/optimized.yaml", OPTIMIZED_YAML)
    write_file(checkout / "kernels/optimized/cpu/op_gelu.cpp", gelu_source())
    git(checkout, "init", "-q")
    commit(checkout)
    return checkout


def plant(checkout: pathlib.Path, planted_in: str | None) -> pathlib.Path:
    """The working tree's op_gelu.cpp planted in branch `planted_in` (None: as at
    HEAD); returns its path."""
    path = checkout / "kernels/optimized/cpu/op_gelu.cpp"
    write_file(path, gelu_source(planted_in))
    return path
