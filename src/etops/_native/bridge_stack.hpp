// bridge_stack.hpp - the storage of one call's ExecuTorch stack (bridge.cpp's
// build_stack_and_run): objects without default constructors placed inline up to a
// count and on the heap beyond (Slots), and what list and string slots need besides
// their EValues (ListStorage). Included by bridge.cpp only.
#ifndef ETOPS_BRIDGE_STACK_HPP
#define ETOPS_BRIDGE_STACK_HPP

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>

#include <cstddef>
#include <new>
#include <optional>
#include <utility>
#include <vector>

namespace etops_bridge_stack {

namespace et = ::executorch::runtime;
namespace eta = ::executorch::aten;
using et::EValue;

// Storage for objects without default constructors, inline up to N, heap beyond.
template <typename T, size_t N>
class Slots {
 public:
  explicit Slots(size_t n) : n_(n) {
    data_ = n <= N ? reinterpret_cast<T*>(inline_) : static_cast<T*>(::operator new(sizeof(T) * n));
  }
  ~Slots() {
    for (size_t i = 0; i < built_; i++) data_[i].~T();
    if (n_ > N) ::operator delete(data_);
  }
  template <typename... A>
  T* emplace(A&&... a) {
    T* p = new (&data_[built_]) T(std::forward<A>(a)...);
    built_++;
    return p;
  }
  // Destroys what was built: the storage is empty again (and kept).
  void clear() {
    for (size_t i = 0; i < built_; i++) data_[i].~T();
    built_ = 0;
  }
  T* raw() { return data_; }
  size_t size() const { return built_; }

 private:
  alignas(T) unsigned char inline_[sizeof(T) * N];
  T* data_;
  size_t n_;
  size_t built_ = 0;
};

// What list and string slots need besides their EValues: the boxed list items,
// pointers to them (never null: ExecuTorch's list constructors refuse null, even
// for empty lists), the unwrapped element buffers, and the ArrayRef /
// BoxedEvalueList objects the EValues point to. Built only for stacks that have
// such slots, so a call of tensors and scalars pays nothing for it.
struct ListStorage {
  ListStorage(size_t n_arrays, size_t n_items)
      : items(n_items), strings(n_arrays), doubles(n_arrays), bools(n_arrays), int_lists(n_arrays),
        tensor_lists(n_arrays), opt_lists(n_arrays), int_unwrapped(n_items), tensor_unwrapped(n_items),
        opt_unwrapped(n_items) {
    if (n_items > 16) {
      item_ptrs_heap.resize(n_items);
      item_ptrs = item_ptrs_heap.data();
    }
  }
  Slots<EValue, 16> items;
  EValue* item_ptrs_inline[16];
  std::vector<EValue*> item_ptrs_heap;
  EValue** item_ptrs = item_ptrs_inline;
  size_t next_item = 0;  // index into items / item_ptrs
  Slots<eta::ArrayRef<char>, 4> strings;
  Slots<eta::ArrayRef<double>, 4> doubles;
  Slots<eta::ArrayRef<bool>, 4> bools;
  Slots<et::BoxedEvalueList<int64_t>, 4> int_lists;
  Slots<et::BoxedEvalueList<eta::Tensor>, 4> tensor_lists;
  Slots<et::BoxedEvalueList<std::optional<eta::Tensor>>, 4> opt_lists;
  Slots<int64_t, 16> int_unwrapped;
  Slots<eta::Tensor, 8> tensor_unwrapped;
  Slots<std::optional<eta::Tensor>, 8> opt_unwrapped;
};

}  // namespace etops_bridge_stack

#endif  // ETOPS_BRIDGE_STACK_HPP
