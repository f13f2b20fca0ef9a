/*
 * kernel_alloc.c - the outs of a call without out=, allocated in C.
 *
 * The first call of an input signature (alloc_signature) goes to the slow path,
 * which sizes the outs with torch's meta kernels, allocates them and calls the
 * kernel; then the kernel asks it what it allocated (`outs_to_remember`: a shape,
 * strides and dtype per out, or None for a signature that must keep the slow path)
 * and remembers it in a ring next to the validated signatures. Later calls of the
 * same signature allocate their outs here through torch.empty_strided and run as a
 * call with outs given (kernel_call.c). Data-dependent out shapes never get here
 * (the slow path answers False: the kernel stops asking).
 *
 * The hand-offs of such calls to the slow path are here too: the first call of a
 * signature (allocate_in_python) and a call whose allocated outs did not go as
 * remembered (allocate_again_in_python).
 *
 * Uses the module state's empty_strided (set by configure) and the slow-path table.
 */
#include "kernel_internal.h"

#include <string.h>

static inline uint64_t double_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static uint64_t tensor_strides(uint64_t h, const etb_tensor* t) {
  if (t == NULL) return h;
  for (int d = 0; d < t->ndim; d++) h = signature_mix(h, (uint32_t)t->strides[d]);
  return h;
}

/* What the out shapes, strides and dtypes of a call may depend on: call_signature
 * (dtypes, sizes, ints, bools by value) and also every tensor's strides (torch
 * gives outs its inputs' layout), doubles and strings by value (arange's end, a
 * rounding mode). */
static uint64_t alloc_signature(const etb_value* vals, int n) {
  uint64_t h = call_signature(vals, n);
  for (int i = 0; i < n; i++) {
    const etb_value* v = &vals[i];
    switch (v->tag) {
      case ETB_TENSOR: h = tensor_strides(h, v->u.t); break;
      case ETB_DOUBLE: h = signature_mix(h, double_bits(v->u.d)); break;
      case ETB_STRING:
        for (int j = 0; j < v->len; j++) h = signature_mix(h, (uint8_t)v->u.s[j]);
        break;
      case ETB_LIST_DOUBLE:
        for (int j = 0; j < v->len; j++) h = signature_mix(h, double_bits(v->u.doubles[j]));
        break;
      case ETB_LIST_TENSOR:
      case ETB_LIST_OPT_TENSOR:
        for (int j = 0; j < v->len; j++) h = tensor_strides(h, v->u.tensors[j]);
        break;
      default: break;
    }
  }
  return h;
}

int allocation_allowed(const KernelObject* k) {
  if (!k->validates || !k->static_outs_allowed || k->has_precheck || k->delegate != NULL) return 0;
  int nouts = 0;
  for (int i = 0; i < k->nargs; i++) {
    if (!(k->args[i].flags & F_OUT)) continue;
    if (k->args[i].kind != K_TENSOR) return 0; /* tensor-list outs keep the slow path */
    nouts++;
  }
  return nouts > 0;
}

int find_allocation(KernelObject* k, const CallScratch* cs, const etb_value* vals, uint64_t* sig) {
  if (cs->ncopies > 0 || k->st->empty_strided == NULL) return -2;
  uint64_t h = alloc_signature(vals, k->nargs);
  *sig = h;
  for (int n = 0, i = k->allocated_next; n < k->allocated_count; n++) {
    i = i == 0 ? ALLOCATION_SIGNATURES - 1 : i - 1;
    if (k->allocated[i] == h) return i;
  }
  return -1;
}

int allocation_known(const KernelObject* k, int slot) { return k->allocated_outs[slot] != Py_None; }

int allocate_outs(KernelObject* k, int slot, PyObject** bound, PyObject** fresh, int* nfresh) {
  /* checked by remember_outs: one (shape, strides, dtype) per out; held, as the
   * ring may change while torch allocates */
  PyObject* outs = Py_NewRef(k->allocated_outs[slot]);
  Py_ssize_t j = 0;
  int rc = 0;
  for (int i = 0; rc == 0 && i < k->nargs; i++) {
    if (!(k->args[i].flags & F_OUT)) continue;
    PyObject* spec = PyTuple_GET_ITEM(outs, j++);
    PyObject* call[3] = {PyTuple_GET_ITEM(spec, 0), PyTuple_GET_ITEM(spec, 1), PyTuple_GET_ITEM(spec, 2)};
    PyObject* out = PyObject_Vectorcall(k->st->empty_strided, call, 2, k->st->kwnames_dtype);
    if (out == NULL) {
      rc = -1;
    } else {
      fresh[(*nfresh)++] = out;
      bound[i] = out;
    }
  }
  Py_DECREF(outs);
  return rc;
}

