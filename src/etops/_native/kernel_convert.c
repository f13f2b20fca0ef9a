/*
 * kernel_convert.c - argument conversion: one Python argument into the etb_value
 * the bridge reads, by the kind the plan gives it (etops/plan.py).
 *
 * Each kind has its converter, found in CONVERTERS by kind. Tensors are borrowed
 * zero-copy (tensor.c) and recorded in the call's scratch; lists are converted into
 * arena memory (number lists: kernel_convert_list.c). Every refusal is a TypeError / ValueError / OverflowError naming the
 * operator and the argument (list items as 'name[i]').
 */
#include "kernel_internal.h"
#include "tensor_inline.h"

#include <string.h>

int type_error(KernelObject* k, const ArgSpec* a, const char* expected, PyObject* got) {
  PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be %s, not %.100s", k->op_name, a->cname,
               expected, Py_TYPE(got)->tp_name);
  return -1;
}

static int is_contiguous_order(const etb_tensor* t) {
  for (int d = 0; d < t->ndim; d++) {
    if (t->dim_order[d] != d) return 0;
  }
  return 1;
}

/* The rest of borrow() for a tensor that is not passed as it is: `rc` says why
 * (not dense, permuted, conjugate, or not contiguous for a contiguous_only
 * kernel). A contiguous copy (state's densify) replaces it; a written one is
 * copied back after the call, unless it is expanded (elements sharing memory,
 * which torch refuses to write too). */
static int borrow_dense_copy(KernelObject* k, CallScratch* cs, TensorRec* r, int rc, const char* what,
                             int writable) {
  if (rc == LAYOUT_OVERLAPPING && writable) return etops_refuse_overlapping_write(k->op_name, what);
  PyObject* obj = r->obj;
  /* densify(obj, operator, argument): it checks the view's bounds first, per call */
  PyObject* dense = PyObject_CallFunction(k->st->densify, "Oss", obj, k->op_name, what);
  if (dense == NULL || etops_keep_add(&cs->keep, dense) < 0) return -1;
  r->obj = dense;
  cs->ncopies++;
  if (writable) r->copy_back_to = obj;
  rc = etops_borrow_tensor(k->st, dense, &r->t, &cs->keep, k->op_name, what, writable, NULL);
  if (rc != LAYOUT_DENSE || (k->contiguous_only && !is_contiguous_order(&r->t))) {
    if (rc > 0) PyErr_Format(PyExc_ValueError, "%s: argument '%s' could not be made dense", k->op_name, what);
    return -1;
  }
  return 0;
}

/* Calls the kernel's warn_layout(what, dim order): the rules table knows this kernel
 * computes wrong values on some layout, and a tensor in a non-contiguous order
 * reaches it as it is without the user opting in (etops.layout("preserve")). Out of
 * line: only kernels with such a record get here, and only for such a tensor. */
static Py_NO_INLINE int warn_layout(KernelObject* k, const etb_tensor* t, const char* what) {
  PyObject* order = PyTuple_New(t->ndim);
  if (order == NULL) return -1;
  for (int d = 0; d < t->ndim; d++) PyTuple_SET_ITEM(order, d, PyLong_FromLong(t->dim_order[d]));
  PyObject* res = PyObject_CallFunction(k->warn_layout, "sO", what, order);
  Py_DECREF(order);
  if (res == NULL) return -1;
  Py_DECREF(res);
  return 0;
}

/* Borrows `obj` as tensor `what` of argument `arg`. Tensors reach the kernel as an
 * exported program lays them out: a non-dense input, or one in a permuted dim order
 * (unless the thread's layout mode is "preserve"), is replaced by a contiguous copy,
 * and so is any non-contiguous one for a kernel marked contiguous_only
 * (borrow_dense_copy). Small, so that its callers inline it: the copy is the rare path. */
