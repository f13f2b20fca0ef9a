// backends.cpp - ExecuTorch's backend registry and delegates run outside a Method.
//
// A delegate here is what a Method builds for one BackendDelegate of a program: the
// backend's handle from init() on the processed blob and compile specs, with a
// runtime allocator and a NamedDataMap that live as long as the handle. execute()
// runs on the stack bridge.cpp builds from etb_value slots (inputs, then outputs),
// exactly the span a Method passes. Nothing here aborts: a missing backend, an
// unavailable one and a rejected blob come back as Errors.

#include "bridge_internal.hpp"

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/freeable_buffer.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/platform/log.h>

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace et = ::executorch::runtime;
using et::EValue;
using etops_bridge::status_of;

namespace {

// Named data (weights kept outside the processed blob) over caller-owned buffers.
class NamedData final : public et::NamedDataMap {
 public:
  struct Entry {
    std::string key;
    const void* data;
    size_t size;
  };

  void add(const char* key, const void* data, size_t size) { entries_.push_back({key, data, size}); }

  et::Result<const et::TensorLayout> get_tensor_layout(std::string_view key) const override {
    (void)key;
    return et::Error::NotImplemented;  // the lowered module's store keeps raw bytes only
  }

  et::Result<et::FreeableBuffer> get_data(std::string_view key) const override {
    const Entry* e = find(key);
    if (e == nullptr) return et::Error::NotFound;
    return et::FreeableBuffer(e->data, e->size, nullptr);
  }

  et::Error load_data_into(std::string_view key, void* buffer, size_t size) const override {
    const Entry* e = find(key);
    if (e == nullptr) return et::Error::NotFound;
    if (size != e->size) return et::Error::InvalidArgument;
    std::memcpy(buffer, e->data, size);
    return et::Error::Ok;
  }

  et::Result<uint32_t> get_num_keys() const override { return static_cast<uint32_t>(entries_.size()); }

  et::Result<const char*> get_key(uint32_t index) const override {
    if (index >= entries_.size()) return et::Error::InvalidArgument;
    return entries_[index].key.c_str();
  }

 private:
  const Entry* find(std::string_view key) const {
    for (const Entry& e : entries_) {
      if (e.key == key) return &e;
    }
    return nullptr;
  }
  std::vector<Entry> entries_;
};

}  // namespace

// One initialised delegate. Owns copies of the compile specs, the allocator the
// backend placed its handle's objects in, and the named-data index; the processed
// blob and the named data bytes stay the caller's (see etb_delegate_init).
struct etb_delegate {
  et::BackendInterface* backend = nullptr;
  std::string backend_name;
  std::string method_name;
  std::vector<std::string> spec_keys;
  std::vector<std::vector<uint8_t>> spec_values;
  std::vector<et::CompileSpec> specs;
  NamedData named;
  etops_bridge::MallocAllocator runtime_allocator;
  std::optional<et::FreeableBuffer> processed;  // FreeableBuffer cannot be assigned
  et::DelegateHandle* handle = nullptr;
  // A handle is one program's method: a Method never runs it on two threads at once,
  // so neither does etops (callers on other threads wait here, without the GIL).
  std::mutex execute_mutex;
  void* threadpool = nullptr;  // the pthreadpool when init ran (see current_pthreadpool)
  uint64_t pool_generation = 0;
};

namespace {

// Bumped each time etops replaces ExecuTorch's threadpool (etb_threadpool_replaced):
// the pool pointer alone could come back at the same address.
std::atomic<uint64_t> g_pool_generation{0};

// ExecuTorch's current pthreadpool (libexecutorch_threadpool.so, when loaded), or
// null. Backends such as XNNPACK keep the pool they were initialised with; resizing
// the pool (ThreadPool::_unsafe_reset_threadpool) frees it under them.
void* current_pthreadpool() {
  using GetPool = void* (*)();
  static GetPool get_pool = reinterpret_cast<GetPool>(
      dlsym(RTLD_DEFAULT, "_ZN10executorch9extension10threadpool15get_pthreadpoolEv"));
  return get_pool != nullptr ? get_pool() : nullptr;
}

et::Error run_delegate(void* self, et::Span<EValue*> stack, et::MemoryAllocator& temp) {
  etb_delegate* d = static_cast<etb_delegate*>(self);
  std::lock_guard<std::mutex> lock(d->execute_mutex);
  if (current_pthreadpool() != d->threadpool || g_pool_generation.load(std::memory_order_acquire) != d->pool_generation) {
    ET_LOG(Error, "the threadpool was resized since this delegate was initialised; load it again");
    return et::Error::InvalidState;
  }
  et::BackendExecutionContext ctx(nullptr, &temp, d->method_name.c_str());
  return d->backend->execute(ctx, d->handle, stack);
}

}  // namespace

