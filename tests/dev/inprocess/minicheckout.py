"""A miniature ExecuTorch checkout for the ``etops dev`` tests, written by the tests:
``executorch/kernels/portable/functions.yaml`` and three kernel files in
``kernels/portable/cpu/`` sharing a util header of their own
(``cpu/util/mini_broadcast.h``; ``commit_helper`` adds a helper source), and
``op_sum.cpp``, which includes none. The kernels are float32-only (other dtypes are
refused with InvalidArgument: "unsupported", not a finding) and broadcast through
the header; the sum is int16-only (into int64, every dim or the last one reduced),
its accumulator int64, ``sum_source(overflowing=True)`` int16 (a planted overflow
ATen's int64 accumulator does not have). ``add_source(buggy=True)`` is op_add.cpp with a planted bug: the first operand
is indexed as if it were never broadcast along a trailing dim (wrong for a (5, 1)
tensor added to a (5,) one)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FUNCTIONS_YAML = """\
# operators of the miniature checkout (the format of kernels/portable/functions.yaml)
- op: add.out
  kernels:
    - arg_meta: null
      kernel_name: torch::executor::add_out

- op: add.Scalar_out
  kernels:
    - arg_meta: null
      kernel_name: torch::executor::add_scalar_out

- op: mul.out
  kernels:
    - arg_meta: null
      kernel_name: torch::executor::mul_out

- op: floor_divide.Scalar_out
  kernels:
    - arg_meta: null
      kernel_name: torch::executor::floor_divide_scalar_out

- op: sum.IntList_out
  kernels:
    - arg_meta: null
      kernel_name: torch::executor::sum_dim_out
"""

HEADER = """\
#pragma once
// The miniature checkout's own util header: broadcasting for contiguous tensors.
#include <executorch/runtime/kernel/kernel_includes.h>

namespace mini {

using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::aten::Tensor;

// Offset in contiguous `t` of element `linear` of `out`, `t` broadcast to out's shape.
inline size_t broadcast_offset(const Tensor& t, const Tensor& out, size_t linear) {
  size_t offset = 0, stride = 1;
  ssize_t td = t.dim() - 1;
  for (ssize_t d = out.dim() - 1; d >= 0; --d) {
    size_t size = out.size(d);
    size_t index = linear % size;
    linear /= size;
    if (td >= 0) {
      if (t.size(td) != 1) offset += index * stride;
      stride *= t.size(td);
      --td;
    }
  }
  return offset;
}

// Sizes `out` to the broadcast of a and b; false when they do not broadcast.
inline bool resize_to_broadcast(const Tensor& a, const Tensor& b, Tensor& out) {
  SizesType sizes[16];
  ssize_t n = a.dim() > b.dim() ? a.dim() : b.dim();
  for (ssize_t i = 0; i < n; ++i) {
    ssize_t ia = a.dim() - n + i, ib = b.dim() - n + i;
    SizesType sa = ia >= 0 ? a.size(ia) : 1, sb = ib >= 0 ? b.size(ib) : 1;
    if (sa != sb && sa != 1 && sb != 1) return false;
    sizes[i] = sa == 1 ? sb : sa;
  }
  return executorch::runtime::resize_tensor(out, {sizes, static_cast<size_t>(n)}) == executorch::runtime::Error::Ok;
}

inline bool is_float(const Tensor& t) {
  return t.scalar_type() == ScalarType::Float;
}

inline bool float_and_contiguous(const Tensor& t) {
  return t.scalar_type() == ScalarType::Float && executorch::runtime::tensor_is_default_dim_order(t);
}

inline double to_double(const executorch::aten::Scalar& s) {
  if (s.isFloatingPoint()) return s.to<double>();
  if (s.isBoolean()) return s.to<bool>() ? 1.0 : 0.0;
  return static_cast<double>(s.to<int64_t>());
}

}  // namespace mini
"""

ADD = """\
#include <executorch/kernels/portable/cpu/util/mini_broadcast.h>
#include <executorch/runtime/kernel/kernel_includes.h>