static ETOPS_ALWAYS_INLINE TensorRec* borrow(KernelObject* k, CallScratch* cs, PyObject* obj, int arg, const char* what,
                                int writable) {
  TensorRec* r = scratch_new_rec(cs);
  if (r == NULL) return NULL;
  r->obj = obj;
  r->given = obj;
  r->copy_back_to = NULL;
  r->arg = arg;
  r->written = (uint8_t)writable;
  r->inline_contiguous = 0;
  int rc;
  if (Py_TYPE(obj) == (PyTypeObject*)k->st->torch_tensor_type && k->st->torch_api != NULL) {
    int64_t numel;
    const DLTensor* pre = NULL; /* what a call memo that did not match asked torch for this argument */
    if (cs->pre_mask != 0 && arg < 64 && ((cs->pre_mask >> arg) & 1)) {
      pre = &cs->pre_dl[arg];
      cs->pre_mask &= ~((uint64_t)1 << arg);
    }
    rc = etops_borrow_torch(k->st, obj, &r->t, k->op_name, what, writable, &numel, &r->span, pre);
    if (rc == LAYOUT_CONTIGUOUS) { /* the common case: nothing below applies to it */
      r->as_given = 1;
      r->inline_contiguous = 1;
      cs->numel_total += numel;
      return r;
    }
  } else {
    rc = etops_borrow_tensor(k->st, obj, &r->t, &cs->keep, k->op_name, what, writable, &r->span);
  }
  if (rc < 0) return NULL;
  r->as_given = rc == LAYOUT_DENSE && !(k->contiguous_only && !is_contiguous_order(&r->t));
  if (rc == LAYOUT_DENSE && k->contiguous_only && !is_contiguous_order(&r->t)) rc = LAYOUT_PERMUTED;
  if (rc != LAYOUT_DENSE && borrow_dense_copy(k, cs, r, rc, what, writable) < 0) return NULL;
  if (k->warn_layout != NULL && rc == LAYOUT_DENSE && !etops_layout_preserve && !is_contiguous_order(&r->t) &&
      warn_layout(k, &r->t, what) < 0)
    return NULL;
  int64_t numel = 1;
  for (int i = 0; i < r->t.ndim; i++) numel *= r->t.sizes[i];
  cs->numel_total += numel;
  return r;
}

int as_int64(KernelObject* k, const ArgSpec* a, PyObject* o, int64_t* out) {
  if (PyBool_Check(o) || PyFloat_Check(o)) return type_error(k, a, "an int", o);
  PyObject* idx = PyNumber_Index(o);
  if (idx == NULL) {
    PyErr_Clear();
    return type_error(k, a, "an int", o);
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
  Py_DECREF(idx);
  if (overflow != 0) {
    PyErr_Format(PyExc_OverflowError, "%s: argument '%s' does not fit in int64", k->op_name, a->cname);
    return -1;
  }
  if (v == -1 && PyErr_Occurred()) return -1;
  *out = v;
  return 0;
}

int as_double(KernelObject* k, const ArgSpec* a, PyObject* o, double* out) {
  if (PyFloat_Check(o)) {
    *out = PyFloat_AS_DOUBLE(o);
    return 0;
  }
  if (PyBool_Check(o) || PyComplex_Check(o)) return type_error(k, a, "a float", o);
  if (PyLong_Check(o) || PyIndex_Check(o) || (Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float)) {
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return type_error(k, a, "a float", o);
    }
    *out = v;
    return 0;
  }
  return type_error(k, a, "a float", o);
}

/* A sequence argument as a fast sequence kept alive by the call; an int for int[N]
 * repeats N times. Returns NULL with an exception on failure. */
