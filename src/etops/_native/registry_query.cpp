// registry_query.cpp - the registry queries of the bridge: the registered kernels,
// ExecuTorch's kernel selection for a list of tensor metas, kernel key strings, and
// the names of ExecuTorch's Error codes; and the proof that the numbers
// etops_bridge.h spells out (Errors, ScalarTypes) are ExecuTorch's. (The registry's
// generation counter, kernel_select.c's cache key, is here too.)
//
// Touches ExecuTorch's types (as bridge.cpp and backends.cpp do); imports nothing of
// the call path.

#include "etops_bridge.h"

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <atomic>
#include <cstdint>

namespace et = ::executorch::runtime;
namespace eta = ::executorch::aten;

// The numbers etops_bridge.h spells out are ExecuTorch's.
static_assert(ETB_OK == static_cast<int>(et::Error::Ok), "ETB_OK");
static_assert(ETB_ERR_INVALID_STATE == static_cast<int>(et::Error::InvalidState), "ETB_ERR_INVALID_STATE");
static_assert(ETB_ERR_NOT_SUPPORTED == static_cast<int>(et::Error::NotSupported), "ETB_ERR_NOT_SUPPORTED");
static_assert(ETB_ERR_INVALID_ARGUMENT == static_cast<int>(et::Error::InvalidArgument), "ETB_ERR_INVALID_ARGUMENT");
static_assert(ETB_ERR_INVALID_TYPE == static_cast<int>(et::Error::InvalidType), "ETB_ERR_INVALID_TYPE");
static_assert(ETB_ERR_NOT_FOUND == static_cast<int>(et::Error::NotFound), "ETB_ERR_NOT_FOUND");
static_assert(ETB_ERR_MEMORY_ALLOCATION_FAILED == static_cast<int>(et::Error::MemoryAllocationFailed),
              "ETB_ERR_MEMORY_ALLOCATION_FAILED");
#define ETOPS_SAME_DTYPE(etb, et_name) \
  static_assert(etb == static_cast<int>(eta::ScalarType::et_name), #etb " is ScalarType::" #et_name);
ETOPS_SAME_DTYPE(ETB_DTYPE_BYTE, Byte)
ETOPS_SAME_DTYPE(ETB_DTYPE_CHAR, Char)
ETOPS_SAME_DTYPE(ETB_DTYPE_SHORT, Short)
ETOPS_SAME_DTYPE(ETB_DTYPE_INT, Int)
ETOPS_SAME_DTYPE(ETB_DTYPE_LONG, Long)
ETOPS_SAME_DTYPE(ETB_DTYPE_HALF, Half)
ETOPS_SAME_DTYPE(ETB_DTYPE_FLOAT, Float)
ETOPS_SAME_DTYPE(ETB_DTYPE_DOUBLE, Double)
ETOPS_SAME_DTYPE(ETB_DTYPE_COMPLEX_FLOAT, ComplexFloat)
ETOPS_SAME_DTYPE(ETB_DTYPE_COMPLEX_DOUBLE, ComplexDouble)
ETOPS_SAME_DTYPE(ETB_DTYPE_BOOL, Bool)
ETOPS_SAME_DTYPE(ETB_DTYPE_BFLOAT16, BFloat16)
ETOPS_SAME_DTYPE(ETB_DTYPE_FLOAT8_E5M2, Float8_e5m2)
ETOPS_SAME_DTYPE(ETB_DTYPE_FLOAT8_E4M3FN, Float8_e4m3fn)
ETOPS_SAME_DTYPE(ETB_DTYPE_FLOAT8_E5M2FNUZ, Float8_e5m2fnuz)
ETOPS_SAME_DTYPE(ETB_DTYPE_FLOAT8_E4M3FNUZ, Float8_e4m3fnuz)
ETOPS_SAME_DTYPE(ETB_DTYPE_UINT16, UInt16)
ETOPS_SAME_DTYPE(ETB_DTYPE_UINT32, UInt32)
ETOPS_SAME_DTYPE(ETB_DTYPE_UINT64, UInt64)
#undef ETOPS_SAME_DTYPE

namespace {

// Bumped by every registry edit etops makes (read on every call: kernel_select.c's cache).
std::atomic<uint64_t> g_generation{1};

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

uint64_t etb_registry_generation(void) { return g_generation.load(std::memory_order_acquire); }

void etb_registry_touch(void) { g_generation.fetch_add(1, std::memory_order_acq_rel); }

const char* etb_error_name(int32_t error) {
  if (error == ETB_ERR_ABORTED) return "Aborted";
  if (error == ETB_ERR_CXX_EXCEPTION) return "CxxException";
  if (error == ETB_ERR_CRASHED) return "Crashed";
  return error_name(static_cast<et::Error>(error));
}

}  // extern "C"

