/*
 * tensor.c - borrowing tensors for a kernel call, zero-copy, through DLPack.
 *
 * torch.Tensor (and subclasses) go through torch's DLPack C exchange API
 * (`__dlpack_c_exchange_api__`), which fills a DLTensor on our stack without
 * allocating. Any other producer (numpy, ...) goes through `__dlpack__`, whose
 * capsule is kept alive until the call ends. The layout is then mapped to an
 * ExecuTorch dim order: contiguous, channels-last or any other permutation of a
 * dense tensor; anything else is reported as not dense. A torch tensor with a lazy
 * negative or conjugate bit (read from torch's key set, tensor_fields.h) is reported
 * LAYOUT_CONJUGATE, to be resolved. The common case of the call path (a contiguous
 * torch.Tensor without either bit) is inline in its caller: tensor_inline.h.
 */
#include "tensor_inline.h"
#include "tensor_fields.h"

#include <stdarg.h>

int etops_keep_add(etops_keep* keep, PyObject* obj) {
  if (keep->n < (int)(sizeof(keep->objs) / sizeof(keep->objs[0]))) {
    keep->objs[keep->n++] = obj;
    return 0;
  }
  if (keep->overflow == NULL && (keep->overflow = PyList_New(0)) == NULL) {
    Py_DECREF(obj);
    return -1;
  }
  int rc = PyList_Append(keep->overflow, obj);
  Py_DECREF(obj);
  return rc;
}

void etops_keep_release(etops_keep* keep) {
  for (int i = 0; i < keep->n; i++) Py_DECREF(keep->objs[i]);
  keep->n = 0;
  Py_CLEAR(keep->overflow);
}

/* Whether `order` describes a dense layout of (sizes, strides); size-1 dims may
 * have any stride. */
static int dense_in_order(int ndim, const int64_t* sizes, const int64_t* strides,
                          const uint8_t* order) {
  int64_t expected = 1;
  for (int k = ndim - 1; k >= 0; k--) {
    int d = order[k];
    if (sizes[d] != 1 && strides[d] != expected) return 0;
    expected *= sizes[d];
  }
  return 1;
}

_Thread_local int etops_layout_preserve = 0;

enum { ORDER_NONE = 0, ORDER_CONTIGUOUS, ORDER_CHANNELS_LAST, ORDER_OTHER };

/* Finds the ExecuTorch dim order of a dense tensor: contiguous first, then
 * channels-last, then the order of decreasing strides. Returns which of those it
 * is, ORDER_NONE if the tensor is not dense. */