PyObject* as_sequence(KernelObject* k, CallScratch* cs, const ArgSpec* a, PyObject* o, const char* expected) {
  if (PyUnicode_Check(o) || PyBytes_Check(o) || PyDict_Check(o) ||
      (k->st->torch_tensor_type != NULL && PyObject_TypeCheck(o, (PyTypeObject*)k->st->torch_tensor_type)) ||
      PyObject_HasAttr(o, k->st->str_dlpack)) {
    type_error(k, a, expected, o); /* a tensor iterates, but is not a list */
    return NULL;
  }
  PyObject* seq;
  if (a->fixed_len > 0 && a->kind != K_TENSOR_LIST && a->kind != K_OPT_TENSOR_LIST &&
      (PyLong_Check(o) || PyFloat_Check(o) || PyBool_Check(o))) {
    seq = PyList_New(a->fixed_len);
    if (seq == NULL) return NULL;
    for (Py_ssize_t i = 0; i < a->fixed_len; i++) {
      Py_INCREF(o);
      PyList_SET_ITEM(seq, i, o);
    }
  } else {
    seq = PySequence_Fast(o, "");
    if (seq == NULL) {
      PyErr_Clear();
      type_error(k, a, expected, o);
      return NULL;
    }
  }
  if (etops_keep_add(&cs->keep, seq) < 0) return NULL;
  if (PySequence_Fast_GET_SIZE(seq) > INT32_MAX / 2) {
    PyErr_Format(PyExc_ValueError, "%s: argument '%s' is too long", k->op_name, a->cname);
    return NULL;
  }
  return seq;
}

/* ---- one converter per plan kind ------------------------------------------------ */

/* Converts `o` (not None-for-an-optional: convert_arg handles that) for argument i. */
typedef int (*ArgConverter)(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o,
                            etb_value* v);

/* Outs and mutable arguments are written by the kernel; outs may be resized. */
static int written(const ArgSpec* a) { return (a->flags & (F_OUT | F_MUTABLE)) != 0; }

/* A Python number given for a Tensor parameter the kernel only reads, as torch wraps
 * it: a 0-dim tensor in the call's arena of torch's wrapped-number dtype (bool,
 * int64, float64, complex128). torch's own checks and out sizing see the number
 * itself, with its wrapped-number promotion rules. 1: wrapped; 0: `o` is not a
 * Python number; -1: error (an int beyond int64). */
static int wrap_number(KernelObject* k, CallScratch* cs, const ArgSpec* a, PyObject* o, etb_value* v) {
  int dtype;
  if (PyBool_Check(o)) dtype = ETB_DTYPE_BOOL;
  else if (PyLong_Check(o)) dtype = ETB_DTYPE_LONG;
  else if (PyFloat_Check(o)) dtype = ETB_DTYPE_DOUBLE;
  else if (PyComplex_Check(o)) dtype = ETB_DTYPE_COMPLEX_DOUBLE;
  else return 0;
  const size_t header = (sizeof(etb_tensor) + 15) & ~(size_t)15; /* then 16 bytes of data */
  etb_tensor* t = (etb_tensor*)scratch_alloc(cs, header + 16);
  if (t == NULL) return -1;
  unsigned char* data = (unsigned char*)t + header;
  switch (dtype) {
    case ETB_DTYPE_BOOL: *(uint8_t*)data = o == Py_True; break;
    case ETB_DTYPE_LONG: {
      int64_t value;
      if (as_int64(k, a, o, &value) < 0) return -1;
      memcpy(data, &value, sizeof value);
      break;
    }
    case ETB_DTYPE_DOUBLE: {
      double value = PyFloat_AS_DOUBLE(o);
      memcpy(data, &value, sizeof value);
      break;
    }
    default: {
      double parts[2] = {PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o)};
      memcpy(data, parts, sizeof parts);
    }
  }
  t->data = data;
  t->dtype = (int8_t)dtype;
  t->ndim = 0;
  t->dynamism = ETB_STATIC;
  t->resized = 0;
  v->tag = ETB_TENSOR;
  v->len = WRAPPED_NUMBER_LEN;
  v->u.t = t;
  return 1;
}

