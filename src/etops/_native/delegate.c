/*
 * delegate.c - ExecuTorch backends from Python: the registry queries and the
 * Delegate type, one backend handle initialised from a lowered module's blob.
 *
 * A Delegate owns its etb_delegate (backends.cpp) and pins the Python buffers the
 * backend reads (the processed blob and the named data) for as long as the handle
 * lives; deallocating it calls the backend's destroy. It is not callable itself: a
 * Kernel built with delegate=<Delegate> (kernel_type.c) runs it on the same argument
 * path as a kernel. etops/delegate/ turns the status tuples into exceptions.
 */
#include "etops_native.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  PyObject_HEAD
  etb_delegate* handle;
  PyObject* backend;    /* str */
  Py_buffer* views;     /* pinned: the processed blob, then each named-data entry */
  int nviews;
  void** copies;        /* aligned copies of buffers that were not aligned enough */
  int ncopies;
} DelegateObject;

static long long delegates_initialised = 0;
static long long delegates_destroyed = 0;

static void release_buffers(DelegateObject* d) {
  for (int i = 0; i < d->nviews; i++) PyBuffer_Release(&d->views[i]);
  PyMem_Free(d->views);
  d->views = NULL;
  d->nviews = 0;
  for (int i = 0; i < d->ncopies; i++) free(d->copies[i]);
  PyMem_Free(d->copies);
  d->copies = NULL;
  d->ncopies = 0;
}

static void delegate_dealloc(DelegateObject* d) {
  PyTypeObject* tp = Py_TYPE(d);
  if (d->handle != NULL) {
    etb_delegate_destroy(d->handle);
    d->handle = NULL;
    delegates_destroyed++;
  }
  release_buffers(d);
  Py_CLEAR(d->backend);
  tp->tp_free((PyObject*)d);
  Py_DECREF(tp);
}

static PyObject* delegate_repr(DelegateObject* d) {
  return PyUnicode_FromFormat("<etops Delegate of backend %U>", d->backend);
}

/* Pins `obj`'s bytes in view `slot`; returns their address, aligned to `alignment`
 * (a malloc'd copy when the buffer itself is not), or NULL with an exception. */
static const void* pin(DelegateObject* d, int slot, PyObject* obj, Py_ssize_t alignment, const char* what,
                       size_t* size) {
  if (PyObject_GetBuffer(obj, &d->views[slot], PyBUF_SIMPLE) < 0) {
    PyErr_Format(PyExc_TypeError, "%s must be bytes-like, not %.100s", what, Py_TYPE(obj)->tp_name);
    return NULL;
  }
  d->nviews = slot + 1;
  const void* data = d->views[slot].buf;
  *size = (size_t)d->views[slot].len;
  if (alignment > 1 && ((uintptr_t)data % (uintptr_t)alignment) != 0) {
    size_t align = (size_t)alignment < sizeof(void*) ? sizeof(void*) : (size_t)alignment;
    void* copy = NULL;
    if (posix_memalign(&copy, align, *size == 0 ? 1 : *size) != 0) {
      PyErr_NoMemory();
      return NULL;
    }
    memcpy(copy, data, *size);
    d->copies[d->ncopies++] = copy;
    data = copy;
  }
  return data;
}

/* delegate_init(backend, processed, compile_specs, named_data, method_name)
 *   compile_specs: [(key: str, value: bytes)], named_data: [(key: str, data, alignment)]
 * -> a Delegate, or (error code, error name, backend log) when the backend refused. */
static PyObject* delegate_init(PyObject* module, PyObject* args) {
  const char *backend, *method;
  PyObject *processed, *specs, *named;
  if (!PyArg_ParseTuple(args, "sOO!O!s", &backend, &processed, &PyList_Type, &specs, &PyList_Type, &named, &method))
    return NULL;
  etops_state* st = (etops_state*)PyModule_GetState(module);
  DelegateObject* d = PyObject_New(DelegateObject, (PyTypeObject*)st->delegate_type);
  if (d == NULL) return NULL;
  d->handle = NULL;
  d->backend = PyUnicode_FromString(backend);
  Py_ssize_t nspecs = PyList_GET_SIZE(specs), ndata = PyList_GET_SIZE(named);
  d->views = PyMem_Calloc((size_t)(1 + ndata), sizeof(Py_buffer));
  d->copies = PyMem_Calloc((size_t)(1 + ndata), sizeof(void*));
  d->nviews = d->ncopies = 0;
  etb_compile_spec* cspecs = PyMem_Calloc((size_t)nspecs + 1, sizeof(etb_compile_spec));
  etb_named_data* cdata = PyMem_Calloc((size_t)ndata + 1, sizeof(etb_named_data));
  Py_buffer* spec_views = PyMem_Calloc((size_t)nspecs + 1, sizeof(Py_buffer));
  Py_ssize_t nspec_views = 0;
  PyObject* result = NULL;
  if (d->backend == NULL || d->views == NULL || d->copies == NULL || cspecs == NULL || cdata == NULL ||
      spec_views == NULL) {
    if (!PyErr_Occurred()) PyErr_NoMemory();
    goto done;
  }
  size_t processed_size;
  const void* blob = pin(d, 0, processed, 16, "processed", &processed_size);
  if (blob == NULL) goto done;
  for (Py_ssize_t i = 0; i < nspecs; i++) {
    PyObject* key;
    PyObject* value;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(specs, i), "UO", &key, &value)) goto done;
    cspecs[i].key = PyUnicode_AsUTF8(key);
    if (cspecs[i].key == NULL) goto done;
    if (PyObject_GetBuffer(value, &spec_views[i], PyBUF_SIMPLE) < 0) {
      PyErr_Format(PyExc_TypeError, "compile spec '%U' must have a bytes value", key);
      goto done;
    }
    nspec_views = i + 1;
    cspecs[i].value = spec_views[i].buf;
    cspecs[i].size = (size_t)spec_views[i].len;
  }
  for (Py_ssize_t i = 0; i < ndata; i++) {
    PyObject *key, *value;
    Py_ssize_t alignment;
    if (!PyArg_ParseTuple(PyList_GET_ITEM(named, i), "UOn", &key, &value, &alignment)) goto done;
    cdata[i].key = PyUnicode_AsUTF8(key);
    if (cdata[i].key == NULL) goto done;
    cdata[i].data = pin(d, (int)(1 + i), value, alignment, "named data", &cdata[i].size);
    if (cdata[i].data == NULL) goto done;
  }
  int err;
  Py_BEGIN_ALLOW_THREADS
  err = etb_delegate_init(backend, blob, processed_size, cspecs, (int)nspecs, cdata, (int)ndata, method,
                          &d->handle);
  Py_END_ALLOW_THREADS
  if (err != ETB_OK) {
    result = etops_last_failure(st, NULL, 0);
    goto done;
  }
  delegates_initialised++;
  result = Py_NewRef((PyObject*)d);

