/*
 * floor.c - the floor of benchmark 1: a bare CPython function that borrows three
 * float32 torch tensors through torch's DLPack C exchange API and calls the cached
 * aten::add.out OpFunction of ExecuTorch, with no argument checks at all. Passing
 * anything but three contiguous float32 CPU tensors of equal shape is undefined.
 *
 *   add_floor(a, b, out) -> out          one kernel call
 *   add_loop_c(a, b, out, iters) -> s    `iters` kernel calls from C, seconds taken
 *
 * Import etops (or executorch.runtime) first: it loads the kernel libraries.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "floor_et.h"

static const DLPackExchangeAPI* g_api;
static void* g_fn[17]; /* cached OpFunction per rank */

static inline void* fn_for(int ndim) {
  void* fn = g_fn[ndim];
  if (fn == NULL) fn = g_fn[ndim] = floor_lookup_add_out(ndim);
  return fn;
}

static PyObject* add_floor(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  DLTensor a, b, o;
  if (g_api->dltensor_from_py_object_no_sync(args[0], &a) != 0 ||
      g_api->dltensor_from_py_object_no_sync(args[1], &b) != 0 ||
      g_api->dltensor_from_py_object_no_sync(args[2], &o) != 0)
    return NULL;
  if (floor_add(fn_for(o.ndim), &a, &b, &o) != 0) {
    PyErr_SetString(PyExc_RuntimeError, "aten::add.out failed");
    return NULL;
  }
  return Py_NewRef(args[2]);
}

static PyObject* add_loop_c(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  DLTensor a, b, o;
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "add_loop_c(a, b, out, iters)");
    return NULL;
  }
  long iters = PyLong_AsLong(args[3]);
  if (iters < 0 && PyErr_Occurred()) return NULL;
  if (g_api->dltensor_from_py_object_no_sync(args[0], &a) != 0 ||
      g_api->dltensor_from_py_object_no_sync(args[1], &b) != 0 ||
      g_api->dltensor_from_py_object_no_sync(args[2], &o) != 0)
    return NULL;
  void* fn = fn_for(o.ndim);
  if (fn == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "no aten::add.out kernel registered (import etops first)");
    return NULL;
  }
  int error = 0;
  double seconds;
  Py_BEGIN_ALLOW_THREADS
  seconds = floor_add_loop(fn, &a, &b, &o, iters, &error);
  Py_END_ALLOW_THREADS
  if (error != 0) {
    PyErr_Format(PyExc_RuntimeError, "aten::add.out failed with error %d", error);
    return NULL;
  }
  return PyFloat_FromDouble(seconds);
}

static PyMethodDef methods[] = {
    {"add_floor", (PyCFunction)(void (*)(void))add_floor, METH_FASTCALL,
     "add_floor(a, b, out): ExecuTorch's aten::add.out, no checks (the floor)."},
    {"add_loop_c", (PyCFunction)(void (*)(void))add_loop_c, METH_FASTCALL,
     "add_loop_c(a, b, out, iters) -> seconds: the kernel called iters times from C."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_floor", NULL, -1, methods};

PyMODINIT_FUNC PyInit__floor(void) {
  PyObject* torch = PyImport_ImportModule("torch");
  if (torch == NULL) return NULL;
  PyObject* tensor = PyObject_GetAttrString(torch, "Tensor");
  Py_DECREF(torch);
  if (tensor == NULL) return NULL;
  PyObject* cap = PyObject_GetAttrString(tensor, "__dlpack_c_exchange_api__");
  Py_DECREF(tensor);
  if (cap == NULL) return NULL;
  g_api = (const DLPackExchangeAPI*)PyCapsule_GetPointer(cap, "dlpack_exchange_api");
  Py_DECREF(cap); /* torch keeps the API struct alive for the life of the process */
  if (g_api == NULL) return NULL;
  if (fn_for(2) == NULL) {
    PyErr_SetString(PyExc_ImportError,
                    "no aten::add.out kernel registered: import etops before _floor");
    return NULL;
  }
  return PyModule_Create(&module);
}
