/*
 * kernel_memo.c - the call memo: a kernel's last argument signature, fully converted,
 * so that the next call of the same signature skips conversion, the signature hash,
 * the ring lookup and kernel selection.
 *
 * After a call that went as a steady call goes (outs STATIC, signature validated and
 * probed clean, every tensor a contiguous torch.Tensor borrowed as it is, nothing
 * copied or kept alive, no list slot, no outs etops allocated), the kernel keeps
 * what that call gave the bridge: its slots, its tensor records (dtype, rank, sizes,
 * strides, dim order), the function selected and the ring entry of its signature.
 * A later call matches it when every argument is what it was field by field: the
 * same default, None or immutable number/str object, and for each tensor an object
 * of exactly torch.Tensor's type whose DLPack view (torch's exchange API, once per
 * tensor as every call does) has the memo's dtype, rank and sizes in contiguous
 * layout on the CPU with data. Then only the data pointers (and the objects and byte
 * spans the per-call checks read) are patched; everything that depends on data
 * pointers or on the objects (overlap, requires_grad) is still checked by the caller
 * on every call, as before.
 *
 * The memo is only valid while what it remembers still holds: its ring entry still
 * holds its signature, probed and with STATIC outs, and the registry generation is
 * the one its function was selected for; anything else is a miss and the full path
 * runs (and remembers that call instead). A call in progress on the memo marks it
 * busy: a nested or concurrent call of the same kernel (a Python kernel calling it,
 * another thread while a big call has released the GIL) takes the full path and
 * never rewrites it. Nothing here allocates Python objects; a miss sets no exception.
 */
#include "kernel_internal.h"
#include "tensor_inline.h"

#include <string.h>

/* How argument i of the memo is matched. */
enum { MEMO_DEFAULT = 0, MEMO_NONE, MEMO_SAME, MEMO_TENSOR };

struct CallMemo {
  int valid;
  int busy;                    /* a call is using recs and vals */
  uint64_t gen;                /* registry generation fn was selected for */
  uint64_t signature;          /* k->validated[slot] when remembered */
  int slot;                    /* the signature's ring entry */
  etb_kernel_fn fn;
  int nrecs, caprecs;
  int64_t numel_total;
  uint8_t how[ETOPS_MAX_ARGS]; /* MEMO_* per argument */
  PyObject* same[ETOPS_MAX_ARGS]; /* owned (MEMO_SAME: int, float, bool or str), else NULL */
  etb_value vals[ETOPS_MAX_ARGS]; /* the slots as the call gives them to the bridge */
  TensorRec** rec_ptrs;        /* caprecs of them, pointing into recs */
  TensorRec* recs;             /* one per MEMO_TENSOR argument, in argument order */
  size_t* nbytes;              /* each rec's span length */
};

/* Whether `o` converts the same every time: an immutable number or str of exact type. */
static inline int immutable_value(PyObject* o) {
  return PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyBool_Check(o) || PyUnicode_CheckExact(o);
}

int memo_match(KernelObject* k, PyObject* const* bound, CallScratch* cs, etb_value* vals) {
  CallMemo* m = k->memo;
  if (!m->valid || m->busy) return 0;
  const int slot = m->slot;
  if (k->validated[slot] != m->signature || !k->probed[slot] || !k->validated_static_outs[slot] ||
      etb_registry_generation() != m->gen)
    return 0;
  PyTypeObject* tensor_type = (PyTypeObject*)k->st->torch_tensor_type;
  const DLPackExchangeAPI* api = k->st->torch_api;
  int r = 0;
  for (int i = 0; i < k->nargs; i++) {
    PyObject* o = bound[i];
    switch (m->how[i]) {
      case MEMO_DEFAULT:
        if (o != k->args[i].default_value) return 0;
        break;
      case MEMO_NONE:
        if (o != Py_None) return 0;
        break;
      case MEMO_SAME:
        if (o != m->same[i]) return 0;
        break;
      default: { /* MEMO_TENSOR */
        if (Py_TYPE(o) != tensor_type) return 0;
        TensorRec* rec = &m->recs[r];
        etb_tensor* t = &rec->t;
        DLTensor dl;
        if (api->dltensor_from_py_object_no_sync(o, &dl) != 0) {
          PyErr_Clear(); /* the full path meets (and raises) it again */
          return 0;
        }
        if (dl.device.device_type != kDLCPU || dl.ndim != t->ndim || dl.data == NULL ||
            etops_et_dtype(dl.dtype) != t->dtype)
          return 0;
        for (int d = 0; d < t->ndim; d++) {
          if (dl.shape[d] != t->sizes[d]) return 0;
          /* contiguous as remembered (a dim of size 1 may have any stride) */
          if (dl.strides != NULL && dl.shape[d] != 1 && dl.strides[d] != t->strides[d]) return 0;
        }
        t->data = (char*)dl.data + dl.byte_offset;
        rec->obj = o;
        rec->given = o;
        rec->span.first = (uintptr_t)t->data;
        rec->span.end = rec->span.first + m->nbytes[r];
        r++;
      }
    }
  }
  memcpy(vals, m->vals, sizeof(etb_value) * (size_t)k->nslots);
  cs->recs = m->rec_ptrs;
  cs->nrecs = cs->caprecs = m->nrecs;
  cs->numel_total = m->numel_total;
  m->busy = 1;
  return 1;
}

