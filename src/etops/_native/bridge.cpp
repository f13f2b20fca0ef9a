// bridge.cpp - the call stack of ExecuTorch values and kernel calls: a call's state
// on its thread, its log and failure, ExecuTorch's abort and faults unwound into the
// call's failure. The platform layer that feeds the log is bridge_pal.cpp's.
//
// It turns the C description of a call (etb_value slots, see etops_bridge.h) into
// EValues and TensorImpls living on this function's stack, runs the kernel (or,
// for backends.cpp, a delegate) on them, and reports back: the new sizes, and a
// failure as etb_last_failure. The registry queries are registry_query.cpp's.
//
// Invariants the caller (kernel_convert.c) guarantees, so no malformed slot reaches
// ExecuTorch: every tensor has ndim <= ETB_MAX_DIM, sizes and strides fit int32, a
// dtype ExecuTorch knows and a dim order that is a permutation; every slot's tag is
// what the schema says the kernel will read. What the kernel itself aborts on is
// unwound (run_unwinding; docs/reliability.md).

#include "etops_bridge.h"
#include "bridge_internal.hpp"
#include "bridge_call_state.hpp"
#include "fault_trap.h"
#include "bridge_stack.hpp"

#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/platform.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <vector>

namespace et = ::executorch::runtime;
namespace eta = ::executorch::aten;
using et::EValue;
using etops_bridge::CallState;
using etops_bridge::ensure_pal;
using etops_bridge::g_running_op;
using etops_bridge::kCallLogSize;
using etops_bridge::kSiteSize;
using etops_bridge::MallocAllocator;
using etops_bridge::short_file;
using etops_bridge::t_call;
using etops_bridge_stack::ListStorage;
using etops_bridge_stack::Slots;
using TensorImpl = ::executorch::runtime::etensor::TensorImpl;

static_assert(sizeof(bool) == 1, "etb bool lists are passed as bytes");

// The call state of each thread, and the kernel running on any: here, where every
// call reaches them (bridge_call_state.hpp).
thread_local CallState etops_bridge::t_call = {};
std::atomic<const char*> etops_bridge::g_running_op{nullptr};