static int find_dim_order(int ndim, const int64_t* sizes, const int64_t* strides, uint8_t* order) {
  for (int i = 0; i < ndim; i++) order[i] = (uint8_t)i;
  if (strides == NULL || dense_in_order(ndim, sizes, strides, order)) return ORDER_CONTIGUOUS;
  for (int i = 0; i < ndim; i++) {
    if (sizes[i] == 0) return ORDER_CONTIGUOUS; /* empty: any order is dense; keep contiguous */
  }
  if (ndim == 4 || ndim == 5) { /* channels-last: N, spatial..., C */
    order[ndim - 1] = 1;
    for (int i = 1; i < ndim - 1; i++) order[i] = (uint8_t)(i + 1);
    if (dense_in_order(ndim, sizes, strides, order)) return ORDER_CHANNELS_LAST;
  }
  /* Insertion sort by stride descending, ties by index: stable and tiny. */
  for (int i = 0; i < ndim; i++) order[i] = (uint8_t)i;
  for (int i = 1; i < ndim; i++) {
    uint8_t d = order[i];
    int j = i - 1;
    while (j >= 0 && strides[order[j]] < strides[d]) {
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = d;
  }
  return dense_in_order(ndim, sizes, strides, order) ? ORDER_OTHER : ORDER_NONE;
}

/* Bytes per element of a DLPack dtype. */
static inline uint64_t item_bytes(DLDataType t) { return ((uint64_t)t.bits * t.lanes + 7) / 8; }

/* The span of a tensor etops_fill_contiguous did not place (any strides, negative ones
 * too: the lowest and highest byte any index reaches), and in *numel its elements.
 * Out of line: the common call never runs it. */
static Py_NO_INLINE void general_span(const DLTensor* dl, etops_span* span, int64_t* numel) {
  uintptr_t data = (uintptr_t)dl->data + (uintptr_t)dl->byte_offset;
  int64_t n = 1;
  for (int d = 0; d < dl->ndim; d++) n *= dl->shape[d] > 0 ? dl->shape[d] : 0;
  *numel = n;
  if (n == 0) {
    span->first = span->end = data;
    return;
  }
  int64_t low = 0, high = 0, contiguous = 1; /* in elements, from data */
  for (int d = dl->ndim - 1; d >= 0; d--) {
    int64_t stride = dl->strides != NULL ? dl->strides[d] : contiguous;
    int64_t reach = (dl->shape[d] - 1) * stride;
    if (reach < 0) low += reach;
    else high += reach;
    contiguous *= dl->shape[d];
  }
  uint64_t item = item_bytes(dl->dtype);
  span->first = data + (uintptr_t)(low * (int64_t)item);
  span->end = data + (uintptr_t)((high + 1) * (int64_t)item);
}

/* A tensor with elements and no data pointer (its storage was freed, e.g.
 * untyped_storage().resize_(0), or a wrapper whose memory is elsewhere): refused
 * before a kernel reads or writes address 0. Returns -1. */
static Py_NO_INLINE int refuse_no_data(const char* op, const char* what) {
  return etops_unrepresentable(
      "%s: argument '%s' has elements but no data (its storage was freed, or it is a wrapper whose data is "
      "elsewhere); ExecuTorch kernels need a CPU tensor with its memory",
      op, what);
}

/* The DLPack C exchange API of a type other than torch.Tensor's, or NULL; the last
 * one asked is remembered. */
static Py_NO_INLINE const DLPackExchangeAPI* other_exchange_api(etops_state* st, PyTypeObject* tp) {
  const DLPackExchangeAPI* api = NULL;
  PyObject* cap = PyObject_GetAttrString((PyObject*)tp, "__dlpack_c_exchange_api__");
  if (cap == NULL) {
    PyErr_Clear();
  } else {
    api = (const DLPackExchangeAPI*)PyCapsule_GetPointer(cap, "dlpack_exchange_api");
    if (api == NULL || api->header.version.major != DLPACK_MAJOR_VERSION) {
      PyErr_Clear();
      api = NULL;
    }
    Py_DECREF(cap);
  }
  st->other_type = tp; /* borrowed: only compared, never dereferenced */
  st->other_api = api;
  return api;
}

/* Whether torch.Tensor subclass `tp` is refused: it has a __torch_dispatch__ of its
 * own (FakeTensor, TwoTensor and other wrapper subclasses), so what DLPack would see
 * is not its data (a fake or meta impl, or no storage: borrowing it crashes). Plain
 * subclasses (nn.Parameter, a subclass adding methods) are borrowed as tensors. The
 * last subclass asked is remembered. Out of line: torch.Tensor itself never asks. */
static Py_NO_INLINE int subclass_refused(etops_state* st, PyTypeObject* tp) {
  if (tp == st->subclass_type) return st->subclass_refused;
  static PyObject* name = NULL;
  if (name == NULL && (name = PyUnicode_InternFromString("__torch_dispatch__")) == NULL) return -1;
  int refused = _PyType_Lookup(tp, name) != _PyType_Lookup((PyTypeObject*)st->torch_tensor_type, name);
  Py_XSETREF(st->subclass_type, (PyTypeObject*)Py_NewRef((PyObject*)tp));
  st->subclass_refused = refused;
  return refused;
}

/* The producer's DLPack C exchange API for this object's type, or NULL (for a
 * refused torch.Tensor subclass: NULL with a TypeError set naming `what`). */
static inline const DLPackExchangeAPI* exchange_api_of(etops_state* st, PyObject* obj, const char* op,
                                                       const char* what) {
  PyTypeObject* tp = Py_TYPE(obj);
  if (st->torch_api != NULL && tp == (PyTypeObject*)st->torch_tensor_type) return st->torch_api;
  if (st->torch_api != NULL && st->torch_tensor_type != NULL &&
      PyType_IsSubtype(tp, (PyTypeObject*)st->torch_tensor_type)) {
    int refused = subclass_refused(st, tp);
    if (refused > 0) {
      PyErr_Format(PyExc_TypeError,
                   "%s: argument '%s' is a %.100s, a tensor subclass with its own __torch_dispatch__ (a fake, "
                   "meta or wrapper tensor: its data is not in its own memory); ExecuTorch kernels take plain CPU "
                   "tensors with their data",
                   op, what, tp->tp_name);
    }
    return refused == 0 ? st->torch_api : NULL;
  }
  if (tp == st->other_type) return st->other_api;
  return other_exchange_api(st, tp);
}

/* Replaces the pending exception by a ValueError naming the operator and argument,
 * keeping the producer's message. Returns -1. */
static int rewrap_error(const char* op, const char* what, const char* failed_to) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_Format(PyExc_ValueError, "%s: argument '%s' could not be %s through DLPack: %S", op, what, failed_to,
               value ? value : Py_None);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return -1;
}

