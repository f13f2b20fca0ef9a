// registry_edit.cpp - the one place where etops changes ExecuTorch's kernel registry.
//
// ExecuTorch's registry is a fixed array of Kernel {name_, kernel_key_, op_} entries
// (capacity 2000) that only grows: register_kernels() appends, aborts the process on
// a duplicate name + key or on overflow, and there is no unregister. Everything etops
// offers on top (register without abort, override, restore, deregister) is done
// here, and only here, under these invariants:
//
//  I1. Entries are never removed or moved. etops appends through ExecuTorch's own
//      register_kernels(), only after checking that the name + key is not live and
//      that the array has room, so that call cannot abort.
//  I2. Overriding an entry replaces its op_ pointer in place (one aligned pointer
//      store, atomic on every platform ExecuTorch's wheels ship for). Anything that
//      looks the kernel up afterwards (an etops call, a .pte Method loaded later)
//      sees the new function; what already resolved the pointer keeps the old one.
//      Every swap is a compare-and-swap against the function the caller believes is
//      installed, so an out-of-order restore cannot silently drop someone's change.
//  I3. Deregistering turns the entry into a free slot: its name becomes
//      kFreeName (written first, so no lookup can match the entry any more), its
//      key the fallback, its op_ a function that fails with OperatorMissing (for a
//      caller that raced the lookup). A later registration of any name + key reuses
//      a free slot (op_ and key written first, the name last), so register /
//      deregister cycles never exhaust the registry.
//  I4. Names and keys stored in entries are interned here and never freed: ExecuTorch
//      keeps the pointers for the life of the process.
//  I5. All edits hold one mutex; after each the registry generation is bumped
//      (etb_registry_touch) so kernel objects re-resolve their cached functions.
//
// Readers (ExecuTorch's lookups, etops' kernel objects) take no lock: they see each
// entry either before or after an edit's single pointer store that decides a match
// (name_ for I3, op_ for I2).

#include "etops_bridge.h"

#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

namespace et = ::executorch::runtime;

namespace {

constexpr size_t kCapacity = ETB_REG_CAPACITY;
constexpr const char* kFreeName = ETB_REG_FREE_NAME;

std::mutex g_mutex;
std::unordered_set<std::string>* g_strings = nullptr;  // I4: never freed

const char* intern(const char* s) {
  if (s == nullptr) return nullptr;
  if (g_strings == nullptr) g_strings = new std::unordered_set<std::string>();
  return g_strings->emplace(s).first->c_str();
}

void missing_kernel(et::KernelRuntimeContext& ctx, et::Span<et::EValue*>) {
  ET_LOG(Error, "etops: this kernel was deregistered");
  ctx.fail(et::Error::OperatorMissing);
}

// The registry's storage. get_registered_kernels() hands out a const view; the array
// behind it is ExecuTorch's static, writable storage (checked on the 1.5.1 wheel: the
// span's data lies in libexecutorch.so's rw-p data segment, /proc/self/maps).
et::Kernel* entries(size_t* n) {
  auto span = et::get_registered_kernels();
  *n = span.size();
  return const_cast<et::Kernel*>(span.data());
}

bool same_key(const char* a, const char* b) {
  if (a == nullptr || b == nullptr) return a == b;
  return std::strcmp(a, b) == 0;
}

// Index of the live entry with this name + key, or -1.
long find_live(const char* name, const char* key) {
  size_t n;
  et::Kernel* k = entries(&n);
  for (size_t i = 0; i < n; i++) {
    const char* kname = __atomic_load_n(&k[i].name_, __ATOMIC_ACQUIRE);
    if (kname == kFreeName || kname == nullptr) continue;
    if (std::strcmp(kname, name) == 0 && same_key(k[i].kernel_key_.data(), key)) return (long)i;
  }
  return -1;
}

template <typename T>
void store(T* where, T value) {
  __atomic_store_n(where, value, __ATOMIC_RELEASE);
}

// KernelKey has one pointer member (kernel_key_data_), fallback when null.
static_assert(sizeof(et::KernelKey) == sizeof(const char*), "KernelKey layout changed");

void set_key(et::Kernel& k, const char* key) {
  et::KernelKey fresh = key == nullptr ? et::KernelKey() : et::KernelKey(key);
  const char* data = nullptr;
  std::memcpy(&data, &fresh, sizeof data);
  store(reinterpret_cast<const char**>(&k.kernel_key_), data);
}

}  // namespace