namespace torch {
namespace executor {
namespace native {

Tensor& add_out(KernelRuntimeContext& ctx, const Tensor& a, const Tensor& b, const Scalar& alpha, Tensor& out) {
  if (!mini::float_and_contiguous(a) || !mini::float_and_contiguous(b) || !mini::float_and_contiguous(out) ||
      !mini::resize_to_broadcast(a, b, out)) {
    ctx.fail(Error::InvalidArgument);
    return out;
  }
  const float al = static_cast<float>(mini::to_double(alpha));
  const float* x = a.const_data_ptr<float>();
  const float* y = b.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (size_t i = 0; i < static_cast<size_t>(out.numel()); ++i) {
    o[i] = x[FIRST_INDEX] + al * y[mini::broadcast_offset(b, out, i)];
  }
  return out;
}

Tensor& add_scalar_out(KernelRuntimeContext& ctx, const Tensor& a, const Scalar& b, const Scalar& alpha, Tensor& out) {
  if (!mini::float_and_contiguous(a) || !mini::float_and_contiguous(out) ||
      executorch::runtime::resize_tensor(out, a.sizes()) != Error::Ok) {
    ctx.fail(Error::InvalidArgument);
    return out;
  }
  const float v = static_cast<float>(mini::to_double(alpha) * mini::to_double(b));
  const float* x = a.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (size_t i = 0; i < static_cast<size_t>(a.numel()); ++i) o[i] = x[i] + v;
  return out;
}

}  // namespace native
}  // namespace executor
}  // namespace torch
"""

#: the first operand's index, and the planted bug: right unless `a` is broadcast along a trailing dim
CORRECT_INDEX = "mini::broadcast_offset(a, out, i)"
BUGGY_INDEX = "i % a.numel()"

MUL = """\
#include <executorch/kernels/portable/cpu/util/mini_broadcast.h>

namespace torch {
namespace executor {
namespace native {

Tensor& mul_out(KernelRuntimeContext& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  if (!mini::float_and_contiguous(a) || !mini::float_and_contiguous(b) || !mini::float_and_contiguous(out) ||
      !mini::resize_to_broadcast(a, b, out)) {
    ctx.fail(Error::InvalidArgument);
    return out;
  }
  const float* x = a.const_data_ptr<float>();
  const float* y = b.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (size_t i = 0; i < static_cast<size_t>(out.numel()); ++i) {
    o[i] = x[mini::broadcast_offset(a, out, i)] * y[mini::broadcast_offset(b, out, i)];
  }
  return out;
}

}  // namespace native
}  // namespace executor
}  // namespace torch
"""


#: floor_divide.Scalar_out: an overload the wheel has no kernel for and no OpInfo sample
#: reaches (torch.floor_divide with a number gives ATen's floor_divide.default a 0-dim tensor)
FLOOR_DIVIDE = """\
#include <cmath>
#include <executorch/kernels/portable/cpu/util/mini_broadcast.h>

namespace torch {
namespace executor {
namespace native {

Tensor& floor_divide_scalar_out(KernelRuntimeContext& ctx, const Tensor& a, const Scalar& b, Tensor& out) {
  if (!mini::float_and_contiguous(a) || !mini::float_and_contiguous(out) ||
      executorch::runtime::resize_tensor(out, a.sizes()) != Error::Ok) {
    ctx.fail(Error::InvalidArgument);
    return out;
  }
  const float v = static_cast<float>(mini::to_double(b));
  const float* x = a.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (size_t i = 0; i < static_cast<size_t>(a.numel()); ++i) o[i] = std::floor(x[i] / v);
  return out;
}

}  // namespace native
}  // namespace executor
}  // namespace torch
"""

#: sum.IntList_out of int16 into int64 over every dim or the last one (others refused)
SUM = """\
#include <executorch/runtime/kernel/kernel_includes.h>