namespace {

// A TensorImpl over `t`'s memory and layout, built in place in `impls`.
TensorImpl* place_impl(Slots<TensorImpl, 16>& impls, etb_tensor* t) {
  return impls.emplace(static_cast<eta::ScalarType>(t->dtype), t->ndim, t->sizes, t->data, t->dim_order,
                       t->strides,
                       t->dynamism == ETB_DYNAMIC_BOUND ? ::executorch::runtime::TensorShapeDynamism::DYNAMIC_BOUND
                                                        : ::executorch::runtime::TensorShapeDynamism::STATIC);
}

// Starts an etops call named `op_name` on this thread: the kernel's name (for the
// abort notice, also while the stack is built) and a fresh log. Returns the name of
// the call it is nested in (a Python kernel calling a kernel), or null; end_call
// gives that call its state back. The outermost call also names the kernel for
// aborts on other threads (g_running_op). Plain stores: this is on every call.
inline const char* begin_call(CallState& c, const char* op_name) {
  const char* outer = c.current_op;
  c.current_op = op_name;
  c.aborted = false;
  c.resize_refused = false;
  c.log_len = 0;
  c.log[0] = '\0';
  c.site_file = nullptr;
  if (outer == nullptr) g_running_op.store(op_name, std::memory_order_relaxed);
  return outer;
}

// The failure of the call running on this thread (status not ETB_OK) as
// etb_last_failure gives it: its kind, the call log, where the last and the first
// error or fatal message were logged, the kernel; `fault` was written by run_unwinding for
// ETB_FAILURE_CRASHED. Only failed calls come here.
__attribute__((noinline, cold)) void record_failure(CallState& c, int status, etb_failure_kind kind) {
  etb_failure& f = c.failure;
  f.kind = kind;
  f.code = status;
  f.message = c.log;
  std::snprintf(c.failure_file, kSiteSize, "%s", c.site_file != nullptr ? short_file(c.site_file) : "");
  f.file = c.failure_file;
  f.line = c.site_file != nullptr ? static_cast<uint32_t>(c.site_line) : 0;
  std::snprintf(c.failure_origin, kSiteSize, "%s", c.site_file != nullptr ? short_file(c.origin_file) : "");
  f.origin_file = c.failure_origin;
  f.origin_line = c.site_file != nullptr ? static_cast<uint32_t>(c.origin_line) : 0;
  std::snprintf(c.failure_kernel, kSiteSize, "%s", c.current_op != nullptr ? c.current_op : "");
  f.kernel = c.failure_kernel;
  if (kind != ETB_FAILURE_CRASHED) f.fault = etf_fault{};
}

// The kind of a failure the kernel (or backend) returned: `status` is not ETB_OK.
inline etb_failure_kind kind_of(const CallState& c, int status) {
  switch (status) {
    case ETB_ERR_ABORTED: return ETB_FAILURE_ABORTED;
    case ETB_ERR_CRASHED: return ETB_FAILURE_CRASHED;
    case ETB_ERR_CXX_EXCEPTION: return ETB_FAILURE_CXX_EXCEPTION;
    default: return c.resize_refused ? ETB_FAILURE_RESIZE_REFUSED : ETB_FAILURE_ERROR;
  }
}

// Restores the state the call begun by begin_call found (`outer` is what it
// returned): the enclosing call, if any, is running its kernel again.
inline void leave_call(CallState& c, const char* outer) {
  c.current_op = outer;
  c.in_call = outer != nullptr;
  c.aborted = false;
  if (outer == nullptr) g_running_op.store(nullptr, std::memory_order_relaxed);
}

// Ends the call begun by begin_call and passes `status` through, recorded as the
// thread's last failure when it is not ETB_OK.
inline int end_call(CallState& c, const char* outer, int status) {
  if (__builtin_expect(status != ETB_OK, 0)) record_failure(c, status, kind_of(c, status));
  leave_call(c, outer);
  return status;
}

// Ends the call begun by begin_call that the bridge refused before any ExecuTorch
// code ran (a malformed slot, no memory): `status` (not ETB_OK) is its failure.
int refuse_call(CallState& c, const char* outer, int status) {
  record_failure(c, status, ETB_FAILURE_REFUSED);
  leave_call(c, outer);
  return status;
}

// Appends `text` to the call log on its own line.
void log_line(CallState& c, const char* text) {
  if (c.log_len > 0 && c.log_len + 1 < kCallLogSize) c.log[c.log_len++] = '\n';
  int n = std::snprintf(c.log + c.log_len, kCallLogSize - c.log_len, "%s", text);
  if (n > 0) c.log_len = std::min(kCallLogSize - 1, c.log_len + static_cast<size_t>(n));
}

// Runs `body` with this thread's fault trap armed (fault_trap.h): false when it
// returned, true when a synchronous fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL) on this
// thread abandoned its frames and jumped back here, `*fault` saying what it was.
// Not inlined: the frame that calls sigsetjmp must stay small and outlive the body.
// `pool_inline`: the body's parallel regions run on this thread (NoThreadPoolGuard,
// etf_pool_flag) for the call, so that no pool lock is held when it faults.
template <typename Body>
__attribute__((noinline)) bool faulted(Body& body, etf_fault* fault, bool pool_inline) {
  etf_trap** slot = etf_thread_trap();
  if (slot == nullptr) {  // no slot for this thread (the table is full): untrapped
    body();
    return false;
  }
  volatile bool* const inline_flag = pool_inline ? etf_pool_flag(slot) : nullptr;
  if (inline_flag != nullptr) *inline_flag = true;
  etf_trap trap;
  trap.outer = *slot;
  if (!pool_inline) __atomic_add_fetch(&etf_pool_calls, 1, __ATOMIC_RELAXED);  // regions may run on the pool
  if (sigsetjmp(trap.env, 0) != 0) {  // the handler popped the trap before jumping
    asm volatile("" ::: "memory");  // the handler wrote trap.fault: read it from memory
    *fault = trap.fault;
    if (inline_flag != nullptr) *inline_flag = false;
    if (!pool_inline) __atomic_sub_fetch(&etf_pool_calls, 1, __ATOMIC_RELAXED);
    return true;
  }
  *slot = &trap;
  body();
  *slot = trap.outer;
  if (inline_flag != nullptr) *inline_flag = false;
  if (pool_inline) return false;
  __atomic_sub_fetch(&etf_pool_calls, 1, __ATOMIC_RELAXED);
  // a fault in an item of a parallel region on the pool skipped that item (fault_pool.c)
  return etf_take_pool_fault(fault);
}

// Runs `body` (a kernel or a backend: returns its et::Error) with ExecuTorch's abort
// unwinding to here and synchronous faults trapped: ETB_ERR_ABORTED when it aborted
// (the throw reached here, or a kernel wrapper caught it and failed the context),
// ETB_ERR_CXX_EXCEPTION when it threw a C++ exception of its own, ETB_ERR_CRASHED
// when it faulted (c.failure.fault says how; the kernel's frames were abandoned, nothing
// else); else the Error as the bridge's status.
template <typename Body>
int run_unwinding(CallState& c, Body&& body, bool pool_inline = false) {
  et::Error err = et::Error::Internal;
  bool threw = false;
  c.in_call = true;
  auto guarded = [&] {
    try {
      err = body();
    } catch (const etops_bridge::KernelAbort&) {
      c.aborted = true;
    } catch (const std::exception& e) {
      threw = true;
      char line[kSiteSize];
      std::snprintf(line, sizeof line, "the kernel threw a C++ exception: %s", e.what());
      log_line(c, line);
    } catch (...) {
      threw = true;
      log_line(c, "the kernel threw a C++ exception of an unknown type");
    }
  };
  bool crashed = faulted(guarded, &c.failure.fault, pool_inline);
  c.in_call = false;
  if (crashed) return ETB_ERR_CRASHED;
  if (c.aborted) return ETB_ERR_ABORTED;
  if (threw) return ETB_ERR_CXX_EXCEPTION;
  return etops_bridge::status_of(err);
}

}  // namespace

