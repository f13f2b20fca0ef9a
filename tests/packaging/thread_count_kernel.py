"""The one API difference between the verified executorch versions (docs/installation.md,
'Verified versions'): 1.5.1's runtime/kernel/thread_parallel_interface.h declares
executorch::extension::get_thread_count(), which 1.5.0's lacks. A custom kernel calling
it builds and runs against 1.5.1 or later and, against 1.5.0, fails to build with a
BuildError naming the function (the compiler's message), never at load or call time.
Run by tests/packaging/wheel_travel.sh in the installed environment."""

from __future__ import annotations

import importlib.metadata

import torch

import etops
from etops.errors import BuildError

SOURCE = r"""
#include <executorch/runtime/kernel/thread_parallel_interface.h>

Tensor& thread_count_out(KernelRuntimeContext& ctx, const Tensor& a, Tensor& out) {
  out.mutable_data_ptr<float>()[0] = static_cast<float>(executorch::extension::get_thread_count());
  return out;
}
"""

version = importlib.metadata.version("executorch").split("+")[0]
has_thread_count = tuple(int(part) for part in version.split(".")[:3]) >= (1, 5, 1)
try:
    etops.custom_op("compat::thread_count(Tensor a) -> Tensor", SOURCE, function="thread_count_out")
except BuildError as error:
    assert not has_thread_count, f"executorch {version} has get_thread_count, yet: {error}"
    assert "get_thread_count" in str(error), error
    print(f"executorch {version}: a kernel calling get_thread_count() is refused at build time, naming it")
else:
    assert has_thread_count, f"executorch {version} lacks get_thread_count, yet the kernel built"
    out = torch.zeros(1)
    etops.registry().get_kernel("compat::thread_count.out")(torch.zeros(1), out=out)
    assert out.item() >= 1, out
    print(f"executorch {version}: a kernel calling get_thread_count() runs ({int(out.item())} threads)")
