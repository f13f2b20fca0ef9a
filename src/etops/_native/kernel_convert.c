/*
 * kernel_convert.c - argument conversion: one Python argument into the etb_value
 * the bridge reads, by the kind the plan gives it (etops/plan.py).
 *
 * Each kind has its converter, found in CONVERTERS by kind. Tensors are borrowed
 * zero-copy (tensor.c) and recorded in the call's scratch; lists are converted into
 * arena memory. Every refusal is a TypeError / ValueError / OverflowError naming the
 * operator and the argument (list items as 'name[i]').
 */
#include "kernel_internal.h"

#include <string.h>

static int type_error(KernelObject* k, const ArgSpec* a, const char* expected, PyObject* got) {
  PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be %s, not %.100s", k->op_name, a->cname,
               expected, Py_TYPE(got)->tp_name);
  return -1;
}

/* Borrows `obj` as tensor `what` of argument `arg`; a non-dense input is replaced by
 * a dense copy (state's densify), a non-dense written tensor refused. */
static TensorRec* borrow(KernelObject* k, CallScratch* cs, PyObject* obj, int arg, const char* what,
                         int writable) {
  TensorRec* r = scratch_new_rec(cs);
  if (r == NULL) return NULL;
  r->obj = obj;
  r->arg = arg;
  int rc = etops_borrow_tensor(k->st, obj, &r->t, &cs->keep, k->op_name, what, writable);
  if (rc < 0) return NULL;
  if (rc == LAYOUT_NOT_DENSE) {
    if (writable) {
      PyErr_Format(PyExc_ValueError,
                   "%s: argument '%s' is not dense (expanded, stepped or overlapping); the kernel writes it, "
                   "so it must be contiguous or a permutation of a contiguous tensor",
                   k->op_name, what);
      return NULL;
    }
    PyObject* dense = PyObject_CallOneArg(k->st->densify, obj);
    if (dense == NULL || etops_keep_add(&cs->keep, dense) < 0) return NULL;
    r->obj = dense;
    rc = etops_borrow_tensor(k->st, dense, &r->t, &cs->keep, k->op_name, what, writable);
    if (rc != LAYOUT_DENSE) {
      if (rc > 0) PyErr_Format(PyExc_ValueError, "%s: argument '%s' could not be made dense", k->op_name, what);
      return NULL;
    }
  }
  int64_t numel = 1;
  for (int i = 0; i < r->t.ndim; i++) numel *= r->t.sizes[i];
  cs->numel_total += numel;
  return r;
}

static int as_int64(KernelObject* k, const ArgSpec* a, PyObject* o, int64_t* out) {
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

static int as_double(KernelObject* k, const ArgSpec* a, PyObject* o, double* out) {
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
static PyObject* as_sequence(KernelObject* k, CallScratch* cs, const ArgSpec* a, PyObject* o,
                             const char* expected) {
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

static int convert_tensor(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
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

/* A Python number as an ExecuTorch Scalar (Bool, Int or Double). */
static int convert_scalar(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
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
    PyErr_Format(PyExc_TypeError, "%s: argument '%s': ExecuTorch Scalars cannot be complex", k->op_name, a->cname);
    return -1;
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
  v->tag = ETB_INT;
  return as_int64(k, a, o, &v->u.i);
}

static int convert_float(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
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

/* The fast sequence of a list-of-numbers argument, checked against int[N]'s N
 * (int lists may differ: ExecuTorch accepts int[1] broadcast), with `item` set up
 * to name its elements 'name[]' (what: its buffer). */
static PyObject* number_list(KernelObject* k, CallScratch* cs, const ArgSpec* a, PyObject* o, const char* expected,
                             ArgSpec* item, char* what, size_t what_size) {
  PyObject* seq = as_sequence(k, cs, a, o, expected);
  if (seq == NULL) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (a->fixed_len > 0 && n != a->fixed_len && a->kind != K_INT_LIST) {
    PyErr_Format(PyExc_ValueError, "%s: argument '%s' must have %zd elements, got %zd", k->op_name, a->cname,
                 a->fixed_len, n);
    return NULL;
  }
  *item = *a;
  snprintf(what, what_size, "%s[]", a->cname);
  item->cname = what;
  return seq;
}

static int convert_int_list(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
  ArgSpec item;
  char what[160];
  PyObject* seq = number_list(k, cs, a, o, "a list of ints", &item, what, sizeof what);
  if (seq == NULL) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  int64_t* buf = (int64_t*)scratch_alloc(cs, sizeof(int64_t) * (n ? n : 1));
  if (buf == NULL) return -1;
  for (Py_ssize_t j = 0; j < n; j++) {
    if (as_int64(k, &item, PySequence_Fast_GET_ITEM(seq, j), &buf[j]) < 0) return -1;
  }
  v->tag = ETB_LIST_INT;
  v->u.ints = buf;
  v->len = (int32_t)n;
  return 0;
}

static int convert_float_list(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o,
                              etb_value* v) {
  ArgSpec item;
  char what[160];
  PyObject* seq = number_list(k, cs, a, o, "a list of floats", &item, what, sizeof what);
  if (seq == NULL) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  double* buf = (double*)scratch_alloc(cs, sizeof(double) * (n ? n : 1));
  if (buf == NULL) return -1;
  for (Py_ssize_t j = 0; j < n; j++) {
    if (as_double(k, &item, PySequence_Fast_GET_ITEM(seq, j), &buf[j]) < 0) return -1;
  }
  v->tag = ETB_LIST_DOUBLE;
  v->u.doubles = buf;
  v->len = (int32_t)n;
  return 0;
}

static int convert_bool_list(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o,
                             etb_value* v) {
  ArgSpec item;
  char what[160];
  PyObject* seq = number_list(k, cs, a, o, "a list of bools", &item, what, sizeof what);
  if (seq == NULL) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  uint8_t* buf = (uint8_t*)scratch_alloc(cs, n ? n : 1);
  if (buf == NULL) return -1;
  for (Py_ssize_t j = 0; j < n; j++) {
    PyObject* value = PySequence_Fast_GET_ITEM(seq, j);
    if (!PyBool_Check(value)) return type_error(k, &item, "a bool", value);
    buf[j] = value == Py_True;
  }
  v->tag = ETB_LIST_BOOL;
  v->u.bools = buf;
  v->len = (int32_t)n;
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
    PyErr_Format(same_type ? PyExc_ValueError : PyExc_TypeError, "%s: argument '%s' got %R; ExecuTorch accepts one of %R",
                 k->op_name, a->cname, o, accepted ? accepted : Py_None);
    Py_XDECREF(accepted);
    return -1;
  }
  v->tag = ETB_INT;
  v->u.i = PyLong_AsLongLong(mapped);
  return 0;
}

/* Converter of each argument kind; NULL for kinds that are not arguments. */
static const ArgConverter CONVERTERS[K_COUNT] = {
    [K_TENSOR] = convert_tensor,
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
  ArgConverter convert = a->kind > 0 && a->kind < K_COUNT ? CONVERTERS[a->kind] : NULL;
  if (convert == NULL) {
    PyErr_Format(PyExc_SystemError, "%s: argument '%s' has unknown plan kind %d", k->op_name, a->cname, a->kind);
    return -1;
  }
  return convert(k, cs, i, a, o, v);
}
