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
 * same default, None or immutable number/str object (a number given for a Tensor
 * parameter too: its wrapped 0-dim tensor is remembered), and for each tensor an object
 * of exactly torch.Tensor's type whose DLPack view (torch's exchange API, once per
 * tensor as every call does) has the memo's dtype, rank and sizes in contiguous
 * layout on the CPU with data and no lazy negative or conjugate bit (tensor_fields.h:
 * a tensor with one never matches; the full path resolves it). Then only the data
 * pointers (and the objects and byte spans the per-call checks read) are patched;
 * everything that depends on data pointers or on the objects (overlap, requires_grad,
 * inference tensors, the version counters bumped after the call) is still checked by the caller
 * on every call, as before. A call that does not match is converted from the DLPack
 * views the match already asked torch for (CallScratch's pre_dl), never asking twice.
 *
 * A call without out= whose outs C allocated (kernel_alloc.c) is remembered the same
 * way, its outs as fresh records: a later call without out= whose inputs match it
 * allocates its outs as that allocation ring entry says (memo_allocate_outs) and
 * only patches their data pointers too. An out= call never matches such a memo, nor
 * a call without out= one remembered from an out= call.
 *
 * A valid memo is replaced by another steady call's only when that call's signature
 * missed it twice in a row, no call matching it in between (a loop alternating
 * signatures keeps the first).
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
enum { MEMO_DEFAULT = 0, MEMO_NONE, MEMO_SAME, MEMO_WRAPPED, MEMO_TENSOR, MEMO_FRESH };

/* A Python number given for a Tensor parameter, as the conversion wrapped it
 * (kernel_convert.c's wrap_number): its 0-dim tensor and value, the memo's own. */
typedef struct {
  etb_tensor t;
  _Alignas(16) unsigned char data[16];
} WrappedNumber;

struct CallMemo {
  int valid;
  int busy;                    /* a call is using recs and vals */
  uint64_t gen;                /* registry generation fn was selected for */
  uint64_t signature;          /* k->validated[slot] when remembered */
  int slot;                    /* the signature's ring entry */
  int candidate;               /* 1 + the ring entry of the last steady call that missed, or 0 */
  etb_kernel_fn fn;
  int nrecs, caprecs;
  int64_t numel_total;
  int fresh_slots;             /* the call has fresh return slots (the bridge writes them) */
  /* a call without out= (its outs allocated in C): the recs from nmatch on are its
   * outs (after every input: outs come last in a schema), allocated per call as
   * allocation ring entry alloc_slot says while it holds alloc_sig */
  int allocating;
  int nmatch;                  /* the recs matched against the call's tensors (nrecs unless allocating) */
  int alloc_slot;
  uint64_t alloc_sig;
  int outs_contiguous;         /* every out's remembered strides are torch.empty's: tensor_alloc.c may allocate them */
  /* non-tensor arguments: each must be this very object (a default, None, or an
   * immutable number or str the memo holds) */
  int nsame;
  uint8_t same_arg[ETOPS_MAX_ARGS];
  PyObject* same_obj[ETOPS_MAX_ARGS];
  PyObject* held[ETOPS_MAX_ARGS]; /* owned: the MEMO_SAME and MEMO_WRAPPED objects (NULL elsewhere) */
  etb_value vals[ETOPS_MAX_ARGS]; /* the slots as the call gives them to the bridge */
  TensorRec** rec_ptrs;        /* caprecs of them, pointing into recs */
  TensorRec* recs;             /* one per tensor argument, in argument order */
  size_t* nbytes;              /* each rec's span length */
  uint32_t* dl_dtypes;         /* each rec's dtype as DLPack gives it (DLDataType's 4 bytes) */
  int64_t (*layouts)[2 * ETB_MAX_DIM]; /* each rec's sizes and contiguous strides, as DLPack gives them */
  WrappedNumber* wrapped;      /* the MEMO_WRAPPED arguments' tensors (capwrapped of them) */
  int capwrapped;
  etb_prepared* prepared;      /* the bridge's stack of vals, or NULL (etb_call builds it) */
};

/* Whether `o` converts the same every time: an immutable number or str of exact type. */
static inline int immutable_value(PyObject* o) {
  return PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyBool_Check(o) || PyUnicode_CheckExact(o);
}

/* Whether a DLPack view has exactly the remembered layout of `t` (contiguous, a dim
 * of size 1 with any stride, as etops_fill_contiguous accepts), out of line: the
 * common case is settled by the exact compare in memo_match. */
static Py_NO_INLINE int same_contiguous_layout(const DLTensor* dl, const etb_tensor* t) {
  for (int d = 0; d < t->ndim; d++) {
    if (dl->shape[d] != t->sizes[d]) return 0;
    if (dl->strides != NULL && dl->shape[d] != 1 && dl->strides[d] != t->strides[d]) return 0;
  }
  return 1;
}

/* Whether an allocating memo fits this call without out=: its ring entry still
 * allocates as remembered and no out is given. Out of line: out= calls never get here. */
static Py_NO_INLINE int allocating_fits(const KernelObject* k, const CallMemo* m, PyObject* const* bound) {
  if (!m->allocating || !k->allocates || k->allocated[m->alloc_slot] != m->alloc_sig) return 0;
  const PyObject* spec = k->allocated_outs[m->alloc_slot];
  if (spec == NULL || spec == Py_None) return 0;
  for (int r = m->nmatch; r < m->nrecs; r++) {
    PyObject* given = bound[m->recs[r].arg];
    if (given != NULL && given != Py_None) return 0;
  }
  return 1;
}

/* A miss after torch's exchange API filled pre[] for the first `asked` records'
 * arguments: the conversion takes those DLTensors from there (CallScratch's pre_dl
 * and pre_mask, as memo_match promises) instead of asking again. 0. Out of line:
 * the bits are set on a miss only. */
static Py_NO_INLINE int missed_after_asking(CallScratch* cs, const CallMemo* m, DLTensor* pre, int asked) {
  cs->pre_dl = pre;
  for (int r = 0; r < asked; r++) {
    const int arg = m->recs[r].arg;
    if (arg < 64) cs->pre_mask |= (uint64_t)1 << arg;
  }
  return 0;
}

int memo_match(KernelObject* k, PyObject* const* bound, int missing_out, CallScratch* cs, etb_value** vals,
               DLTensor* pre) {
  CallMemo* m = k->memo;
  if (!m->valid || m->busy) return 0;
  const int slot = m->slot;
  if (k->validated[slot] != m->signature || !k->probed[slot] || !k->validated_static_outs[slot] ||
      etb_registry_generation() != m->gen)
    return 0;
  if (missing_out ? !allocating_fits(k, m, bound) : m->allocating) return 0;
  /* defaults, None and the same numbers: one identity compare each */
  for (int c = 0; c < m->nsame; c++) {
    if (bound[m->same_arg[c]] != m->same_obj[c]) return 0;
  }
  PyTypeObject* tensor_type = (PyTypeObject*)k->st->torch_tensor_type;
  const int nmatch = m->nmatch;
  for (int r = 0; r < nmatch; r++) { /* before asking torch about any of them */
    if (Py_TYPE(bound[m->recs[r].arg]) != tensor_type) return 0;
  }
  const DLPackExchangeAPI* api = k->st->torch_api;
  int r;
  for (r = 0; r < nmatch; r++) {
    TensorRec* rec = &m->recs[r];
    const int arg = rec->arg;
    PyObject* o = bound[arg];
    etb_tensor* t = &rec->t;
    DLTensor* dl = &pre[arg];
    if (api->dltensor_from_py_object_no_sync(o, dl) != 0) {
      PyErr_Clear(); /* the full path meets (and raises) it again */
      goto missed; /* torch filled the views of recs [0, r) */
    }
    const int64_t* layout = m->layouts[r]; /* sizes, then strides, as int64 */
    uint32_t dtype;
    memcpy(&dtype, &dl->dtype, sizeof dtype);
    if (dl->device.device_type != kDLCPU || dl->ndim != t->ndim || dl->data == NULL || dtype != m->dl_dtypes[r])
      goto missed_this;
    if (etops_tensor_maybe_lazy(o)) goto missed_this; /* a lazy bit: resolved into a copy by the full path */
    int64_t diff = 1; /* no strides (contiguous): the exact rule */
    if (dl->strides != NULL) {
      diff = 0;
      for (int d = 0; d < t->ndim; d++) diff |= (dl->shape[d] ^ layout[d]) | (dl->strides[d] ^ layout[ETB_MAX_DIM + d]);
    }
    if (diff != 0 && !same_contiguous_layout(dl, t)) goto missed_this;
    t->data = (char*)dl->data + dl->byte_offset;
    rec->obj = o;
    rec->given = o;
    rec->span.first = (uintptr_t)t->data;
    rec->span.end = rec->span.first + m->nbytes[r];
  }
  if (m->fresh_slots) { /* the bridge writes fresh return values into them */
    memcpy(*vals, m->vals, sizeof(etb_value) * (size_t)k->nslots);
  } else {
    *vals = m->vals; /* read-only to the bridge (its tensors are the memo's records) */
  }
  cs->recs = m->rec_ptrs;
  cs->nrecs = cs->caprecs = m->nrecs;
  cs->numel_total = m->numel_total;
  m->busy = 1;
  m->candidate = 0; /* a call in between that hit: no signature missed twice in a row */
  k->memo_hits++;
  return 1;
missed_this: /* torch filled the views of recs [0, r] */
  r++;
missed:
  return missed_after_asking(cs, m, pre, r);
}

/* The outs of an allocating memo from torch's allocator without a Python call
 * (tensor_alloc.c): 1; 0 when that route is off (nothing allocated); -1 an exception. */
static int allocate_contiguous_outs(KernelObject* k, const CallMemo* m, PyObject** bound, PyObject** fresh,
                                    int* nfresh) {
  const int first = *nfresh;
  for (int r = m->nmatch; r < m->nrecs; r++) {
    const etb_tensor* t = &m->recs[r].t;
    int64_t shape[ETB_MAX_DIM];
    for (int d = 0; d < t->ndim; d++) shape[d] = t->sizes[d];
    DLDataType dtype;
    memcpy(&dtype, &m->dl_dtypes[r], sizeof dtype);
    PyObject* out;
    void* data;
    int got = etops_alloc_contiguous(k->st, dtype, t->ndim, shape, &out, &data);
    if (got <= 0) { /* the route went off: none of them, torch.empty_strided allocates them all */
      while (*nfresh > first) Py_DECREF(fresh[--*nfresh]);
      return got;
    }
    fresh[(*nfresh)++] = out;
    bound[m->recs[r].arg] = out;
  }
  return 1;
}

int memo_allocate_outs(KernelObject* k, PyObject** bound, PyObject** fresh, int* nfresh) {
  CallMemo* m = k->memo;
  int done = m->outs_contiguous ? allocate_contiguous_outs(k, m, bound, fresh, nfresh) : 0;
  if (done < 0 || (done == 0 && allocate_outs(k, m->alloc_slot, bound, fresh, nfresh) < 0)) return -1;
  const DLPackExchangeAPI* api = k->st->torch_api;
  PyTypeObject* tensor_type = (PyTypeObject*)k->st->torch_tensor_type;
  for (int r = m->nmatch; r < m->nrecs; r++) {
    TensorRec* rec = &m->recs[r];
    PyObject* o = bound[rec->arg];
    etb_tensor* t = &rec->t;
    DLTensor dl;
    /* what torch.empty_strided gave for the remembered spec is what the memo
     * remembered of it; anything else (a torch mode's tensor) takes the full path */
    if (Py_TYPE(o) != tensor_type) return 0;
    if (api->dltensor_from_py_object_no_sync(o, &dl) != 0) {
      PyErr_Clear();
      return 0;
    }
    uint32_t dtype;
    memcpy(&dtype, &dl.dtype, sizeof dtype);
    if (dl.device.device_type != kDLCPU || dl.ndim != t->ndim || dl.data == NULL || dtype != m->dl_dtypes[r] ||
        etops_tensor_maybe_lazy(o) || !same_contiguous_layout(&dl, t))
      return 0;
    t->data = (char*)dl.data + dl.byte_offset;
    rec->obj = o;
    rec->given = o;
    rec->span.first = (uintptr_t)t->data;
    rec->span.end = rec->span.first + m->nbytes[r];
  }
  return 1;
}

int memo_alloc_slot(const KernelObject* k) { return k->memo->allocating ? k->memo->alloc_slot : -1; }

uint64_t memo_alloc_sig(const KernelObject* k) { return k->memo->alloc_sig; }

void memo_release(KernelObject* k) { k->memo->busy = 0; }

etb_kernel_fn memo_fn(const KernelObject* k) { return k->memo->fn; }

int memo_slot(const KernelObject* k) { return k->memo->slot; }

etb_prepared* memo_prepared(const KernelObject* k) { return k->memo->prepared; }

int memo_state(const KernelObject* k) {
  if (k->memo == NULL || !k->memo->valid) return 0;
  return k->memo->prepared != NULL ? 2 : 1;
}

void memo_forget(KernelObject* k) {
  if (k->memo != NULL) k->memo->valid = 0;
}

/* The DLPack dtype (its 4 bytes) that etops_et_dtype maps to ExecuTorch's `dtype`,
 * or 0 (no DLPack dtype has lanes 0) when none does. */
static uint32_t dl_dtype_of(int8_t dtype) {
  static const uint8_t codes[] = {kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool, kDLFloat8_e5m2, kDLFloat8_e4m3fn,
                                  kDLFloat8_e5m2fnuz, kDLFloat8_e4m3fnuz};
  for (size_t c = 0; c < sizeof codes; c++) {
    for (unsigned bits = 8; bits <= 128; bits *= 2) {
      DLDataType t = {.code = codes[c], .bits = (uint8_t)bits, .lanes = 1};
      if (etops_et_dtype(t) != dtype) continue;
      uint32_t word;
      memcpy(&word, &t, sizeof word);
      return word;
    }
  }
  return 0;
}

/* Whether each out of an allocation ring entry's answer ((shape, strides, dtype) per
 * out) has the strides torch.empty gives its shape (a dim's stride the product of
 * the later sizes, each at least 1), so that tensor_alloc.c's contiguous tensors are
 * exactly what torch.empty_strided makes of it. Never raises. */
static int outs_as_torch_empty(PyObject* outs) {
  if (outs == NULL || !PyTuple_Check(outs)) return 0;
  for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(outs); j++) {
    PyObject* shape = PyTuple_GET_ITEM(PyTuple_GET_ITEM(outs, j), 0);
    PyObject* strides = PyTuple_GET_ITEM(PyTuple_GET_ITEM(outs, j), 1);
    Py_ssize_t n = PyTuple_GET_SIZE(shape);
    if (PyTuple_GET_SIZE(strides) != n) return 0;
    long long expected = 1;
    for (Py_ssize_t d = n - 1; d >= 0; d--) {
      long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, d));
      long long stride = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, d));
      if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
      }
      if (stride != expected) return 0;
      expected *= size > 1 ? size : 1;
    }
  }
  return 1;
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
  uint32_t* dl_dtypes = PyMem_Realloc(m->dl_dtypes, sizeof(uint32_t) * (size_t)n);
  if (dl_dtypes == NULL) return -1;
  m->dl_dtypes = dl_dtypes;
  int64_t(*layouts)[2 * ETB_MAX_DIM] = PyMem_Realloc(m->layouts, sizeof(*layouts) * (size_t)n);
  if (layouts == NULL) return -1;
  m->layouts = layouts;
  m->caprecs = n;
  return 0;
}

