/*
 * custom.c - module functions for custom kernels (etops.custom): thin wrappers of
 * the registry edits in registry_edit.cpp. They return ExecuTorch-free status codes
 * (ETB_REG_*); etops/custom/registration.py turns them into exceptions.
 */
#include "etops_native.h"

static PyObject* reg_find(PyObject* module, PyObject* args) {
  const char *name, *key;
  if (!PyArg_ParseTuple(args, "sz", &name, &key)) return NULL;
  size_t index;
  if (etb_reg_find(name, key, &index) != ETB_REG_OK) return PyLong_FromLong(-1);
  return PyLong_FromSize_t(index);
}

static PyObject* reg_add(PyObject* module, PyObject* args) {
  const char *name, *key;
  unsigned long long fn;
  if (!PyArg_ParseTuple(args, "szK", &name, &key, &fn)) return NULL;
  size_t index = 0;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = etb_reg_add(name, key, (etb_kernel_fn)(uintptr_t)fn, &index);
  Py_END_ALLOW_THREADS
  return Py_BuildValue("(in)", rc, (Py_ssize_t)index);
}

static PyObject* reg_swap(PyObject* module, PyObject* args) {
  Py_ssize_t index;
  unsigned long long expected, fn;
  if (!PyArg_ParseTuple(args, "nKK", &index, &expected, &fn)) return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = etb_reg_swap((size_t)index, (etb_kernel_fn)(uintptr_t)expected, (etb_kernel_fn)(uintptr_t)fn);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(rc);
}

static PyObject* reg_free(PyObject* module, PyObject* args) {
  Py_ssize_t index;
  unsigned long long expected;
  if (!PyArg_ParseTuple(args, "nK", &index, &expected)) return NULL;
  int rc;
  Py_BEGIN_ALLOW_THREADS
  rc = etb_reg_free((size_t)index, (etb_kernel_fn)(uintptr_t)expected);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(rc);
}

static PyObject* reg_free_count(PyObject* module, PyObject* noargs) {
  return PyLong_FromSize_t(etb_reg_free_count());
}

static PyObject* reg_missing_fn(PyObject* module, PyObject* noargs) {
  return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)etb_reg_missing_fn());
}

static PyObject* reg_hide_all(PyObject* module, PyObject* noargs) {
  return PyLong_FromSize_t(etb_reg_hide_all());
}

static PyObject* reg_touch(PyObject* module, PyObject* noargs) {
  etb_registry_touch();
  Py_RETURN_NONE;
}

PyMethodDef etops_custom_methods[] = {
    {"reg_touch", reg_touch, METH_NOARGS,
     "Bumps the registry generation (after a library registered kernels behind etops)."},
    {"reg_find", reg_find, METH_VARARGS,
     "reg_find(name, key or None) -> index of the live registry entry, or -1."},
    {"reg_add", reg_add, METH_VARARGS,
     "reg_add(name, key or None, function address) -> (status, index). Never aborts: status "
     "REG_DUPLICATE / REG_FULL / ... instead."},
    {"reg_swap", reg_swap, METH_VARARGS,
     "reg_swap(index, expected address, new address) -> status: replaces an entry's function in place."},
    {"reg_free", reg_free, METH_VARARGS,
     "reg_free(index, expected address or 0) -> status: the entry becomes a reusable free slot."},
    {"reg_free_count", reg_free_count, METH_NOARGS, "Number of free (deregistered, reusable) registry slots."},
    {"reg_missing_fn", reg_missing_fn, METH_NOARGS, "Address of the function a free slot holds."},
    {"_reg_hide_all", reg_hide_all, METH_NOARGS,
     "For load_library's probe process only: makes every registry entry a free slot."},
    {NULL, NULL, 0, NULL},
};

int etops_custom_add_constants(PyObject* module) {
  if (PyModule_AddIntConstant(module, "REG_CAPACITY", ETB_REG_CAPACITY) < 0) return -1;
  if (PyModule_AddStringConstant(module, "REG_FREE_NAME", ETB_REG_FREE_NAME) < 0) return -1;
  return 0;
}