int convert_tensor_arg(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
  v->len = 0;
  if (Py_TYPE(o) != (PyTypeObject*)k->st->torch_tensor_type && !written(a)) {
    int wrapped = wrap_number(k, cs, a, o, v);
    if (wrapped != 0) return wrapped < 0 ? -1 : 0;
  }
  TensorRec* r = borrow(k, cs, o, i, a->cname, written(a));
  if (r == NULL) return -1;
  if (a->flags & F_OUT) r->t.dynamism = ETB_DYNAMIC_BOUND;
  v->tag = ETB_TENSOR;
  v->u.t = &r->t;
  return 0;
}

static int convert_tensor_list(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o,
                               etb_value* v) {
  int opt = a->kind == K_OPT_TENSOR_LIST;
  PyObject* seq = as_sequence(k, cs, a, o, opt ? "a list of optional Tensors" : "a list of Tensors");
  if (seq == NULL) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  etb_tensor** items = (etb_tensor**)scratch_alloc(cs, sizeof(etb_tensor*) * (n ? n : 1));
  if (items == NULL) return -1;
  char what[160];
  for (Py_ssize_t j = 0; j < n; j++) {
    PyObject* item = PySequence_Fast_GET_ITEM(seq, j);
    snprintf(what, sizeof what, "%s[%zd]", a->cname, j);
    if (item == Py_None) {
      if (!opt) {
        PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be a Tensor, not None", k->op_name, what);
        return -1;
      }
      items[j] = NULL;
      continue;
    }
    TensorRec* r = borrow(k, cs, item, i, what, written(a));
    if (r == NULL) return -1;
    if (a->flags & F_OUT) r->t.dynamism = ETB_DYNAMIC_BOUND;
    items[j] = &r->t;
  }
  v->tag = opt ? ETB_LIST_OPT_TENSOR : ETB_LIST_TENSOR;
  v->len = (int32_t)n;
  v->u.tensors = items;
  return 0;
}

/* Whether `t` is a numpy integer or float scalar type of at most 64 bits: torch's
 * checks see such a number as the Python int or float its item() gives
 * (tensors.python_scalar), which converts to the same tag and value (numpy's bool,
 * complex and long double scalars are not: item() gives another kind). */
static int plain_numpy_number(const PyTypeObject* t) {
  static const char* const names[] = {"int8",   "int16",  "int32",   "int64",   "uint8",    "uint16",   "uint32",
                                      "uint64", "float16", "float32", "float64", "longlong", "ulonglong"};
  const char* name = t->tp_name;
  if (strncmp(name, "numpy.", 6) != 0) return 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strcmp(name + 6, names[i]) == 0) return 1;
  }
  return 0;
}

/* Notes on the call a number given as another object than an exact int, float or
 * bool or a plain numpy number (CallScratch.odd_numbers: a 0-dim tensor, an int
 * subclass; torch checks its type on every call). */
void note_number_type(CallScratch* cs, PyObject* o) {
  if (!PyLong_CheckExact(o) && !PyFloat_CheckExact(o) && !PyBool_Check(o) && !plain_numpy_number(Py_TYPE(o)))
    cs->odd_numbers = 1;
}

/* A Python number as an ExecuTorch Scalar (Bool, Int or Double). */
static int convert_scalar(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
  note_number_type(cs, o);
  if (PyBool_Check(o)) {
    v->tag = ETB_BOOL;
    v->u.b = o == Py_True;
    return 0;
  }
  if (PyLong_Check(o)) {
    v->tag = ETB_INT;
    return as_int64(k, a, o, &v->u.i);
  }
  if (PyFloat_Check(o)) {
    v->tag = ETB_DOUBLE;
    v->u.d = PyFloat_AS_DOUBLE(o);
    return 0;
  }
  if (PyComplex_Check(o)) {
    return etops_unrepresentable("%s: argument '%s': ExecuTorch Scalars cannot be complex", k->op_name, a->cname);
  }
  /* numpy scalars and other numbers: integers by __index__, the rest by __float__ */
  if (PyIndex_Check(o)) {
    v->tag = ETB_INT;
    return as_int64(k, a, o, &v->u.i);
  }
  if (Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float) {
    v->tag = ETB_DOUBLE;
    return as_double(k, a, o, &v->u.d);
  }
  return type_error(k, a, "a number (Scalar)", o);
}