/* A torch tensor torch's exchange API refused (a meta, sparse, mkldnn or quantized
 * tensor, a functorch wrapper without storage): ExecuTorch cannot hold it, an
 * UnrepresentableError (a TypeError and a ValueError) naming the argument. Returns -1. */
static Py_NO_INLINE int refuse_torch_tensor(const char* op, const char* what) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject* message = value != NULL ? PyObject_Str(value) : NULL;
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  if (message == NULL) {
    PyErr_Clear();
    message = PyUnicode_FromString("?");
    if (message == NULL) return -1;
  }
  int rc = etops_unrepresentable(
      "%s: argument '%s' could not be borrowed through DLPack: %U (ExecuTorch kernels take strided CPU tensors "
      "with their data)",
      op, what, message);
  Py_DECREF(message);
  return rc;
}

/* Borrows through __dlpack__; the capsule goes into `keep`. */
static int borrow_via_dlpack_protocol(etops_state* st, PyObject* obj, DLTensor* dl,
                                      int* read_only, etops_keep* keep, const char* op,
                                      const char* what) {
  PyObject* meth = PyObject_GetAttr(obj, st->str_dlpack);
  if (meth == NULL) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be a Tensor (torch.Tensor or an object with __dlpack__), not %.100s",
                 op, what, Py_TYPE(obj)->tp_name);
    return -1;
  }
  PyObject* kwargs = Py_BuildValue("{s:(ii)}", "max_version", 1, 0);
  PyObject* empty = PyTuple_New(0);
  PyObject* cap = (kwargs && empty) ? PyObject_Call(meth, empty, kwargs) : NULL;
  Py_XDECREF(kwargs);
  Py_XDECREF(empty);
  if (cap == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear(); /* a producer from before DLPack 1.0 */
    cap = PyObject_CallNoArgs(meth);
  }
  Py_DECREF(meth);
  if (cap == NULL) return rewrap_error(op, what, "exported");
  if (etops_keep_add(keep, cap) < 0) return -1;
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    DLManagedTensorVersioned* m = (DLManagedTensorVersioned*)PyCapsule_GetPointer(cap, "dltensor_versioned");
    *dl = m->dl_tensor;
    *read_only = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    return 0;
  }
  if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor* m = (DLManagedTensor*)PyCapsule_GetPointer(cap, "dltensor");
    *dl = m->dl_tensor;
    *read_only = 0;
    return 0;
  }
  PyErr_Format(PyExc_TypeError, "%s: argument '%s': __dlpack__ returned no DLPack capsule", op, what);
  return -1;
}