extern "C" {

size_t etb_backend_count(void) { return et::get_num_registered_backends(); }

int etb_backend_name(size_t index, const char** name) {
  auto found = et::get_backend_name(index);
  if (!found.ok()) return ETB_ERR_INVALID_ARGUMENT;
  *name = found.get();
  return ETB_OK;
}

int etb_backend_available(const char* name, int* available) {
  et::BackendInterface* backend = et::get_backend_class(name);
  if (backend == nullptr) return status_of(et::Error::NotFound);
  struct Ask { et::BackendInterface* backend; int* available; } ask{backend, available};
  return etops_bridge::run_captured(name, [](void* self) {
    Ask& a = *static_cast<Ask*>(self);
    *a.available = a.backend->is_available() ? 1 : 0;
    return et::Error::Ok;
  }, &ask);
}

int etb_delegate_init(const char* backend_name, const void* processed, size_t processed_size,
                      const etb_compile_spec* specs, int nspecs, const etb_named_data* data, int ndata,
                      const char* method_name, etb_delegate** out) {
  et::BackendInterface* backend = et::get_backend_class(backend_name);
  if (backend == nullptr) return etops_bridge::refused(backend_name, et::Error::NotFound);
  etb_delegate* d = new (std::nothrow) etb_delegate();
  if (d == nullptr) return etops_bridge::refused(backend_name, et::Error::MemoryAllocationFailed);
  d->backend = backend;
  d->backend_name = backend_name;
  d->method_name = method_name;
  d->spec_keys.reserve(static_cast<size_t>(nspecs));
  d->spec_values.reserve(static_cast<size_t>(nspecs));
  for (int i = 0; i < nspecs; i++) {
    d->spec_keys.emplace_back(specs[i].key);
    const uint8_t* v = static_cast<const uint8_t*>(specs[i].value);
    d->spec_values.emplace_back(v, v + specs[i].size);
  }
  for (int i = 0; i < nspecs; i++) {
    et::CompileSpec spec;
    spec.key = d->spec_keys[i].c_str();
    spec.value.buffer = d->spec_values[i].data();
    spec.value.nbytes = d->spec_values[i].size();
    d->specs.push_back(spec);
  }
  for (int i = 0; i < ndata; i++) d->named.add(data[i].key, data[i].data, data[i].size);
  d->processed.emplace(processed, processed_size, nullptr);

  int status = etops_bridge::run_captured(backend_name, [](void* self) {
    etb_delegate* d = static_cast<etb_delegate*>(self);
    if (!d->backend->is_available()) return et::Error::NotSupported;
    d->threadpool = current_pthreadpool();
    d->pool_generation = g_pool_generation.load(std::memory_order_acquire);
    et::BackendInitContext ctx(&d->runtime_allocator, nullptr, d->method_name.c_str(), &d->named);
    et::Result<et::DelegateHandle*> handle = d->backend->init(
        ctx, &*d->processed, et::ArrayRef<et::CompileSpec>(d->specs.data(), d->specs.size()));
    if (!handle.ok()) return handle.error();
    d->handle = handle.get();
    return et::Error::Ok;
  }, d);
  if (status != ETB_OK) {
    if (status == ETB_ERR_ABORTED) d->handle = nullptr;  // whatever init placed is the allocator's
    delete d;
    return status;
  }
  *out = d;
  return ETB_OK;
}

int etb_delegate_execute(etb_delegate* d, const char* name, etb_value* values, int nvalues) {
  return etops_bridge::call_on_stack(name, values, nvalues, run_delegate, d);
}

void etb_threadpool_replaced(void) { g_pool_generation.fetch_add(1, std::memory_order_acq_rel); }

uint64_t etb_threadpool_generation(void) { return g_pool_generation.load(std::memory_order_acquire); }

int etb_delegate_stale(const etb_delegate* d) {
  return current_pthreadpool() != d->threadpool || etb_threadpool_generation() != d->pool_generation;
}

void etb_delegate_destroy(etb_delegate* d) {
  if (d == nullptr) return;
  // An abort in the backend's destroy is unwound and the handle let go (the
  // allocator frees what it placed); nothing to report to a destructor.
  etops_bridge::run_captured(d->backend_name.c_str(), [](void* self) {
    etb_delegate* d = static_cast<etb_delegate*>(self);
    d->backend->destroy(d->handle);
    return et::Error::Ok;
  }, d);
  delete d;  // frees what the backend placed in the runtime allocator
}

}  // extern "C"