void memo_release(KernelObject* k) { k->memo->busy = 0; }

etb_kernel_fn memo_fn(const KernelObject* k) { return k->memo->fn; }

int memo_slot(const KernelObject* k) { return k->memo->slot; }

void memo_forget(KernelObject* k) {
  if (k->memo != NULL) k->memo->valid = 0;
}

/* Room for n recs (the pointers re-aimed at them). -1: no memory (no exception). */
static int memo_reserve(CallMemo* m, int n) {
  if (n <= m->caprecs) return 0;
  TensorRec* recs = PyMem_Realloc(m->recs, sizeof(TensorRec) * (size_t)n);
  if (recs == NULL) return -1;
  m->recs = recs;
  TensorRec** ptrs = PyMem_Realloc(m->rec_ptrs, sizeof(TensorRec*) * (size_t)n);
  if (ptrs == NULL) return -1;
  m->rec_ptrs = ptrs;
  size_t* nbytes = PyMem_Realloc(m->nbytes, sizeof(size_t) * (size_t)n);
  if (nbytes == NULL) return -1;
  m->nbytes = nbytes;
  m->caprecs = n;
  return 0;
}

void memo_remember(KernelObject* k, const CallScratch* cs, PyObject* const* bound, const etb_value* vals,
                   etb_kernel_fn fn, int slot) {
  if (k->memo != NULL && k->memo->busy) return; /* an outer call is using it */
  if (cs->ncopies != 0 || cs->keep.n != 0 || cs->keep.overflow != NULL || k->has_lists) return;
  uint8_t how[ETOPS_MAX_ARGS];
  int r = 0;
  for (int i = 0; i < k->nargs; i++) {
    const ArgSpec* a = &k->args[i];
    PyObject* o = bound[i];
    if (a->has_default_value && o == a->default_value) {
      how[i] = MEMO_DEFAULT;
    } else if (a->kind == K_TENSOR && o != Py_None) {
      /* a tensor borrowed inline as it is (not a wrapped number, not a copy) */
      if (r >= cs->nrecs || cs->recs[r]->arg != i || !cs->recs[r]->inline_contiguous || vals[i].tag != ETB_TENSOR ||
          vals[i].u.t != &cs->recs[r]->t)
        return;
      how[i] = MEMO_TENSOR;
      r++;
    } else if (o == Py_None && vals[i].tag == ETB_NONE) {
      how[i] = MEMO_NONE;
    } else if (a->kind != K_TENSOR && immutable_value(o)) {
      how[i] = MEMO_SAME;
    } else {
      return;
    }
  }
  if (r != cs->nrecs) return;
  CallMemo* m = k->memo;
  if (m == NULL) {
    m = k->memo = PyMem_Calloc(1, sizeof(CallMemo));
    if (m == NULL) return;
  }
  m->valid = 0;
  if (memo_reserve(m, r) < 0) return;
  for (int j = 0; j < r; j++) {
    m->recs[j] = *cs->recs[j];
    m->rec_ptrs[j] = &m->recs[j];
    m->nbytes[j] = cs->recs[j]->span.end - cs->recs[j]->span.first;
  }
  r = 0;
  for (int i = 0; i < k->nargs; i++) {
    m->how[i] = how[i];
    Py_XSETREF(m->same[i], how[i] == MEMO_SAME ? Py_NewRef(bound[i]) : NULL);
    m->vals[i] = vals[i];
    if (how[i] == MEMO_TENSOR) m->vals[i].u.t = &m->recs[r++].t;
  }
  /* fresh return slots as every call starts them (the bridge wrote this call's results) */
  for (int i = k->nargs; i < k->nslots; i++) m->vals[i] = k->args[i].default_converted;
  m->nrecs = r;
  m->numel_total = cs->numel_total;
  m->fn = fn;
  m->slot = slot;
  m->signature = k->validated[slot];
  m->gen = k->gen;
  m->valid = 1;
}

void memo_free(KernelObject* k) {
  CallMemo* m = k->memo;
  if (m == NULL) return;
  if (m->busy) { /* a call is using it (the kernel's clear during a call): dropped at dealloc */
    m->valid = 0;
    return;
  }
  for (int i = 0; i < ETOPS_MAX_ARGS; i++) Py_CLEAR(m->same[i]);
  PyMem_Free(m->recs);
  PyMem_Free(m->rec_ptrs);
  PyMem_Free(m->nbytes);
  PyMem_Free(m);
  k->memo = NULL;
}
