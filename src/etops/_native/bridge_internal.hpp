// bridge_internal.hpp - what the C++ files of the bridge share (never included from C).
//
// bridge.cpp owns the stack of EValues built from etb_value slots, the per-thread
// log capture and the platform layer; backends.cpp (delegates) runs a backend on
// the same stack instead of a kernel, so both call paths convert values once, here.
#ifndef ETOPS_BRIDGE_INTERNAL_HPP
#define ETOPS_BRIDGE_INTERNAL_HPP

#include "etops_bridge.h"

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/core/span.h>

#include <cstdlib>
#include <vector>

namespace etops_bridge {

namespace et = ::executorch::runtime;

// A MemoryAllocator on malloc that never runs out and frees everything it handed
// out on reset() or destruction. Kernels get one per call for scratch; a delegate
// keeps one for its whole life (backends place their handle's objects in it).
class MallocAllocator final : public et::MemoryAllocator {
 public:
  MallocAllocator() : et::MemoryAllocator(0, nullptr) {}
  ~MallocAllocator() override { reset(); }
  MallocAllocator(const MallocAllocator&) = delete;
  MallocAllocator& operator=(const MallocAllocator&) = delete;
  void* allocate(size_t size, size_t alignment) override {
    if (alignment < sizeof(void*)) alignment = sizeof(void*);
    void* p = nullptr;
    if (posix_memalign(&p, alignment, size == 0 ? 1 : size) != 0) return nullptr;
    blocks_.push_back(p);
    return p;
  }
  void reset() override {
    for (void* p : blocks_) std::free(p);
    blocks_.clear();
  }

 private:
  std::vector<void*> blocks_;
};

// What runs on a built stack: a kernel (bridge.cpp) or a backend's execute
// (backends.cpp). `temp` is the call's scratch allocator. Returns the call's Error.
using StackRunner = et::Error (*)(void* self, et::Span<et::EValue*> stack, et::MemoryAllocator& temp);

// Builds the EValue stack for `values` (see etops_bridge.h), runs `run` on it with
// the log captured under `name`, then reports resized tensors and fresh return
// values back into the slots. Returns the ExecuTorch Error of the run (etops_bridge.h's
// convention). Never aborts on anything the caller validated.
int call_on_stack(const char* name, etb_value* values, int nvalues, StackRunner run, void* self);

// Thrown by ExecuTorch's abort (the platform layer's, which etops owns) while an
// etops call runs ExecuTorch code on this thread; caught where that call started.
struct KernelAbort {};

// One step of a backend (is_available, init, destroy): returns its Error.
using BackendStep = et::Error (*)(void* self);

// Runs `step` as an etops call named `name`: ExecuTorch's log captured into the call
// log, an abort unwound (ETB_ERR_ABORTED) and a C++ exception caught
// (ETB_ERR_CXX_EXCEPTION). Returns the bridge's status; a failure is the thread's
// last (etb_last_failure).
int run_captured(const char* name, BackendStep step, void* self);

// A call named `name` refused before any ExecuTorch code ran (no such backend, no
// memory): `error` (not Ok) becomes the thread's last failure, of kind
// ETB_FAILURE_REFUSED. Returns it as the bridge's status.
int refused(const char* name, et::Error error);

// An ExecuTorch Error as the bridge's int return code (etops_bridge.h).
int status_of(et::Error error);

}  // namespace etops_bridge

#endif  // ETOPS_BRIDGE_INTERNAL_HPP