namespace torch {
namespace executor {
namespace native {

namespace {

// 0: every dim reduced, 1: the last dim only, -1: another reduction (refused)
int reduction_kind(const Tensor& in, optional<ArrayRef<int64_t>> dim_list) {
  const int64_t n = in.dim();
  if (!dim_list.has_value() || dim_list.value().size() == 0 || n == 0) return 0;
  ArrayRef<int64_t> dims = dim_list.value();
  if (dims.size() == 1) {
    const int64_t d = dims[0] < 0 ? dims[0] + n : dims[0];
    return d != n - 1 ? -1 : n == 1 ? 0 : 1;
  }
  if (static_cast<int64_t>(dims.size()) != n || n > 16) return -1;
  bool seen[16] = {false};
  for (int64_t d : dims) {
    d = d < 0 ? d + n : d;
    if (d < 0 || d >= n || seen[d]) return -1;
    seen[d] = true;
  }
  return 0;
}

}  // namespace

Tensor& sum_dim_out(KernelRuntimeContext& ctx, const Tensor& in, optional<ArrayRef<int64_t>> dim_list, bool keepdim,
                    optional<ScalarType> dtype, Tensor& out) {
  (void)dtype;  // the out's dtype says it
  const int kind = reduction_kind(in, dim_list);
  if (kind < 0 || in.dim() > 16 || in.numel() == 0 || in.scalar_type() != ScalarType::Short ||
      out.scalar_type() != ScalarType::Long || !executorch::runtime::tensor_is_default_dim_order(in)) {
    ctx.fail(Error::InvalidArgument);
    return out;
  }
  executorch::aten::SizesType sizes[16];
  size_t n = 0;
  for (ssize_t d = 0; d < in.dim(); ++d) {
    const bool reduced = kind == 0 || d == in.dim() - 1;
    if (!reduced) sizes[n++] = in.size(d);
    else if (keepdim) sizes[n++] = 1;
  }
  if (executorch::runtime::resize_tensor(out, {sizes, n}) != Error::Ok) {
    ctx.fail(Error::InvalidArgument);
    return out;
  }
  const size_t row = kind == 1 ? in.size(in.dim() - 1) : in.numel();
  const int16_t* x = in.const_data_ptr<int16_t>();
  int64_t* o = out.mutable_data_ptr<int64_t>();
  for (size_t r = 0; r < static_cast<size_t>(in.numel()) / row; ++r) {
    ACCUMULATOR acc = 0;
    for (size_t j = 0; j < row; ++j) acc += x[r * row + j];
    o[r] = acc;
  }
  return out;
}

}  // namespace native
}  // namespace executor
}  // namespace torch
"""

#: planted in op_mul.cpp by the gate tests: a write one element past the out
OUT_OF_BOUNDS = ("  return out;\n}\n", "  o[out.numel()] = 0.0f;\n  return out;\n}\n")
#: planted in op_mul.cpp: the dim-order checks dropped (tensors read as if contiguous)
IGNORES_DIM_ORDER = ("mini::float_and_contiguous", "mini::is_float")
#: planted in op_mul.cpp: the process aborted (libc's abort: no ExecuTorch abort, no
#: trapped fault) on inputs larger than any OpInfo sample: the timing's large size
ABORTS_WHEN_LARGE = ("  return out;\n}\n", "  if (out.numel() > 500000) __builtin_abort();\n  return out;\n}\n")
#: planted in op_mul.cpp: a write to address 16 on inputs larger than any OpInfo
#: sample (a fault the call path traps and raises as KernelCrashed)
FAULTS_WHEN_LARGE = ("  return out;\n}\n",
                     "  if (out.numel() > 500000) *reinterpret_cast<volatile float*>(16) = 0.0f;\n  return out;\n}\n")
#: planted in op_add.cpp (add.out): every sum scaled by 1 + 8e-7, about 7 ulps of float32: within OpInfo's
#: float32 tolerance (rtol 1.3e-6), a precision regression against the base's and ATen's half an ulp
IMPRECISE = ("    o[i] = x[", "    o[i] = (1.0f + 8e-7f) * x[")
#: planted in op_add.cpp (add.Scalar_out): ExecuTorch aborts (an ET_CHECK) on a one-element tensor
ABORTS_ON_ONE_ELEMENT = ("  const float v = static_cast<float>(mini::to_double(alpha) * mini::to_double(b));",
                         "  ET_CHECK_MSG(a.numel() != 1, \"planted\");\n"
                         "  const float v = static_cast<float>(mini::to_double(alpha) * mini::to_double(b));")
#: planted in op_mul.cpp: a read of the element one past the first operand (a read fault guarded, unseen unguarded)
READS_PAST_INPUT = ("  return out;\n}\n", "  volatile float past = x[a.numel()];\n  (void)past;\n  return out;\n}\n")
#: planted in op_floor_divide.cpp: a write through a pointer near null (a crash in no tensor)
CRASHES = ("  for (size_t i = 0; i < static_cast<size_t>(a.numel()); ++i) o[i] = std::floor(x[i] / v);",
           "  *reinterpret_cast<volatile float*>(16) = 0.0f;\n"
           "  for (size_t i = 0; i < static_cast<size_t>(a.numel()); ++i) o[i] = std::floor(x[i] / v);")
#: planted in op_mul.cpp, in the base (committed) and the edit: inf where the first operand is below -5 (the base's
#: own wrong value) and, the edit's, where it is above 5: both "non-finite where ATen's are finite"
BASE_WRONG = ("    o[i] = x[mini::broadcast_offset(a, out, i)] * y[mini::broadcast_offset(b, out, i)];",
              "    o[i] = x[mini::broadcast_offset(a, out, i)] < -5 ? __builtin_inff()\n"
              "           : x[mini::broadcast_offset(a, out, i)] * y[mini::broadcast_offset(b, out, i)];")
EDIT_WRONG = ("    o[i] = x[mini::broadcast_offset(a, out, i)] < -5 ? __builtin_inff()\n",
              "    o[i] = x[mini::broadcast_offset(a, out, i)] < -5 || x[mini::broadcast_offset(a, out, i)] > 5 ? __builtin_inff()\n")
#: planted in op_mul.cpp: a loop that never ends when the first operand is (5, 1) (one
#: OpInfo sample: (5, 1) * (5,)); every other input is multiplied as before
SPINS_ON_ONE_SHAPE = ("  const float* x = a.const_data_ptr<float>();\n",
                      "  if (a.dim() == 2 && a.size(0) == 5 && a.size(1) == 1) {\n    volatile bool spin = true;\n"
                      "    while (spin) {\n    }\n  }\n  const float* x = a.const_data_ptr<float>();\n")
#: planted in op_mul.cpp: a loop that never ends on inputs larger than any OpInfo sample (the timing's large size)
SPINS_WHEN_LARGE = ("  return out;\n}\n",
                    "  if (out.numel() > 500000) {\n    volatile bool spin = true;\n    while (spin) {\n    }\n  }\n"
                    "  return out;\n}\n")
#: planted in op_mul.cpp: the loop run twice (a 2x slowdown, same values)
SLOWDOWN = ("  for (size_t i = 0;", "  for (int rep = 0; rep < 2; ++rep)\n  for (size_t i = 0;")


#: a helper source of the miniature checkout and its header (``commit_helper``): the
#: product of op_mul.cpp, defined in ``cpu/util/mini_times.cpp``
TIMES_HEADER = """\
#pragma once
#include <executorch/kernels/portable/cpu/util/mini_broadcast.h>