void memo_remember(KernelObject* k, const CallScratch* cs, PyObject* const* bound, const etb_value* vals,
                   etb_kernel_fn fn, int slot, int alloc_slot, uint64_t alloc_sig) {
  CallMemo* const held = k->memo;
  if (held != NULL && held->busy) return; /* an outer call is using it */
  /* A memo in use is replaced only by a signature that missed it twice in a row: a
   * loop over two signatures in turn would otherwise remember each call's. */
  if (held != NULL && held->valid && held->candidate != slot + 1) {
    held->candidate = slot + 1;
    return;
  }
  if (cs->ncopies != 0 || cs->keep.n != 0 || cs->keep.overflow != NULL || k->has_lists) return;
  uint8_t how[ETOPS_MAX_ARGS];
  int r = 0, nwrapped = 0, nmatch = -1;
  for (int i = 0; i < k->nargs; i++) {
    const ArgSpec* a = &k->args[i];
    PyObject* o = bound[i];
    if (alloc_slot >= 0 && (a->flags & F_OUT)) {
      /* an out C allocated for this call (every out is one): allocated again per call */
      if (r >= cs->nrecs || cs->recs[r]->arg != i || !cs->recs[r]->inline_contiguous || vals[i].tag != ETB_TENSOR ||
          vals[i].u.t != &cs->recs[r]->t)
        return;
      if (nmatch < 0) nmatch = r;
      how[i] = MEMO_FRESH;
      r++;
    } else if (nmatch >= 0 && a->kind == K_TENSOR && o != Py_None) {
      return; /* a tensor after an out (no schema has one): the recs from nmatch on must be outs */
    } else if (a->has_default_value && o == a->default_value) {
      how[i] = MEMO_DEFAULT;
    } else if (a->kind == K_TENSOR && vals[i].tag == ETB_TENSOR && vals[i].len == WRAPPED_NUMBER_LEN &&
               (PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyBool_Check(o))) {
      how[i] = MEMO_WRAPPED; /* the same number object wraps the same again */
      nwrapped++;
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
  if (nmatch < 0) nmatch = r;
  CallMemo* m = k->memo;
  if (m == NULL) {
    m = k->memo = PyMem_Calloc(1, sizeof(CallMemo));
    if (m == NULL) return;
  }
  m->valid = 0; /* (its prepared stack, pointing into the records rewritten below, is built again) */
  if (memo_reserve(m, r) < 0) return;
  if (nwrapped > m->capwrapped) {
    WrappedNumber* wrapped = PyMem_Realloc(m->wrapped, sizeof(WrappedNumber) * (size_t)nwrapped);
    if (wrapped == NULL) return;
    m->wrapped = wrapped;
    m->capwrapped = nwrapped;
  }
  for (int j = 0; j < r; j++) {
    const etb_tensor* t = &cs->recs[j]->t;
    m->recs[j] = *cs->recs[j];
    m->rec_ptrs[j] = &m->recs[j];
    m->nbytes[j] = cs->recs[j]->span.end - cs->recs[j]->span.first;
    m->dl_dtypes[j] = dl_dtype_of(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
      m->layouts[j][d] = t->sizes[d];
      m->layouts[j][ETB_MAX_DIM + d] = t->strides[d];
    }
  }
  r = 0;
  int w = 0;
  m->nsame = 0;
  for (int i = 0; i < k->nargs; i++) {
    Py_XSETREF(m->held[i], how[i] == MEMO_SAME || how[i] == MEMO_WRAPPED ? Py_NewRef(bound[i]) : NULL);
    if (how[i] != MEMO_TENSOR && how[i] != MEMO_FRESH) {
      m->same_arg[m->nsame] = (uint8_t)i;
      m->same_obj[m->nsame++] = bound[i];
    }
    m->vals[i] = vals[i];
    if (how[i] == MEMO_TENSOR || how[i] == MEMO_FRESH) {
      m->vals[i].u.t = &m->recs[r++].t;
    } else if (how[i] == MEMO_WRAPPED) { /* its tensor and value, out of the call's arena */
      WrappedNumber* n = &m->wrapped[w++];
      n->t = *vals[i].u.t;
      memcpy(n->data, vals[i].u.t->data, sizeof n->data);
      n->t.data = n->data;
      m->vals[i].u.t = &n->t;
    }
  }
  /* fresh return slots as every call starts them (the bridge wrote this call's results) */
  m->fresh_slots = 0;
  for (int i = k->nargs; i < k->nslots; i++) {
    m->vals[i] = k->args[i].default_converted;
    m->fresh_slots |= m->vals[i].tag == ETB_NONE;
  }
  m->nrecs = r;
  m->outs_contiguous = alloc_slot >= 0 && outs_as_torch_empty(k->allocated_outs[alloc_slot]);
  m->nmatch = nmatch;
  m->allocating = alloc_slot >= 0;
  m->alloc_slot = alloc_slot;
  m->alloc_sig = alloc_sig;
  m->numel_total = cs->numel_total;
  m->fn = fn;
  m->slot = slot;
  m->candidate = 0;
  m->signature = k->validated[slot];
  m->gen = k->gen;
  if (m->fresh_slots) { /* etb_call each time */
    etb_prepared_free(m->prepared);
    m->prepared = NULL;
  } else {
    m->prepared = etb_prepare(m->prepared, m->vals, k->nslots); /* NULL: etb_call each time */
  }
  m->valid = 1;
}

void memo_free(KernelObject* k) {
  CallMemo* m = k->memo;
  if (m == NULL) return;
  if (m->busy) { /* a call is using it (the kernel's clear during a call): dropped at dealloc */
    m->valid = 0;
    return;
  }
  for (int i = 0; i < ETOPS_MAX_ARGS; i++) Py_CLEAR(m->held[i]);
  etb_prepared_free(m->prepared);
  PyMem_Free(m->recs);
  PyMem_Free(m->layouts);
  PyMem_Free(m->rec_ptrs);
  PyMem_Free(m->nbytes);
  PyMem_Free(m->dl_dtypes);
  PyMem_Free(m->wrapped);
  PyMem_Free(m);
  k->memo = NULL;
}