static int convert_int(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
  note_number_type(cs, o);
  v->tag = ETB_INT;
  return as_int64(k, a, o, &v->u.i);
}

static int convert_float(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
  note_number_type(cs, o);
  v->tag = ETB_DOUBLE;
  return as_double(k, a, o, &v->u.d);
}

static int convert_bool(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
  if (!PyBool_Check(o)) return type_error(k, a, "a bool", o);
  v->tag = ETB_BOOL;
  v->u.b = o == Py_True;
  return 0;
}

static int convert_str(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
  if (!PyUnicode_Check(o)) return type_error(k, a, "a str", o);
  Py_ssize_t len;
  const char* s = PyUnicode_AsUTF8AndSize(o, &len);
  if (s == NULL) return -1;
  v->tag = ETB_STRING;
  v->u.s = s;
  v->len = (int32_t)len;
  return 0;
}

/* dtype / memory format / layout / device: the plan's map gives ExecuTorch's number. */
static int convert_enum(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
  PyObject* mapped = PyDict_GetItemWithError(a->extra, o);
  if (mapped == NULL) {
    if (PyErr_Occurred()) PyErr_Clear();
    /* The right kind of object with a value ExecuTorch lacks is a ValueError;
       another kind of object a TypeError. */
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    int same_type = 0;
    while (PyDict_Next(a->extra, &pos, &key, &value)) same_type |= Py_TYPE(key) == Py_TYPE(o);
    PyObject* accepted = PyDict_Keys(a->extra);
    if (same_type) /* a value torch has and ExecuTorch's enum lacks */
      etops_unrepresentable("%s: argument '%s' got %R; ExecuTorch accepts one of %R", k->op_name, a->cname, o,
                            accepted ? accepted : Py_None);
    else
      PyErr_Format(PyExc_TypeError, "%s: argument '%s' got %R; ExecuTorch accepts one of %R", k->op_name, a->cname, o,
                   accepted ? accepted : Py_None);
    Py_XDECREF(accepted);
    return -1;
  }
  v->tag = ETB_INT;
  v->u.i = PyLong_AsLongLong(mapped);
  return 0;
}

/* Converter of each argument kind; NULL for kinds that are not arguments. */
static const ArgConverter CONVERTERS[K_COUNT] = {
    [K_TENSOR] = convert_tensor_arg,
    [K_TENSOR_LIST] = convert_tensor_list,
    [K_OPT_TENSOR_LIST] = convert_tensor_list,
    [K_SCALAR] = convert_scalar,
    [K_INT] = convert_int,
    [K_FLOAT] = convert_float,
    [K_BOOL] = convert_bool,
    [K_STR] = convert_str,
    [K_INT_LIST] = convert_int_list,
    [K_FLOAT_LIST] = convert_float_list,
    [K_BOOL_LIST] = convert_bool_list,
    [K_ENUM] = convert_enum,
};

int convert_arg(KernelObject* k, CallScratch* cs, int i, PyObject* o, etb_value* v) {
  const ArgSpec* a = &k->args[i];
  v->len = 0;
  if (o == Py_None && (a->flags & F_OPTIONAL)) {
    v->tag = ETB_NONE;
    return 0;
  }
  if (a->kind == K_TENSOR) return convert_tensor_arg(k, cs, i, a, o, v); /* the common kind, called directly */
  ArgConverter convert = a->kind > 0 && a->kind < K_COUNT ? CONVERTERS[a->kind] : NULL;
  if (convert == NULL) {
    PyErr_Format(PyExc_SystemError, "%s: argument '%s' has unknown plan kind %d", k->op_name, a->cname, a->kind);
    return -1;
  }
  return convert(k, cs, i, a, o, v);
}
