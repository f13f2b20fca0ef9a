/*
 * kernel_bind.c - a call's positional and keyword arguments bound to the Kernel's
 * plan: one slot per schema argument, defaults filled, a missing out as NULL, with
 * the TypeErrors Python gives a bad call (naming the argument). The layout of the
 * last call bound (keyword names, positional count) is remembered on the kernel, so
 * a loop of calls from one call site binds without searching (bind_arguments in
 * kernel_internal.h takes that path).
 */
#include "kernel_internal.h"

#include <string.h>

int bind_arguments_searched(KernelObject* k, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                            PyObject** bound, int* missing_out) {
  if (nargs > k->npositional) {
    if (k->npositional < k->nargs) {
      PyErr_Format(PyExc_TypeError,
                   "%s takes at most %d positional arguments but %zd were given (argument '%s' is keyword-only)",
                   k->op_name, k->npositional, nargs, k->args[k->npositional].cname);
    } else {
      PyErr_Format(PyExc_TypeError, "%s takes at most %d positional arguments but %zd were given", k->op_name,
                   k->npositional, nargs);
    }
    return -1;
  }
  /* one loop (two would become memset and memcpy calls, dearer for a few args) */
  for (int i = 0; i < k->nargs; i++) bound[i] = i < nargs ? args[i] : NULL;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  uint8_t kw_arg[ETOPS_MAX_ARGS];
  for (Py_ssize_t j = 0; j < nkw; j++) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, j);
    int found = -1;
    for (int i = 0; i < k->nargs; i++) {
      if (k->args[i].name == key) {
        found = i;
        break;
      }
    }
    if (found < 0) {
      for (int i = 0; i < k->nargs; i++) {
        if (PyUnicode_Compare(k->args[i].name, key) == 0) {
          found = i;
          break;
        }
      }
    }
    if (found < 0) {
      PyErr_Format(PyExc_TypeError, "%s got an unexpected keyword argument '%U'", k->op_name, key);
      return -1;
    }
    if (bound[found] != NULL) {
      PyErr_Format(PyExc_TypeError, "%s got multiple values for argument '%U'", k->op_name, key);
      return -1;
    }
    bound[found] = args[nargs + j];
    kw_arg[j] = (uint8_t)found; /* nkw <= nargs: each keyword bound one argument */
  }
  *missing_out = 0;
  int nfill = 0, nouts_given = 0;
  uint8_t fill_arg[ETOPS_MAX_ARGS], out_given[ETOPS_MAX_ARGS];
  for (int i = 0; i < k->nargs; i++) {
    const ArgSpec* a = &k->args[i];
    if (bound[i] != NULL && (a->flags & F_OUT)) out_given[nouts_given++] = (uint8_t)i;
    if (bound[i] != NULL && !(bound[i] == Py_None && (a->flags & F_OUT))) continue;
    if (bound[i] == NULL) fill_arg[nfill++] = (uint8_t)i;
    if (a->flags & F_OUT) {
      *missing_out = 1;
    } else if (a->flags & F_HAS_DEFAULT) {
      bound[i] = a->default_value;
    } else if (a->flags & F_OPTIONAL) {
      bound[i] = Py_None;
    } else {
      PyErr_Format(PyExc_TypeError, "%s missing required argument '%s'%s", k->op_name, a->cname,
                   (a->flags & F_KWONLY) ? " (keyword-only)" : "");
      return -1;
    }
  }
  /* remembered for the next call of this layout */
  Py_XINCREF(kwnames);
  Py_XSETREF(k->bind_kwnames, kwnames);
  k->bind_nargs = (int)nargs;
  k->bind_nkw = (int)nkw;
  memcpy(k->bind_kw_arg, kw_arg, (size_t)nkw);
  k->bind_nfill = nfill;
  int missing_not_given = 0;
  for (int f = 0; f < nfill; f++) {
    k->bind_fill_arg[f] = fill_arg[f];
    k->bind_fill_value[f] = bound[fill_arg[f]]; /* NULL for an out */
    missing_not_given |= bound[fill_arg[f]] == NULL;
  }
  k->bind_missing_out = missing_not_given;
  k->bind_nouts_given = nouts_given;
  memcpy(k->bind_out_given, out_given, (size_t)nouts_given);
  k->bind_valid = 1;
  return 0;
}