namespace mini {

// The product of mul.out's elements.
float times(float a, float b);

}  // namespace mini
"""
TIMES_SOURCE = """\
#include <executorch/kernels/portable/cpu/util/mini_times.h>

namespace mini {

float times(float a, float b) {
  return a * b;
}

}  // namespace mini
"""
#: planted in mini_times.cpp: the product doubled (mul.out's results wrong)
DOUBLED_PRODUCT = ("return a * b;", "return 2.0f * a * b;")


def commit_helper(checkout: Path) -> None:
    """Adds the helper source ``cpu/util/mini_times.cpp`` (its header ``mini_times.h``
    includes mini_broadcast.h) to the git checkout, op_mul.cpp calling it, and
    commits (a function the wheel lacks: op_mul.cpp builds only with the helper
    compiled in, as ``etops dev --changed`` does)."""
    import subprocess

    cpu = checkout / "kernels/portable/cpu"
    write_file(cpu / "util/mini_times.h", TIMES_HEADER)
    write_file(cpu / "util/mini_times.cpp", TIMES_SOURCE)
    write_file(cpu / "op_mul.cpp", MUL.replace(
        "#include <executorch/kernels/portable/cpu/util/mini_broadcast.h>",
        "#include <executorch/kernels/portable/cpu/util/mini_times.h>").replace(
        "x[mini::broadcast_offset(a, out, i)] * y[mini::broadcast_offset(b, out, i)]",
        "mini::times(x[mini::broadcast_offset(a, out, i)], y[mini::broadcast_offset(b, out, i)])"))
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(checkout)}
    for args in (["add", "-A"], ["commit", "-q", "-m", "a helper source"]):
        subprocess.run(["git", "-C", str(checkout), *args], check=True, env=env, capture_output=True)


def add_source(buggy: bool = False) -> str:
    return ADD.replace("FIRST_INDEX", BUGGY_INDEX if buggy else CORRECT_INDEX)


def sum_source(overflowing: bool = False) -> str:
    """op_sum.cpp, its accumulator int64, or int16 (`overflowing`)."""
    return SUM.replace("ACCUMULATOR", "int16_t" if overflowing else "int64_t")


def write_file(path: Path, text: str) -> None:
    """Writes only when the content differs (unchanged files keep their mtime)."""
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def write(folder: Path, *, buggy: bool = False, name: str = "executorch") -> Path:
    """Writes the miniature checkout as `folder`/`name`; returns it."""
    checkout = folder / name
    write_file(checkout / "kernels/portable/functions.yaml", FUNCTIONS_YAML)
    write_file(checkout / "kernels/portable/cpu/util/mini_broadcast.h", HEADER)
    write_file(checkout / "kernels/portable/cpu/op_add.cpp", add_source(buggy))
    write_file(checkout / "kernels/portable/cpu/op_mul.cpp", MUL)
    write_file(checkout / "kernels/portable/cpu/op_floor_divide.cpp", FLOOR_DIVIDE)
    write_file(checkout / "kernels/portable/cpu/op_sum.cpp", sum_source())
    return checkout


def git_checkout(folder: Path) -> Path:
    """The miniature checkout as a git repository of its own, committed (the base of
    ``etops dev`` is the file at HEAD)."""
    checkout = write(folder)
    git(checkout, "init", "-q")
    commit(checkout)
    return checkout


def git(checkout: Path, *args: str) -> None:
    """Runs git in `checkout` (a test's identity, no user configuration)."""
    import subprocess

    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(checkout.parent)}
    subprocess.run(["git", "-C", str(checkout), *args], check=True, env=env, capture_output=True)


def commit(checkout: Path) -> None:
    """Commits every change of `checkout` (a new base for ``etops dev``)."""
    git(checkout, "add", "-A")
    git(checkout, "commit", "-q", "-m", "base")


def stable_folder() -> Path:
    """A folder that outlives the test session (same paths, same sources: the
    kernel builds are cache hits on the next run)."""
    return Path(tempfile.gettempdir()) / f"etops-test-checkouts-{os.getuid()}"


def first_line_with(lines: list[str], text: str) -> int:
    """The index of the first of `lines` holding `text` (StopIteration when none does)."""
    return next(i for i, line in enumerate(lines) if text in line)