/* A valid answer of outs_to_remember: None, or a tuple of (tuple, tuple, object)
 * with one item per out argument. */
static int valid_outs(const KernelObject* k, PyObject* outs) {
  if (outs == Py_None) return 1;
  int nouts = 0;
  for (int i = 0; i < k->nargs; i++) nouts += (k->args[i].flags & F_OUT) != 0;
  if (!PyTuple_Check(outs) || PyTuple_GET_SIZE(outs) != nouts) return 0;
  for (Py_ssize_t j = 0; j < nouts; j++) {
    PyObject* spec = PyTuple_GET_ITEM(outs, j);
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 3 || !PyTuple_Check(PyTuple_GET_ITEM(spec, 0)) ||
        !PyTuple_Check(PyTuple_GET_ITEM(spec, 1)))
      return 0;
  }
  return 1;
}

int remember_outs(KernelObject* k, uint64_t sig, PyObject* outs) {
  if (outs == Py_False) { /* no signature of this kernel fixes its out shapes */
    k->allocates = 0;
    return 0;
  }
  if (!valid_outs(k, outs)) {
    PyErr_Format(PyExc_TypeError, "%s: the slow path's outs_to_remember gave a malformed answer", k->op_name);
    return -1;
  }
  int i = k->allocated_next;
  Py_XSETREF(k->allocated_outs[i], Py_NewRef(outs));
  k->allocated[i] = sig;
  k->allocated_next = (i + 1) % ALLOCATION_SIGNATURES;
  if (k->allocated_count < ALLOCATION_SIGNATURES) k->allocated_count++;
  return 0;
}

void forget_allocation(KernelObject* k, int slot) { Py_XSETREF(k->allocated_outs[slot], Py_NewRef(Py_None)); }

void clear_allocations(KernelObject* k) {
  for (int i = 0; i < ALLOCATION_SIGNATURES; i++) Py_CLEAR(k->allocated_outs[i]);
  k->allocated_count = k->allocated_next = 0;
}

/* ---- the slow path's allocations ------------------------------------------------------ */

PyObject* allocate_in_python(KernelObject* k, CallScratch* cs, PyObject** bound, int remember, uint64_t sig) {
  etops_keep_release(&cs->keep);
  PyObject* result = slow_call(k, SLOW_ALLOCATE_AND_CALL, bound, NULL);
  if (result == NULL || !remember || !k->allocates) return result;
  PyObject* outs = slow_call(k, SLOW_OUTS_TO_REMEMBER, bound, NULL);
  if (outs == NULL || remember_outs(k, sig, outs) < 0) Py_CLEAR(result);
  Py_XDECREF(outs);
  return result;
}

PyObject* allocate_again_in_python(KernelObject* k, CallScratch* cs, PyObject** bound, int slot) {
  forget_allocation(k, slot);
  for (int i = 0; i < k->nargs; i++) {
    if (k->args[i].flags & F_OUT) bound[i] = NULL;
  }
  return allocate_in_python(k, cs, bound, 0, 0);
}

int convert_outs(KernelObject* k, CallScratch* cs, PyObject** bound, etb_value* vals) {
  for (int i = 0; i < k->nargs; i++) {
    if ((k->args[i].flags & F_OUT) && convert_arg(k, cs, i, bound[i], &vals[i]) < 0) return -1;
  }
  return 0;
}

PyObject* allocated_outs_result(const KernelObject* k, PyObject* const* bound) {
  PyObject* outs[ETOPS_MAX_ARGS];
  int n = 0;
  for (int i = 0; i < k->nargs; i++) {
    if (k->args[i].flags & F_OUT) outs[n++] = bound[i];
  }
  if (n == 1) return Py_NewRef(outs[0]);
  PyObject* tup = PyTuple_New(n);
  for (int j = 0; tup != NULL && j < n; j++) PyTuple_SET_ITEM(tup, j, Py_NewRef(outs[j]));
  return tup;
}

int no_out_given(const KernelObject* k, PyObject* const* bound) {
  for (int i = 0; i < k->nargs; i++) {
    if ((k->args[i].flags & F_OUT) && bound[i] != NULL && bound[i] != Py_None) return 0;
  }
  return 1;
}