namespace etops_bridge {

int status_of(et::Error error) { return static_cast<int>(error); }

int run_captured(const char* name, BackendStep step, void* self) {
  ensure_pal();
  CallState& c = t_call;
  const char* outer = begin_call(c, name);
  return end_call(c, outer, run_unwinding(c, [&] { return step(self); }));
}

int refused(const char* name, et::Error error) {
  CallState& c = t_call;
  return refuse_call(c, begin_call(c, name), status_of(error));
}

}  // namespace etops_bridge

namespace {

// Tensors a call's storage holds inline (beyond them, on the heap).
constexpr int kInlineTensors = 16;

// This thread's CallState, its address computed once for the whole call: without
// the empty asm the compiler recomputes a thread_local's address (a __tls_get_addr
// call in a shared library) at every use, four times a call.
inline CallState& this_thread_call() {
  CallState* c = &t_call;
#if defined(__GNUC__) || defined(__clang__)
  asm("" : "+r"(c));
#endif
  return *c;
}

// The body of every call: `run(stack, temp)` is the kernel or the delegate. A
// template, so that etb_call's kernel call is direct and inlined like the rest.
template <typename Run>
int build_stack_and_run(const char* op_name, etb_value* values, int nvalues, int flags, int* logged, Run&& run) {
  const bool has_lists = (flags & ETB_CALL_HAS_LISTS) != 0;
  // What the slots need, so storage is sized once. A stack of tensors and scalars
  // (has_lists false: a list or string slot is then refused below) has at most
  // nvalues tensors; only one with lists or many slots counts them exactly.
  size_t n_tensors = static_cast<size_t>(nvalues), n_list_items = 0, n_arrays = 0;
  if (has_lists || nvalues > kInlineTensors) {
    n_tensors = 0;
    for (int i = 0; i < nvalues; i++) {
      const etb_value& v = values[i];
      switch (v.tag) {
        case ETB_TENSOR: n_tensors++; break;
        case ETB_LIST_TENSOR:
        case ETB_LIST_OPT_TENSOR:
          for (int j = 0; j < v.len; j++) n_tensors += v.u.tensors[j] != nullptr;
          n_list_items += v.len;
          n_arrays++;
          break;
        case ETB_LIST_INT: n_list_items += v.len; n_arrays++; break;
        case ETB_STRING: case ETB_LIST_BOOL: case ETB_LIST_DOUBLE: n_arrays++; break;
        default: break;
      }
    }
  }

  ensure_pal();
  CallState& call = this_thread_call();
  // A Python kernel may call another kernel: the outer call's state comes back after.
  const char* outer = begin_call(call, op_name);

  // Declared in the order they point at each other: destroyed in reverse, an EValue
  // of a list (whose destructor reads its BoxedEvalueList) goes before the list.
  Slots<TensorImpl, kInlineTensors> impls(n_tensors);
  std::unique_ptr<ListStorage> lists;  // on the heap: a std::optional here costs every call
  if (n_arrays > 0) {
    lists.reset(new (std::nothrow) ListStorage(n_arrays, n_list_items));
    if (lists == nullptr) {
      return refuse_call(call, outer, static_cast<int>(et::Error::MemoryAllocationFailed));
    }
  }
  Slots<EValue, 16> evalues(static_cast<size_t>(nvalues));
  EValue* stack_ptrs_inline[16];
  std::vector<EValue*> stack_ptrs_heap;
  EValue** stack = stack_ptrs_inline;
  if (nvalues > 16) {
    stack_ptrs_heap.resize(nvalues);
    stack = stack_ptrs_heap.data();
  }

  // Only outs (passed DYNAMIC_BOUND) can change shape (a STATIC tensor refuses):
  // their original shapes, to tell the caller which ones the kernel resized.
  struct Saved {
    Saved(etb_tensor* tensor, TensorImpl* its_impl) : t(tensor), impl(its_impl), ndim(tensor->ndim) {
      std::memcpy(sizes, tensor->sizes, sizeof sizes);  // a fixed size: inlined, no libc call
    }
    etb_tensor* t;
    TensorImpl* impl;
    uint8_t ndim;
    int32_t sizes[ETB_MAX_DIM];
  };
  Slots<Saved, kInlineTensors> saved(n_tensors);
  auto tensor_evalue = [&](etb_tensor* t) {
    TensorImpl* impl = place_impl(impls, t);
    t->resized = 0;
    if (t->dynamism == ETB_DYNAMIC_BOUND) saved.emplace(t, impl);  // no zero-filling first
    return eta::Tensor(impl);
  };

  bool has_none = false;  // fresh return slots start as None
  for (int i = 0; i < nvalues; i++) {
    etb_value& v = values[i];
    EValue* ev = nullptr;
    switch (v.tag) {
      case ETB_NONE: ev = evalues.emplace(); has_none = true; break;
      case ETB_TENSOR: ev = evalues.emplace(tensor_evalue(v.u.t)); break;
      case ETB_INT: ev = evalues.emplace(static_cast<int64_t>(v.u.i)); break;
      case ETB_DOUBLE: ev = evalues.emplace(v.u.d); break;
      case ETB_BOOL: ev = evalues.emplace(static_cast<bool>(v.u.b)); break;
      case ETB_STRING:
        if (lists == nullptr) return refuse_call(call, outer, ETB_ERR_INVALID_TYPE);  // not announced (has_lists)
        ev = evalues.emplace(lists->strings.emplace(v.u.s, static_cast<size_t>(v.len)));
        break;
      case ETB_LIST_DOUBLE:
        if (lists == nullptr) return refuse_call(call, outer, ETB_ERR_INVALID_TYPE);  // not announced (has_lists)
        ev = evalues.emplace(lists->doubles.emplace(v.u.doubles, static_cast<size_t>(v.len)));
        break;
      case ETB_LIST_BOOL:
        if (lists == nullptr) return refuse_call(call, outer, ETB_ERR_INVALID_TYPE);  // not announced (has_lists)
        ev = evalues.emplace(
            lists->bools.emplace(reinterpret_cast<const bool*>(v.u.bools), static_cast<size_t>(v.len)));
        break;
      case ETB_LIST_INT: {
        if (lists == nullptr) return refuse_call(call, outer, ETB_ERR_INVALID_TYPE);  // not announced (has_lists)
        ListStorage& l = *lists;
        int64_t* unwrapped = l.int_unwrapped.raw() + l.int_unwrapped.size();
        EValue** ptrs = l.item_ptrs + l.next_item;
        for (int j = 0; j < v.len; j++) {
          l.int_unwrapped.emplace(v.u.ints[j]);
          ptrs[j] = l.items.emplace(static_cast<int64_t>(v.u.ints[j]));
        }
        ev = evalues.emplace(l.int_lists.emplace(ptrs, unwrapped, v.len));
        l.next_item += v.len;
        break;
      }
      case ETB_LIST_TENSOR: {
        if (lists == nullptr) return refuse_call(call, outer, ETB_ERR_INVALID_TYPE);  // not announced (has_lists)
        ListStorage& l = *lists;
        eta::Tensor* unwrapped = l.tensor_unwrapped.raw() + l.tensor_unwrapped.size();
        EValue** ptrs = l.item_ptrs + l.next_item;
        for (int j = 0; j < v.len; j++) {
          eta::Tensor t = tensor_evalue(v.u.tensors[j]);
          l.tensor_unwrapped.emplace(t);
          ptrs[j] = l.items.emplace(t);
        }
        ev = evalues.emplace(l.tensor_lists.emplace(ptrs, unwrapped, v.len));
        l.next_item += v.len;
        break;
      }
      case ETB_LIST_OPT_TENSOR: {
        if (lists == nullptr) return refuse_call(call, outer, ETB_ERR_INVALID_TYPE);  // not announced (has_lists)
        ListStorage& l = *lists;
        std::optional<eta::Tensor>* unwrapped = l.opt_unwrapped.raw() + l.opt_unwrapped.size();
        EValue** ptrs = l.item_ptrs + l.next_item;
        for (int j = 0; j < v.len; j++) {
          l.opt_unwrapped.emplace();
          ptrs[j] = v.u.tensors[j] != nullptr ? l.items.emplace(tensor_evalue(v.u.tensors[j])) : l.items.emplace();
        }
        ev = evalues.emplace(l.opt_lists.emplace(ptrs, unwrapped, v.len));
        l.next_item += v.len;
        break;
      }
      case ETB_ALIAS:
        if (v.u.i < 0 || v.u.i >= i) {
          return refuse_call(call, outer, ETB_ERR_INVALID_ARGUMENT);
        }
        ev = stack[v.u.i];
        break;
      default: {
        return refuse_call(call, outer, ETB_ERR_INVALID_TYPE);
      }
    }
    stack[i] = ev;
  }

  MallocAllocator temp;
  int status = end_call(call, outer, run_unwinding(call, [&] { return run(et::Span<EValue*>(stack, static_cast<size_t>(nvalues)), temp); },
                                                   (flags & ETB_CALL_POOL_INLINE) != 0));
  if (logged != nullptr) *logged = call.log_len > 0;

  // Report resized tensors and fresh return values.
  for (size_t i = 0; i < saved.size(); i++) {
    Saved& s = saved.raw()[i];
    TensorImpl& impl = *s.impl;
    bool changed = impl.dim() != s.ndim;
    for (int d = 0; d < s.ndim && !changed; d++) changed = s.sizes[d] != s.t->sizes[d];
    if (changed) {
      s.t->resized = 1;
      s.t->ndim = static_cast<uint8_t>(impl.dim());
    }
    if (impl.mutable_data() != s.t->data) {
      s.t->data = impl.mutable_data();
      s.t->resized = 1;
    }
  }
  for (int i = 0; status == ETB_OK && has_none && i < nvalues; i++) {
    etb_value& v = values[i];
    if (v.tag != ETB_NONE) continue;  // only fresh return slots start as None
    const EValue& ev = *stack[i];
    if (ev.isInt()) { v.tag = ETB_INT; v.u.i = ev.toInt(); }
    else if (ev.isDouble()) { v.tag = ETB_DOUBLE; v.u.d = ev.toDouble(); }
    else if (ev.isBool()) { v.tag = ETB_BOOL; v.u.b = ev.toBool(); }
  }
  return status;
}

}  // namespace