int etops_refuse_overlapping_write(const char* op, const char* what) {
  PyErr_Format(PyExc_ValueError,
               "%s: argument '%s' is expanded (several of its elements share memory); the kernel writes it, "
               "so it must not overlap itself (clone it first)",
               op, what);
  return -1;
}

/* The layout of a tensor etops_fill_contiguous did not place (not contiguous, empty, a
 * size or stride beyond int32, or a torch tensor with a lazy negative or conjugate
 * bit, `lazy`): etops_borrow_tensor's result for it, `out`'s layout filled unless
 * LAYOUT_NOT_DENSE / LAYOUT_OVERLAPPING or an error. Out of line: the common call
 * never runs it. */
static Py_NO_INLINE int borrow_general_layout(int lazy, const DLTensor* dl, etb_tensor* out, const char* op,
                                              const char* what, etops_span* span) {
  int ndim = dl->ndim;
  etops_span local;
  int64_t numel;
  general_span(dl, span != NULL ? span : &local, &numel);
  if (numel != 0 && dl->data == NULL) return refuse_no_data(op, what);
  for (int i = 0; i < ndim; i++) {
    if (dl->shape[i] < 0 || dl->shape[i] > INT32_MAX) {
      return etops_unrepresentable("%s: argument '%s' has size %lld at dim %d, beyond ExecuTorch's int32 sizes",
                                   op, what, (long long)dl->shape[i], i);
    }
  }
  /* torch's lazy conjugation and negation are bits on the tensor, not in its memory
   * (nor in DLPack): such a tensor is resolved into a copy first (densify resolves it) */
  const int conjugate = lazy;
  int found = find_dim_order(ndim, dl->shape, dl->strides, out->dim_order);
  if (found == ORDER_NONE) {
    for (int i = 0; i < ndim; i++) {
      if (dl->shape[i] > 1 && dl->strides != NULL && dl->strides[i] == 0) return LAYOUT_OVERLAPPING;
    }
    return LAYOUT_NOT_DENSE;
  }
  int64_t expected = 1;
  for (int k = ndim - 1; k >= 0; k--) {
    int d = out->dim_order[k];
    if (expected > INT32_MAX) {
      return etops_unrepresentable("%s: argument '%s' has strides beyond ExecuTorch's int32 strides", op, what);
    }
    out->strides[d] = (int32_t)expected;
    out->sizes[d] = (int32_t)dl->shape[d];
    expected *= dl->shape[d] == 0 ? 1 : dl->shape[d];
  }
  if (conjugate) return LAYOUT_CONJUGATE; /* out is filled: its layout as if resolved */
  return found == ORDER_OTHER && !etops_layout_preserve ? LAYOUT_PERMUTED : LAYOUT_DENSE;
}

int etops_unrepresentable(const char* fmt, ...) {
  va_list vargs;
  va_start(vargs, fmt);
  PyObject* message = PyUnicode_FromFormatV(fmt, vargs);
  va_end(vargs);
  if (message == NULL) return -1;
  PyObject* errors = PyImport_ImportModule("etops.errors"); /* the error path only */
  PyObject* type = errors != NULL ? PyObject_GetAttrString(errors, "UnrepresentableError") : NULL;
  Py_XDECREF(errors);
  if (type == NULL) {
    PyErr_Clear();
    type = Py_NewRef(PyExc_ValueError);
  }
  PyErr_SetObject(type, message);
  Py_DECREF(type);
  Py_DECREF(message);
  return -1;
}

/* The checks and the layout of a DLTensor borrowed from `obj` (`torch_tensor`: a
 * torch.Tensor, exact or a subclass, whose lazy bits tensor_fields.h reads; else a
 * producer without them): etops_borrow_tensor's result. */