extern "C" {

int etb_reg_find(const char* name, const char* key, size_t* index) {
  std::lock_guard<std::mutex> lock(g_mutex);
  long found = find_live(name, key);
  if (found < 0) return ETB_REG_NOT_FOUND;
  *index = static_cast<size_t>(found);
  return ETB_REG_OK;
}

int etb_reg_add(const char* name, const char* key, etb_kernel_fn fn, size_t* index) {
  if (name == nullptr || fn == nullptr || std::strcmp(name, kFreeName) == 0) return ETB_REG_BAD_NAME;
  if (key != nullptr && std::strlen(key) >= et::internal::kKernelKeyBufSize) return ETB_REG_BAD_KEY;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (find_live(name, key) >= 0) return ETB_REG_DUPLICATE;  // I1
  size_t n;
  et::Kernel* k = entries(&n);
  for (size_t i = 0; i < n; i++) {  // I3: reuse a free slot
    if (k[i].name_ != kFreeName) continue;
    store(&k[i].op_, reinterpret_cast<et::OpFunction>(fn));
    set_key(k[i], intern(key));
    store(&k[i].name_, intern(name));
    *index = i;
    etb_registry_touch();
    return ETB_REG_OK;
  }
  if (n >= kCapacity) return ETB_REG_FULL;  // I1
  et::Kernel kernel(intern(name), key == nullptr ? et::KernelKey() : et::KernelKey(intern(key)),
                    reinterpret_cast<et::OpFunction>(fn));
  et::Error err = et::register_kernels({&kernel, 1});
  if (err != et::Error::Ok) return ETB_REG_FULL;
  entries(&n);
  *index = n - 1;
  etb_registry_touch();
  return ETB_REG_OK;
}

int etb_reg_swap(size_t index, etb_kernel_fn expected, etb_kernel_fn fn) {
  if (fn == nullptr) return ETB_REG_BAD_NAME;
  std::lock_guard<std::mutex> lock(g_mutex);
  size_t n;
  et::Kernel* k = entries(&n);
  if (index >= n || k[index].name_ == kFreeName) return ETB_REG_NOT_FOUND;
  et::OpFunction want = reinterpret_cast<et::OpFunction>(expected);
  if (!__atomic_compare_exchange_n(&k[index].op_, &want, reinterpret_cast<et::OpFunction>(fn), false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    return ETB_REG_STALE;  // I2
  }
  etb_registry_touch();
  return ETB_REG_OK;
}

int etb_reg_free(size_t index, etb_kernel_fn expected) {
  std::lock_guard<std::mutex> lock(g_mutex);
  size_t n;
  et::Kernel* k = entries(&n);
  if (index >= n || k[index].name_ == kFreeName) return ETB_REG_NOT_FOUND;
  if (expected != nullptr && reinterpret_cast<etb_kernel_fn>(k[index].op_) != expected) return ETB_REG_STALE;
  store(&k[index].name_, kFreeName);  // I3: no lookup matches from here on
  set_key(k[index], nullptr);
  store(&k[index].op_, &missing_kernel);
  etb_registry_touch();
  return ETB_REG_OK;
}

size_t etb_reg_free_count(void) {
  std::lock_guard<std::mutex> lock(g_mutex);
  size_t n, free = 0;
  et::Kernel* k = entries(&n);
  for (size_t i = 0; i < n; i++) free += k[i].name_ == kFreeName;
  return free;
}

etb_kernel_fn etb_reg_missing_fn(void) { return reinterpret_cast<etb_kernel_fn>(&missing_kernel); }

size_t etb_reg_hide_all(void) {
  // Probe processes only (load_library's duplicate check): every entry becomes a
  // free slot, so a library's static registrations append without colliding.
  std::lock_guard<std::mutex> lock(g_mutex);
  size_t n;
  et::Kernel* k = entries(&n);
  for (size_t i = 0; i < n; i++) {
    store(&k[i].name_, kFreeName);
    set_key(k[i], nullptr);
  }
  etb_registry_touch();
  return n;
}

}  // extern "C"