done:
  for (Py_ssize_t i = 0; i < nspec_views; i++) PyBuffer_Release(&spec_views[i]);
  PyMem_Free(spec_views);
  PyMem_Free(cspecs);
  PyMem_Free(cdata);
  Py_DECREF(d); /* on failure this releases the pinned buffers; no handle to destroy */
  return result;
}

etb_delegate* etops_delegate_handle(etops_state* st, PyObject* obj) {
  if (!PyObject_TypeCheck(obj, (PyTypeObject*)st->delegate_type)) {
    PyErr_Format(PyExc_TypeError, "delegate must be an etops Delegate, not %.100s", Py_TYPE(obj)->tp_name);
    return NULL;
  }
  return ((DelegateObject*)obj)->handle;
}

static PyObject* backends(PyObject* module, PyObject* noargs) {
  size_t n = etb_backend_count();
  PyObject* out = PyList_New(0);
  if (out == NULL) return NULL;
  for (size_t i = 0; i < n; i++) {
    const char* name;
    int available = 0;
    if (etb_backend_name(i, &name) != ETB_OK) continue;
    if (etb_backend_available(name, &available) != ETB_OK) available = 0;
    PyObject* item = Py_BuildValue("(sO)", name, available ? Py_True : Py_False);
    if (item == NULL || PyList_Append(out, item) < 0) {
      Py_XDECREF(item);
      Py_DECREF(out);
      return NULL;
    }
    Py_DECREF(item);
  }
  return out;
}

static PyObject* threadpool_replaced(PyObject* module, PyObject* noargs) {
  etb_threadpool_replaced();
  Py_RETURN_NONE;
}

static PyObject* delegate_get_stale(DelegateObject* d, void* closure) {
  return PyBool_FromLong(d->handle != NULL && etb_delegate_stale(d->handle));
}

static PyObject* delegate_stats(PyObject* module, PyObject* noargs) {
  return Py_BuildValue("(LL)", delegates_initialised, delegates_destroyed);
}

PyMethodDef etops_delegate_methods[] = {
    {"backends", backends, METH_NOARGS,
     "[(name, is_available)] of every backend in ExecuTorch's registry, in registration order."},
    {"delegate_init", delegate_init, METH_VARARGS,
     "delegate_init(backend, processed, [(key, value)], [(key, data, alignment)], method_name) -> Delegate, or "
     "(error code, error name, backend log) when the backend is missing, unavailable or refuses the blob."},
    {"threadpool_replaced", threadpool_replaced, METH_NOARGS,
     "Tells delegates that etops replaced ExecuTorch's threadpool: those initialised before refuse to run."},
    {"delegate_stats", delegate_stats, METH_NOARGS,
     "(delegates initialised, delegates destroyed) in this process."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef delegate_getset[] = {
    {"stale", (getter)delegate_get_stale, NULL,
     "Whether the threadpool this handle was initialised with is gone (it refuses to run).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot delegate_slots[] = {
    {Py_tp_dealloc, delegate_dealloc},
    {Py_tp_getset, delegate_getset},
    {Py_tp_repr, delegate_repr},
    {Py_tp_doc, "A backend handle initialised from a lowered module (see etops.delegate.load)."},
    {0, NULL},
};

static PyType_Spec delegate_spec = {
    .name = "etops._native.Delegate",
    .basicsize = sizeof(DelegateObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = delegate_slots,
};

int etops_delegate_type_init(PyObject* module, etops_state* st) {
  st->delegate_type = PyType_FromModuleAndSpec(module, &delegate_spec, NULL);
  if (st->delegate_type == NULL) return -1;
  if (PyModule_AddFunctions(module, etops_delegate_methods) < 0) return -1;
  return PyModule_AddObjectRef(module, "Delegate", st->delegate_type);
}
