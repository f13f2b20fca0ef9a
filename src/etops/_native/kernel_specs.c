/*
 * kernel_specs.c - a delegate's tensor specs: what the tensor of each argument must
 * be (dtype, dim order, sizes when static), read once from Python (parse_specs) and
 * checked in C on every call (matches_specs), with the check that no out shares
 * bytes with an input (tensor_byte_range). A call that does not match goes to the slow
 * path, which raises the error naming the argument (or accepts an out to resize).
 */
#include "kernel_internal.h"
#include "tensor_inline.h"

#include <string.h>

int parse_specs(KernelObject* k, PyObject* specs) {
  PyObject* seq = PySequence_Fast(specs, "specs must be a sequence");
  if (seq == NULL) return -1;
  if (PySequence_Fast_GET_SIZE(seq) != k->nargs) {
    Py_DECREF(seq);
    PyErr_Format(PyExc_ValueError, "%s: specs needs one entry per argument (%d)", k->op_name, k->nargs);
    return -1;
  }
  k->specs = (TensorSpec*)PyMem_Calloc((size_t)k->nargs, sizeof(TensorSpec));
  if (k->specs == NULL) {
    Py_DECREF(seq);
    PyErr_NoMemory();
    return -1;
  }
  for (int i = 0; i < k->nargs; i++) {
    TensorSpec* s = &k->specs[i];
    s->dtype = -1;
    PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
    if (item == Py_None) continue;
    int dtype;
    PyObject *sizes, *order;
    if (!PyArg_ParseTuple(item, "iOO", &dtype, &sizes, &order)) goto fail;
    PyObject* oseq = PySequence_Fast(order, "dim order must be a sequence");
    if (oseq == NULL) goto fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(oseq);
    if (n > ETB_MAX_DIM) {
      Py_DECREF(oseq);
      PyErr_SetString(PyExc_ValueError, "spec with more than 16 dims");
      goto fail;
    }
    s->ndim = (uint8_t)n;
    for (Py_ssize_t d = 0; d < n; d++) s->dim_order[d] = (uint8_t)PyLong_AsLong(PySequence_Fast_GET_ITEM(oseq, d));
    Py_DECREF(oseq);
    if (sizes != Py_None) {
      PyObject* sseq = PySequence_Fast(sizes, "sizes must be a sequence");
      if (sseq == NULL) goto fail;
      if (PySequence_Fast_GET_SIZE(sseq) != n) {
        Py_DECREF(sseq);
        PyErr_SetString(PyExc_ValueError, "spec sizes and dim order differ in length");
        goto fail;
      }
      for (Py_ssize_t d = 0; d < n; d++) s->sizes[d] = (int32_t)PyLong_AsLong(PySequence_Fast_GET_ITEM(sseq, d));
      Py_DECREF(sseq);
      s->check_sizes = 1;
    }
    s->dtype = (int8_t)dtype;
    if (PyErr_Occurred()) goto fail;
  }
  Py_DECREF(seq);
  return 0;
fail:
  Py_DECREF(seq);
  return -1;
}

/* Bytes per element of each ExecuTorch ScalarType etops borrows (tensor.c), checked
 * against that map at import (check_element_sizes): a probe copies exactly these
 * bytes. The others (quantized, bit-packed) never reach a call; ELEMENT_SIZE_UNKNOWN
 * covers them with the widest plain size so an overlap check errs towards "may overlap". */
#define ELEMENT_SIZE_UNKNOWN 8
static const uint8_t ELEMENT_SIZE[ETB_DTYPE_COUNT] = {
    [ETB_DTYPE_BYTE] = 1,
    [ETB_DTYPE_CHAR] = 1,
    [ETB_DTYPE_SHORT] = 2,
    [ETB_DTYPE_INT] = 4,
    [ETB_DTYPE_LONG] = 8,
    [ETB_DTYPE_HALF] = 2,
    [ETB_DTYPE_FLOAT] = 4,
    [ETB_DTYPE_DOUBLE] = 8,
    [ETB_DTYPE_COMPLEX_HALF] = 4,
    [ETB_DTYPE_COMPLEX_FLOAT] = 8,
    [ETB_DTYPE_COMPLEX_DOUBLE] = 16,
    [ETB_DTYPE_BOOL] = 1,
    [ETB_DTYPE_BFLOAT16] = 2,
    [ETB_DTYPE_FLOAT8_E5M2] = 1,
    [ETB_DTYPE_FLOAT8_E4M3FN] = 1,
    [ETB_DTYPE_FLOAT8_E5M2FNUZ] = 1,
    [ETB_DTYPE_FLOAT8_E4M3FNUZ] = 1,
    [ETB_DTYPE_UINT16] = 2,
    [ETB_DTYPE_UINT32] = 4,
    [ETB_DTYPE_UINT64] = 8,
};

size_t tensor_element_size(int8_t dtype) {
  if (dtype < 0 || dtype >= ETB_DTYPE_COUNT || ELEMENT_SIZE[dtype] == 0) return ELEMENT_SIZE_UNKNOWN;
  return ELEMENT_SIZE[dtype];
}

int check_element_sizes(void) {
  for (int code = 0; code <= kDLBool; code++) {
    for (int b = 0; b < 5; b++) {
      int dtype = ETOPS_DTYPE_BY_CODE_BITS[code][b];
      if (dtype >= 0 && ELEMENT_SIZE[dtype] != (1u << b)) {
        PyErr_Format(PyExc_ImportError, "etops internal: ScalarType %d has no element size of %u bytes", dtype, 1u << b);
        return -1;
      }
    }
  }
  return 0;
}

void tensor_byte_range(const etb_tensor* t, uintptr_t* first, uintptr_t* end) {
  uint64_t extent = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (t->sizes[d] == 0) extent = 0;
  }
  if (extent != 0) {
    for (int d = 0; d < t->ndim; d++) extent += (uint64_t)(t->sizes[d] - 1) * (uint64_t)t->strides[d];
  }
  *first = (uintptr_t)t->data;
  *end = *first + (uintptr_t)(extent * tensor_element_size(t->dtype));
}

int matches_specs(const KernelObject* k, const etb_value* vals) {
  for (int i = 0; i < k->nargs; i++) {
    const TensorSpec* s = &k->specs[i];
    if (s->dtype < 0 || vals[i].tag != ETB_TENSOR) continue;
    const etb_tensor* t = vals[i].u.t;
    if (t->dtype != s->dtype || t->ndim != s->ndim || memcmp(t->dim_order, s->dim_order, t->ndim) != 0) return 0;
    if (s->check_sizes && memcmp(t->sizes, s->sizes, sizeof(int32_t) * t->ndim) != 0) return 0;
    if (!(k->args[i].flags & F_OUT)) continue;
    uintptr_t first, end;
    tensor_byte_range(t, &first, &end);
    for (int j = 0; j < k->nargs; j++) {
      if (j == i || (k->args[j].flags & F_OUT) || vals[j].tag != ETB_TENSOR) continue;
      uintptr_t other_first, other_end;
      tensor_byte_range(vals[j].u.t, &other_first, &other_end);
      if (first < other_end && other_first < end) return 0;
    }
  }
  return 1;
}