static int place_borrowed(PyObject* obj, int torch_tensor, const DLTensor* dl, int read_only, etb_tensor* out,
                          const char* op, const char* what, int writable, etops_span* span) {
  if (dl->device.device_type != kDLCPU) {
    PyErr_Format(PyExc_ValueError,
                 "%s: argument '%s' is on device type %d; ExecuTorch kernels run on CPU tensors only",
                 op, what, (int)dl->device.device_type);
    return -1;
  }
  if (writable && read_only) {
    PyErr_Format(PyExc_ValueError, "%s: argument '%s' is read-only but the kernel writes it", op, what);
    return -1;
  }
  if (dl->ndim < 0 || dl->ndim > ETB_MAX_DIM) {
    return etops_unrepresentable("%s: argument '%s' has %d dims; ExecuTorch supports at most %d", op, what,
                                 (int)dl->ndim, ETB_MAX_DIM);
  }
  int dtype = etops_et_dtype(dl->dtype);
  if (dtype < 0) {
    return etops_unrepresentable("%s: argument '%s' has a dtype ExecuTorch cannot represent (DLPack code %d, %d bits, %d lanes)",
                                 op, what, (int)dl->dtype.code, (int)dl->dtype.bits, (int)dl->dtype.lanes);
  }
  out->data = (char*)dl->data + dl->byte_offset;
  out->dtype = (int8_t)dtype;
  out->ndim = (uint8_t)dl->ndim;
  out->dynamism = ETB_STATIC;
  out->resized = 0;
  /* torch's tensors of any dtype and layout may carry a lazy negative or conjugate bit */
  int lazy = torch_tensor ? etops_tensor_lazy(obj) : 0;
  if (lazy < 0) return -1;
  int64_t numel;
  if (!lazy && (numel = etops_fill_contiguous(dl, out)) > 0) {
    if (out->data == NULL) return refuse_no_data(op, what); /* numel > 0 here */
    if (span != NULL) {
      span->first = (uintptr_t)out->data;
      span->end = span->first + (uintptr_t)numel * (uintptr_t)item_bytes(dl->dtype);
    }
    return LAYOUT_DENSE;
  }
  return borrow_general_layout(lazy, dl, out, op, what, span);
}

int etops_borrow_torch_rest(PyObject* obj, const DLTensor* dl, etb_tensor* out, const char* op, const char* what,
                            int writable, etops_span* span) {
  return place_borrowed(obj, 1, dl, 0, out, op, what, writable, span);
}

int etops_borrow_failed(const char* op, const char* what) { return refuse_torch_tensor(op, what); }

int etops_borrow_tensor(etops_state* st, PyObject* obj, etb_tensor* out, etops_keep* keep,
                        const char* op, const char* what, int writable, etops_span* span) {
  DLTensor dl;
  int read_only = 0;
  const DLPackExchangeAPI* api = exchange_api_of(st, obj, op, what);
  if (api != NULL) {
    if (api->dltensor_from_py_object_no_sync(obj, &dl) != 0) {
      return api == st->torch_api ? refuse_torch_tensor(op, what) : rewrap_error(op, what, "borrowed");
    }
  } else if (PyErr_Occurred()) {
    return -1; /* a refused torch.Tensor subclass */
  } else if (borrow_via_dlpack_protocol(st, obj, &dl, &read_only, keep, op, what) < 0) {
    return -1;
  }
  return place_borrowed(obj, api != NULL && api == st->torch_api, &dl, read_only, out, op, what, writable, span);
}

PyObject* etops_sizes_tuple(const etb_tensor* t) {
  PyObject* tup = PyTuple_New(t->ndim);
  if (tup == NULL) return NULL;
  for (int i = 0; i < t->ndim; i++) {
    PyObject* v = PyLong_FromLong(t->sizes[i]);
    if (v == NULL) {
      Py_DECREF(tup);
      return NULL;
    }
    PyTuple_SET_ITEM(tup, i, v);
  }
  return tup;
}
