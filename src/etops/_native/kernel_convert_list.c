/*
 * kernel_convert_list.c - the converters of int[], float[] and bool[] arguments
 * (kernel_convert.c's CONVERTERS picks them by plan kind): the Python sequence,
 * each item checked and converted as its number kind is, into an array in the
 * call's arena. A wrong item is refused naming it ('name[]').
 */
#include "kernel_internal.h"

#include <stdio.h>

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

/* One element of a number list, converted into `out` (an int64_t, double or uint8_t). */
typedef int (*item_converter)(KernelObject* k, const ArgSpec* item, PyObject* o, void* out);

static int item_int(KernelObject* k, const ArgSpec* item, PyObject* o, void* out) {
  return as_int64(k, item, o, (int64_t*)out);
}

static int item_double(KernelObject* k, const ArgSpec* item, PyObject* o, void* out) {
  return as_double(k, item, o, (double*)out);
}

static int item_bool(KernelObject* k, const ArgSpec* item, PyObject* o, void* out) {
  if (!PyBool_Check(o)) return type_error(k, item, "a bool", o);
  *(uint8_t*)out = o == Py_True;
  return 0;
}

/* What an int[], float[] or bool[] argument becomes: the EValue tag, the element
   size and converter, and how a wrong argument is described. */
typedef struct {
  const char* expected;
  size_t item_size;
  item_converter convert;
  etb_tag tag;
} NumberListKind;

static const NumberListKind INT_LIST = {"a list of ints", sizeof(int64_t), item_int, ETB_LIST_INT};
static const NumberListKind FLOAT_LIST = {"a list of floats", sizeof(double), item_double, ETB_LIST_DOUBLE};
static const NumberListKind BOOL_LIST = {"a list of bools", sizeof(uint8_t), item_bool, ETB_LIST_BOOL};

/* A number list argument as an array in the call's scratch memory. */
static int convert_number_list(KernelObject* k, CallScratch* cs, const ArgSpec* a, PyObject* o, etb_value* v,
                               const NumberListKind* kind) {
  ArgSpec item;
  char what[160];
  PyObject* seq = number_list(k, cs, a, o, kind->expected, &item, what, sizeof what);
  if (seq == NULL) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  char* buf = (char*)scratch_alloc(cs, kind->item_size * (n ? n : 1));
  if (buf == NULL) return -1;
  for (Py_ssize_t j = 0; j < n; j++) {
    PyObject* o_j = PySequence_Fast_GET_ITEM(seq, j);
    note_number_type(cs, o_j);
    if (kind->convert(k, &item, o_j, buf + j * kind->item_size) < 0) return -1;
  }
  v->tag = kind->tag;
  switch (kind->tag) {
    case ETB_LIST_INT: v->u.ints = (int64_t*)buf; break;
    case ETB_LIST_DOUBLE: v->u.doubles = (double*)buf; break;
    default: v->u.bools = (uint8_t*)buf; break;
  }
  v->len = (int32_t)n;
  return 0;
}

int convert_int_list(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
  return convert_number_list(k, cs, a, o, v, &INT_LIST);
}

int convert_float_list(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
  return convert_number_list(k, cs, a, o, v, &FLOAT_LIST);
}

int convert_bool_list(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v) {
  return convert_number_list(k, cs, a, o, v, &BOOL_LIST);
}
