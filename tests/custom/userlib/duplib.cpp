// Registers a kernel the wheel already has (aten::add.out): ExecuTorch would abort
// the process on load; etops.load_library must refuse it first.
#include <executorch/runtime/kernel/kernel_includes.h>
#include <executorch/runtime/kernel/operator_registry.h>

using executorch::runtime::EValue;
using executorch::runtime::Kernel;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::Span;

namespace {
void fake_add(KernelRuntimeContext& ctx, Span<EValue*>) { ctx.fail(executorch::runtime::Error::NotImplemented); }
void fine(KernelRuntimeContext& ctx, Span<EValue*>) { ctx.fail(executorch::runtime::Error::NotImplemented); }
const Kernel kKernels[] = {Kernel("duplib::fine.out", fine), Kernel("aten::add.out", fake_add)};
const auto kRegistered = executorch::runtime::register_kernels({kKernels, 2});
}  // namespace
