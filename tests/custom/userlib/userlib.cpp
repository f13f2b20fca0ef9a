// Registers userlib::triple.out from a static initialiser, as ExecuTorch kernel
// libraries do.
#include <executorch/runtime/kernel/kernel_includes.h>
#include <executorch/runtime/kernel/operator_registry.h>

using executorch::aten::Tensor;
using executorch::runtime::EValue;
using executorch::runtime::Kernel;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::Span;

namespace {
// userlib::triple.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)
void triple_out(KernelRuntimeContext& ctx, Span<EValue*> stack) {
  const Tensor& x = stack[0]->toTensor();
  Tensor& out = stack[1]->toTensor();
  const float* in = x.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < x.numel(); i++) o[i] = 3 * in[i];
}
const Kernel kKernels[] = {Kernel("userlib::triple.out", triple_out)};
const auto kRegistered = executorch::runtime::register_kernels({kKernels, 1});
}  // namespace