int etops_bridge::call_on_stack(const char* op_name, etb_value* values, int nvalues, StackRunner run,
                                       void* self) {
  return build_stack_and_run(op_name, values, nvalues, ETB_CALL_HAS_LISTS, nullptr, [&](et::Span<EValue*> stack, et::MemoryAllocator& temp) {
    return run(self, stack, temp);
  });
}

extern "C" {

int etb_call(etb_kernel_fn fn, const char* op_name, etb_value* values, int nvalues, int flags, int* logged) {
  return build_stack_and_run(op_name, values, nvalues, flags, logged, [fn](et::Span<EValue*> stack, et::MemoryAllocator& temp) {
    et::KernelRuntimeContext ctx(nullptr, &temp);
    reinterpret_cast<et::OpFunction>(fn)(ctx, stack);
    return ctx.failure_state();
  });
}

const char* etb_last_call_log(void) { return t_call.log; }

int etb_last_call_logged_error(void) { return t_call.site_file != nullptr; }

const etb_failure* etb_last_failure(void) { return &t_call.failure; }

// Read in a signal handler: the global only (a thread_local of a shared library may
// allocate on a thread's first use).
const char* etb_running_kernel(void) { return g_running_op.load(std::memory_order_relaxed); }

void etb_install_pal(etb_log_sink sink) {
  etops_bridge::g_sink = sink;
  etops_bridge::claim_pal();
}

}  // extern "C"

#include "bridge_prepared.hpp"  // etb_prepare, etb_call_prepared: after the helpers they use
