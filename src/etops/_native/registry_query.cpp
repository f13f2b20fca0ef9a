// registry_query.cpp - the registry queries of the bridge: the registered kernels,
// ExecuTorch's kernel selection for a list of tensor metas, kernel key strings, and
// the names of ExecuTorch's Error codes. (The registry's generation counter, read on
// every call, stays with the call path in bridge.cpp.)
//
// Touches ExecuTorch's types (as bridge.cpp and backends.cpp do); imports nothing of
// the call path.

#include "etops_bridge.h"

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <cstdint>

namespace et = ::executorch::runtime;
namespace eta = ::executorch::aten;

namespace {

const char* error_name(et::Error e) {
  switch (e) {
    case et::Error::Ok: return "Ok";
    case et::Error::Internal: return "Internal";
    case et::Error::InvalidState: return "InvalidState";
    case et::Error::EndOfMethod: return "EndOfMethod";
    case et::Error::AlreadyLoaded: return "AlreadyLoaded";
    case et::Error::NotSupported: return "NotSupported";
    case et::Error::NotImplemented: return "NotImplemented";
    case et::Error::InvalidArgument: return "InvalidArgument";
    case et::Error::InvalidType: return "InvalidType";
    case et::Error::OperatorMissing: return "OperatorMissing";
    case et::Error::RegistrationExceedingMaxKernels: return "RegistrationExceedingMaxKernels";
    case et::Error::RegistrationAlreadyRegistered: return "RegistrationAlreadyRegistered";
    case et::Error::NotFound: return "NotFound";
    case et::Error::MemoryAllocationFailed: return "MemoryAllocationFailed";
    case et::Error::AccessFailed: return "AccessFailed";
    case et::Error::InvalidProgram: return "InvalidProgram";
    case et::Error::InvalidExternalData: return "InvalidExternalData";
    case et::Error::OutOfResources: return "OutOfResources";
    case et::Error::DelegateInvalidCompatibility: return "DelegateInvalidCompatibility";
    case et::Error::DelegateMemoryAllocationFailed: return "DelegateMemoryAllocationFailed";
    case et::Error::DelegateInvalidHandle: return "DelegateInvalidHandle";
    default: return "Unknown";
  }
}

void fill_metas(int n, const int8_t* dtypes, const uint8_t* ndims,
                const uint8_t* const* dim_orders, et::TensorMeta* metas) {
  for (int i = 0; i < n; i++) {
    metas[i] = et::TensorMeta(
        static_cast<eta::ScalarType>(dtypes[i]),
        et::Span<eta::DimOrderType>(const_cast<uint8_t*>(dim_orders[i]), ndims[i]));
  }
}

constexpr int kMaxKeyTensors = 16;  // what ExecuTorch's key buffer is sized for

}  // namespace

extern "C" {

size_t etb_kernel_count(void) { return et::get_registered_kernels().size(); }

int etb_kernel_at(size_t index, const char** name, const char** key, etb_kernel_fn* fn) {
  auto kernels = et::get_registered_kernels();
  if (index >= kernels.size()) return ETB_ERR_INVALID_ARGUMENT;
  const et::Kernel& k = kernels[index];
  *name = k.name_;
  *key = k.kernel_key_.is_fallback() ? nullptr : k.kernel_key_.data();
  *fn = reinterpret_cast<etb_kernel_fn>(k.op_);
  return ETB_OK;
}

int etb_lookup(const char* name, int ntensors, const int8_t* dtypes, const uint8_t* ndims,
               const uint8_t* const* dim_orders, etb_kernel_fn* fn) {
  if (ntensors > kMaxKeyTensors) {
    // ExecuTorch cannot build a key for this many tensors: only a fallback can match.
    ntensors = 0;
  }
  et::TensorMeta metas[kMaxKeyTensors];
  fill_metas(ntensors, dtypes, ndims, dim_orders, metas);
  auto result = et::get_op_function_from_registry(
      name, et::Span<const et::TensorMeta>(metas, static_cast<size_t>(ntensors)));
  if (!result.ok()) return static_cast<int>(result.error());
  *fn = reinterpret_cast<etb_kernel_fn>(result.get());
  return ETB_OK;
}

int etb_make_key(int ntensors, const int8_t* dtypes, const uint8_t* ndims,
                 const uint8_t* const* dim_orders, char* buf, size_t buf_size) {
  if (ntensors > kMaxKeyTensors) return static_cast<int>(et::Error::InvalidArgument);
  et::TensorMeta metas[kMaxKeyTensors];
  fill_metas(ntensors, dtypes, ndims, dim_orders, metas);
  return static_cast<int>(et::internal::make_kernel_key_string(
      et::Span<const et::TensorMeta>(metas, static_cast<size_t>(ntensors)), buf, buf_size));
}

const char* etb_error_name(int32_t error) {
  if (error == ETB_ERR_ABORTED) return "Aborted";
  if (error == ETB_ERR_CXX_EXCEPTION) return "CxxException";
  if (error == ETB_ERR_CRASHED) return "Crashed";
  return error_name(static_cast<et::Error>(error));
}

}  // extern "C"

