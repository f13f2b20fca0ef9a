// floor_et.cpp - the minimal C++ needed to call ExecuTorch's boxed aten::add.out:
// TensorImpls over borrowed DLTensors, five EValues, a KernelRuntimeContext.
#include "floor_et.h"

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <time.h>

namespace et = ::executorch::runtime;
namespace eta = ::executorch::aten;
using et::EValue;
using TensorImpl = et::etensor::TensorImpl;

namespace {

constexpr int kMaxDim = 16;
const uint8_t kIdentity[kMaxDim] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

struct Shape {
  int32_t sizes[kMaxDim];
  int32_t strides[kMaxDim];
};

inline TensorImpl impl_of(const DLTensor* t, Shape* s) {
  const int n = t->ndim;
  int32_t stride = 1;
  for (int i = n - 1; i >= 0; i--) {  // contiguous assumed: strides from sizes
    s->sizes[i] = static_cast<int32_t>(t->shape[i]);
    s->strides[i] = stride;
    stride *= s->sizes[i];
  }
  return TensorImpl(eta::ScalarType::Float, n, s->sizes,
                    static_cast<char*>(t->data) + t->byte_offset,
                    const_cast<uint8_t*>(kIdentity), s->strides,
                    et::TensorShapeDynamism::STATIC);
}

}  // namespace

extern "C" {

void* floor_lookup_add_out(int ndim) {
  et::TensorMeta metas[3];
  for (auto& m : metas) {
    m = et::TensorMeta(eta::ScalarType::Float,
                       et::Span<eta::DimOrderType>(const_cast<uint8_t*>(kIdentity), ndim));
  }
  auto r = et::get_op_function_from_registry("aten::add.out",
                                             et::Span<const et::TensorMeta>(metas, 3));
  return r.ok() ? reinterpret_cast<void*>(r.get()) : nullptr;
}

int floor_add(void* fn, const DLTensor* a, const DLTensor* b, const DLTensor* out) {
  Shape sa, sb, so;
  TensorImpl ia = impl_of(a, &sa), ib = impl_of(b, &sb), io = impl_of(out, &so);
  EValue self{eta::Tensor(&ia)}, other{eta::Tensor(&ib)}, alpha{static_cast<int64_t>(1)},
      o{eta::Tensor(&io)};
  EValue* stack[5] = {&self, &other, &alpha, &o, &o};
  et::KernelRuntimeContext ctx;
  reinterpret_cast<et::OpFunction>(fn)(ctx, et::Span<EValue*>(stack, 5));
  return static_cast<int>(ctx.failure_state());
}

double floor_add_loop(void* fn, const DLTensor* a, const DLTensor* b, const DLTensor* out,
                      long iters, int* error) {
  Shape sa, sb, so;
  TensorImpl ia = impl_of(a, &sa), ib = impl_of(b, &sb), io = impl_of(out, &so);
  EValue self{eta::Tensor(&ia)}, other{eta::Tensor(&ib)}, alpha{static_cast<int64_t>(1)},
      o{eta::Tensor(&io)};
  EValue* stack[5] = {&self, &other, &alpha, &o, &o};
  auto op = reinterpret_cast<et::OpFunction>(fn);
  *error = 0;
  timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < iters; i++) {
    et::KernelRuntimeContext ctx;
    op(ctx, et::Span<EValue*>(stack, 5));
    if (ctx.failure_state() != et::Error::Ok) {
      *error = static_cast<int>(ctx.failure_state());
      break;
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
}

}  // extern "C"
