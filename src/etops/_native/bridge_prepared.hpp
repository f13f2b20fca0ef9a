// bridge_prepared.hpp - a prepared call (etb_prepare, etb_call_prepared): a stack of
// tensor and scalar slots built once, its TensorImpls aimed at new data each call.
// A kernel's call memo (kernel_memo.c) keeps one for the slots it remembers, so that
// a call matching it skips building TensorImpls and EValues: only the data pointers
// change, then the call runs exactly as etb_call runs it (same begin / end of call,
// abort unwinding, fault trap, pool flag). Included once, at the end of bridge.cpp,
// whose call helpers it uses.
#ifndef ETOPS_BRIDGE_PREPARED_HPP
#define ETOPS_BRIDGE_PREPARED_HPP

// The slots of one prepared stack, in place: at most kInlineTensors of each.
struct etb_prepared {
  int nvalues = 0;
  int ntensors = 0;
  etb_tensor* tensors[kInlineTensors];  // the caller's records: their data pointers, read each call
  TensorImpl* impls[kInlineTensors];
  Slots<TensorImpl, kInlineTensors> impl_storage{kInlineTensors};
  Slots<EValue, kInlineTensors> evalue_storage{kInlineTensors};
  EValue* stack[kInlineTensors];
};

extern "C" {

etb_prepared* etb_prepare(etb_prepared* reuse, etb_value* values, int nvalues) {
  std::unique_ptr<etb_prepared> p(reuse);
  if (nvalues <= 0 || nvalues > kInlineTensors) return nullptr;
  if (p == nullptr) {
    p.reset(new (std::nothrow) etb_prepared());
    if (p == nullptr) return nullptr;
  } else {  // built again in the same memory
    p->evalue_storage.clear();
    p->impl_storage.clear();
    p->nvalues = p->ntensors = 0;
  }
  for (int i = 0; i < nvalues; i++) {
    etb_value& v = values[i];
    EValue* ev = nullptr;
    switch (v.tag) {
      case ETB_TENSOR: {
        etb_tensor* t = v.u.t;
        if (t->dynamism != ETB_STATIC) return nullptr;  // an out the kernel may resize: etb_call
        TensorImpl* impl = place_impl(p->impl_storage, t);
        p->tensors[p->ntensors] = t;
        p->impls[p->ntensors++] = impl;
        ev = p->evalue_storage.emplace(eta::Tensor(impl));
        break;
      }
      case ETB_INT: ev = p->evalue_storage.emplace(static_cast<int64_t>(v.u.i)); break;
      case ETB_DOUBLE: ev = p->evalue_storage.emplace(v.u.d); break;
      case ETB_BOOL: ev = p->evalue_storage.emplace(static_cast<bool>(v.u.b)); break;
      case ETB_ALIAS:
        if (v.u.i < 0 || v.u.i >= i) return nullptr;
        ev = p->stack[v.u.i];
        break;
      default: return nullptr;  // None (a fresh return slot), lists, strings: etb_call
    }
    p->stack[i] = ev;
  }
  p->nvalues = nvalues;
  return p.release();
}

int etb_call_prepared(etb_prepared* p, etb_kernel_fn fn, const char* op_name, int flags, int* logged) {
  for (int j = 0; j < p->ntensors; j++) {
    p->tensors[j]->resized = 0;
    p->impls[j]->set_data(p->tensors[j]->data);
  }
  ensure_pal();
  CallState& call = this_thread_call();
  const char* outer = begin_call(call, op_name);
  MallocAllocator temp;
  et::Span<EValue*> stack(p->stack, static_cast<size_t>(p->nvalues));
  int status = end_call(call, outer, run_unwinding(call, [&] {
    et::KernelRuntimeContext ctx(nullptr, &temp);
    reinterpret_cast<et::OpFunction>(fn)(ctx, stack);
    return ctx.failure_state();
  }, (flags & ETB_CALL_POOL_INLINE) != 0));
  if (logged != nullptr) *logged = call.log_len > 0;
  return status;
}

void etb_prepared_free(etb_prepared* p) { delete p; }

}  // extern "C"

#endif  // ETOPS_BRIDGE_PREPARED_HPP
