/*
 * module.c - the etops._native extension module: module state, registry queries,
 * the ExecuTorch log queue, the Kernel type (kernel_*.c) and backends (delegate.c).
 */
#include "etops_native.h"
#include "tensor_fields.h"
#include "fault_trap.h"
#include "fault_state.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- ExecuTorch log messages from outside kernel calls ------------------------ */
/* They can arrive on any thread, with or without the GIL (ExecuTorch's threadpool,
 * a .pte run by executorch.runtime): queue them under a mutex and let Python drain
 * the queue into `logging` at its next etops call or drain_logs(). */

typedef struct LogMsg {
  struct LogMsg* next;
  char level;
  size_t line;
  char* file;
  char* func;
  char* text;
} LogMsg;

static pthread_mutex_t log_mutex = PTHREAD_MUTEX_INITIALIZER;
static LogMsg* log_head = NULL;
static LogMsg** log_tail = &log_head;
static size_t log_count = 0;
#define LOG_QUEUE_MAX 10000
volatile int etops_logs_pending = 0;

static char* dup_n(const char* s, size_t n) {
  char* d = (char*)malloc(n + 1);
  if (d != NULL) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

static void log_sink(char level, const char* file, const char* func, size_t line, const char* msg, size_t len) {
  LogMsg* m = (LogMsg*)calloc(1, sizeof(LogMsg));
  if (m == NULL) return;
  m->level = level;
  m->line = line;
  m->file = dup_n(file ? file : "", file ? strlen(file) : 0);
  m->func = dup_n(func ? func : "", func ? strlen(func) : 0);
  m->text = dup_n(msg, len);
  pthread_mutex_lock(&log_mutex);
  if (log_count < LOG_QUEUE_MAX) {
    *log_tail = m;
    log_tail = &m->next;
    log_count++;
    m = NULL;
  }
  etops_logs_pending = 1;
  pthread_mutex_unlock(&log_mutex);
  if (m != NULL) { /* queue full: drop the message rather than block */
    free(m->file);
    free(m->func);
    free(m->text);
    free(m);
  }
}

static PyObject* drain_logs(PyObject* module, PyObject* noargs) {
  pthread_mutex_lock(&log_mutex);
  LogMsg* m = log_head;
  log_head = NULL;
  log_tail = &log_head;
  log_count = 0;
  etops_logs_pending = 0;
  pthread_mutex_unlock(&log_mutex);
  PyObject* out = PyList_New(0);
  while (m != NULL) {
    LogMsg* next = m->next;
    if (out != NULL) {
      PyObject* item = Py_BuildValue("(CssnN)", (int)m->level, m->file, m->func, (Py_ssize_t)m->line,
                                     PyUnicode_DecodeUTF8(m->text, strlen(m->text), "replace"));
      if (item == NULL || PyList_Append(out, item) < 0) Py_CLEAR(out);
      Py_XDECREF(item);
    }
    free(m->file);
    free(m->func);
    free(m->text);
    free(m);
    m = next;
  }
  return out;
}

/* ---- module functions --------------------------------------------------------- */

static etops_state* state_of(PyObject* module) { return (etops_state*)PyModule_GetState(module); }

static PyObject* configure(PyObject* module, PyObject* args, PyObject* kwargs) {
  static char* kwlist[] = {"tensor_type", "densify", "copy_back", "flush_logs", "empty_strided", NULL};
  PyObject *tensor_type, *densify, *copy_back, *flush, *empty_strided = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO|O", kwlist, &tensor_type, &densify, &copy_back, &flush,
                                   &empty_strided))
    return NULL;
  etops_state* st = state_of(module);
  PyObject* cap = PyObject_GetAttrString(tensor_type, "__dlpack_c_exchange_api__");
  if (cap == NULL) return NULL;
  const DLPackExchangeAPI* api = (const DLPackExchangeAPI*)PyCapsule_GetPointer(cap, "dlpack_exchange_api");
  Py_DECREF(cap);
  if (api == NULL) return NULL;
  if (api->header.version.major != DLPACK_MAJOR_VERSION) {
    return PyErr_Format(PyExc_RuntimeError, "torch's DLPack exchange API is version %d, etops was built for %d",
                        (int)api->header.version.major, DLPACK_MAJOR_VERSION);
  }
  st->torch_api = api;
  /* requires_grad, read on every call with outs (kernel_checks.c): torch's getter
   * itself, without the attribute lookup; grad mode asked only when one is set */
  PyObject* descr = PyObject_GetAttrString(tensor_type, "requires_grad");
  if (descr == NULL) return NULL;
  if (Py_IS_TYPE(descr, &PyGetSetDescr_Type) && ((PyGetSetDescrObject*)descr)->d_getset->get != NULL) {
    st->requires_grad_get = ((PyGetSetDescrObject*)descr)->d_getset->get;
    st->requires_grad_closure = ((PyGetSetDescrObject*)descr)->d_getset->closure;
  }
  Py_DECREF(descr); /* the descriptor lives in torch's TensorBase type, as long as torch */
  PyObject* torch = PyImport_ImportModule("torch");
  PyObject* grad_enabled = torch != NULL ? PyObject_GetAttrString(torch, "is_grad_enabled") : NULL;
  Py_XDECREF(torch);
  if (grad_enabled == NULL) return NULL;
  Py_XSETREF(st->is_grad_enabled, grad_enabled);
  /* grad mode is torch's thread-local state; its C++ accessor is asked directly
   * when torch's libc10 exports it (a few ns; a Python call otherwise) */
  void* c10 = dlopen("libc10.so", RTLD_LAZY | RTLD_NOLOAD);
  st->grad_mode_enabled = c10 != NULL ? (_Bool(*)(void))dlsym(c10, "_ZN3c108GradMode10is_enabledEv") : NULL;
  if (c10 != NULL) dlclose(c10); /* torch keeps it loaded */
  Py_XSETREF(st->torch_tensor_type, Py_NewRef(tensor_type));
  Py_XSETREF(st->densify, Py_NewRef(densify));
  Py_XSETREF(st->copy_back, Py_NewRef(copy_back));
  Py_XSETREF(st->flush_logs, Py_NewRef(flush));
  etops_find_tensor_wrap(st); /* after torch_tensor_type and torch_api */
  if (empty_strided != NULL) {
    if (st->kwnames_dtype == NULL && (st->kwnames_dtype = Py_BuildValue("(s)", "dtype")) == NULL) return NULL;
    Py_XSETREF(st->empty_strided, Py_NewRef(empty_strided));
  }
  Py_RETURN_NONE;
}

static PyObject* registered_kernels(PyObject* module, PyObject* noargs) {
  size_t n = etb_kernel_count();
  PyObject* out = PyList_New((Py_ssize_t)n);
  if (out == NULL) return NULL;
  for (size_t i = 0; i < n; i++) {
    const char *name, *key;
    etb_kernel_fn fn;
    if (etb_kernel_at(i, &name, &key, &fn) != ETB_OK) { /* the registry only grows: cannot happen */
      Py_DECREF(out);
      return PyErr_Format(PyExc_RuntimeError, "registry entry %zu vanished", i);
    }
    PyObject* item = Py_BuildValue("(szK)", name, key, (unsigned long long)(uintptr_t)fn);
    if (item == NULL) {
      Py_DECREF(out);
      return NULL;
    }
    PyList_SET_ITEM(out, (Py_ssize_t)i, item);
  }
  return out;
}

/* Tensor metas as etb_lookup / etb_make_key take them. */
typedef struct {
  int n;
  int8_t dtypes[ETOPS_MAX_TENSORS];
  uint8_t ndims[ETOPS_MAX_TENSORS];
  uint8_t orders[ETOPS_MAX_TENSORS][ETB_MAX_DIM];
  const uint8_t* order_ptrs[ETOPS_MAX_TENSORS];
} Metas;

/* Parses [(et_dtype, (dim order...)), ...]. */
static int parse_metas(PyObject* metas, Metas* m) {
  PyObject* seq = PySequence_Fast(metas, "metas must be a sequence of (dtype, dim_order)");
  if (seq == NULL) return -1;
  Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
  if (len > ETOPS_MAX_TENSORS) {
    Py_DECREF(seq);
    PyErr_SetString(PyExc_ValueError, "too many tensors for a kernel key");
    return -1;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    int dtype;
    PyObject* order;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "iO", &dtype, &order)) {
      Py_DECREF(seq);
      return -1;
    }
    PyObject* oseq = PySequence_Fast(order, "dim order must be a sequence of ints");
    if (oseq == NULL || PySequence_Fast_GET_SIZE(oseq) > ETB_MAX_DIM) {
      Py_XDECREF(oseq);
      Py_DECREF(seq);
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "dim order longer than 16");
      return -1;
    }
    m->dtypes[i] = (int8_t)dtype;
    m->ndims[i] = (uint8_t)PySequence_Fast_GET_SIZE(oseq);
    for (int j = 0; j < m->ndims[i]; j++) m->orders[i][j] = (uint8_t)PyLong_AsLong(PySequence_Fast_GET_ITEM(oseq, j));
    m->order_ptrs[i] = m->orders[i];
    Py_DECREF(oseq);
  }
  Py_DECREF(seq);
  m->n = (int)len;
  return PyErr_Occurred() ? -1 : 0;
}

static PyObject* lookup(PyObject* module, PyObject* args) {
  const char* name;
  PyObject* metas;
  Metas m;
  if (!PyArg_ParseTuple(args, "sO", &name, &metas) || parse_metas(metas, &m) < 0) return NULL;
  etb_kernel_fn fn = NULL;
  int err = etb_lookup(name, m.n, m.dtypes, m.ndims, m.order_ptrs, &fn);
  return Py_BuildValue("(iK)", err, (unsigned long long)(uintptr_t)fn);
}

static PyObject* make_key(PyObject* module, PyObject* metas) {
  Metas m;
  if (parse_metas(metas, &m) < 0) return NULL;
  char buf[1024];
  int err = etb_make_key(m.n, m.dtypes, m.ndims, m.order_ptrs, buf, sizeof buf);
  if (err != ETB_OK) {
    return PyErr_Format(PyExc_ValueError, "ExecuTorch cannot build a kernel key for these tensors (%s)",
                        etb_error_name(err));
  }
  return PyUnicode_FromString(buf);
}

/* tensor_meta(obj, op, argument, writable) -> (et_dtype, dim_order, kept): how a call would see `obj`;
 * kept is False when the call passes a contiguous copy instead (not dense, or permuted). With
 * `writable`, raises as a call does for a tensor the kernel writes (read-only, expanded). */
static PyObject* tensor_meta(PyObject* module, PyObject* args) {
  PyObject* obj;
  const char* op = "tensor_meta";
  const char* what = "tensor";
  int writable = 0;
  if (!PyArg_ParseTuple(args, "O|ssp", &obj, &op, &what, &writable)) return NULL;
  etops_state* st = state_of(module);
  etb_tensor t;
  etops_keep keep = {.n = 0, .overflow = NULL};
  int rc = etops_borrow_tensor(st, obj, &t, &keep, op, what, writable, NULL);
  etops_keep_release(&keep);
  if (rc < 0) return NULL;
  if (rc == LAYOUT_OVERLAPPING && writable) return etops_refuse_overlapping_write(op, what), NULL;
  PyObject* order = PyTuple_New(t.ndim);
  if (order == NULL) return NULL;
  for (int i = 0; i < t.ndim; i++) PyTuple_SET_ITEM(order, i, PyLong_FromLong(t.dim_order[i]));
  return Py_BuildValue("(iNO)", (int)t.dtype, order, rc == LAYOUT_DENSE ? Py_True : Py_False);
}

/* calibrate_grad_probe(plain, grad) -> bool: kernel_checks.c's grad probe, from two
 * lists of exact torch.Tensors (without and with autograd state). */
static PyObject* calibrate_grad_probe(PyObject* module, PyObject* args) {
  PyObject *plain, *grad;
  if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &plain, &PyList_Type, &grad)) return NULL;
  int on = etops_calibrate_grad_probe(state_of(module), plain, grad);
  if (on < 0) return NULL;
  return PyBool_FromLong(on);
}

/* calibrate_tensor_fields(samples) -> bool: tensor_fields.c's offsets of a tensor's
 * lazy bits, inference-ness and version counter, from the samples etops/__init__.py
 * makes; off (torch's getters answer) unless exactly one layout fits them all. */
static PyObject* calibrate_tensor_fields(PyObject* module, PyObject* samples) {
  int on = etops_calibrate_tensor_fields(state_of(module), samples);
  if (on < 0) return NULL;
  return PyBool_FromLong(on);
}

/* set_layout_preserve(flag) -> previous flag: the calling thread's layout mode. */
static PyObject* set_layout_preserve(PyObject* module, PyObject* flag) {
  int on = PyObject_IsTrue(flag);
  if (on < 0) return NULL;
  int previous = etops_layout_preserve;
  etops_layout_preserve = on;
  return PyBool_FromLong(previous);
}

static PyObject* registry_generation(PyObject* module, PyObject* noargs) {
  return PyLong_FromUnsignedLongLong(etb_registry_generation());
}

static PyObject* error_name(PyObject* module, PyObject* code) {
  long c = PyLong_AsLong(code);
  if (c == -1 && PyErr_Occurred()) return NULL;
  return PyUnicode_FromString(etb_error_name((int32_t)c));
}

static PyObject* install_pal(PyObject* module, PyObject* noargs) {
  etb_install_pal(log_sink);
  Py_RETURN_TRUE;
}

static PyObject* trap_faults(PyObject* module, PyObject* noargs) {
  if (etf_install() != 0) return PyErr_SetFromErrno(PyExc_OSError);
  etops_find_arenas(); /* once: the malloc locks a fault in libc may leave held (fault_state.c) */
  Py_RETURN_NONE;
}

/* The dispatcher Python kernels call (a ctypes callback: the interpreter runs in
 * it), wrapped so that no fault trap is armed while it runs: a fault in Python or
 * torch must never jump out of the interpreter's frames. */
typedef int (*python_dispatch_fn)(int, int, void*, void*, int);
static python_dispatch_fn python_dispatch;

static int dispatch_unarmed(int slot, int n, void* values, void* err, int err_len) {
  etf_trap* trap = etf_disarm();
  int rc = python_dispatch(slot, n, values, err, err_len);
  etf_rearm(trap);
  return rc;
}

static PyObject* unarmed_dispatch(PyObject* module, PyObject* address) {
  void* p = PyLong_AsVoidPtr(address);
  if (p == NULL && PyErr_Occurred()) return NULL;
  python_dispatch = (python_dispatch_fn)p;
  return PyLong_FromVoidPtr((void*)dispatch_unarmed);
}

static PyMethodDef module_methods[] = {
    {"calibrate_tensor_fields", calibrate_tensor_fields, METH_O,
     "calibrate_tensor_fields(samples) -> bool: finds where torch keeps a tensor's lazy negative and conjugate "
     "bits, whether it is an inference tensor, and its version counter (read on every call)"},
    {"calibrate_grad_probe", calibrate_grad_probe, METH_VARARGS,
     "calibrate_grad_probe(plain, grad) -> bool: finds where exact torch.Tensors keep their autograd state "
     "(NULL for tensors without), from tensors torch says lack (plain) and have it (grad); on when one layout "
     "fits every sample"},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "configure(tensor_type, densify, copy_back, flush_logs, empty_strided=None): torch.Tensor (for its "
     "DLPack C exchange API), the function that copies a tensor to contiguous, the one that copies a "
     "computed contiguous out back into the user's tensor, the function that drains ExecuTorch logs, and "
     "torch.empty_strided (kernels allocate the outs of calls without out= in C; without it they ask Python)."},
    {"set_layout_preserve", set_layout_preserve, METH_O,
     "set_layout_preserve(flag) -> previous: whether the calling thread's calls pass every dense tensor "
     "in its true dim order (True) or copy permuted ones to contiguous (False, the default)."},
    {"registered_kernels", registered_kernels, METH_NOARGS,
     "[(name, kernel key or None for a fallback, function address)] in registration order."},
    {"lookup", lookup, METH_VARARGS,
     "lookup(name, [(et_dtype, dim_order), ...]) -> (error code, function address): ExecuTorch's own "
     "kernel selection (exact key, then fallback)."},
    {"make_key", make_key, METH_O, "make_key([(et_dtype, dim_order), ...]) -> ExecuTorch's kernel key string."},
    {"tensor_meta", tensor_meta, METH_VARARGS,
     "tensor_meta(obj, op='tensor_meta', argument='tensor', writable=False) -> (et_dtype, dim_order, kept) as a "
     "kernel call would see obj; errors name op and argument (writable: raises for read-only or expanded obj)."},
    {"registry_generation", registry_generation, METH_NOARGS, "Counter bumped on every etops registry change."},
    {"error_name", error_name, METH_O, "Name of an ExecuTorch Error code."},
    {"install_pal", install_pal, METH_NOARGS,
     "Routes ExecuTorch's log messages into etops and its aborts through a notice naming the kernel."},
    {"trap_faults", trap_faults, METH_NOARGS,
     "Installs (again, when another handler took its place) the handler that turns a SIGSEGV, SIGBUS, "
     "SIGFPE or SIGILL inside a kernel call on the calling thread into the call's failure (KernelCrashed); "
     "any other fault goes to the handler installed before."},
    {"unarmed_dispatch", unarmed_dispatch, METH_O,
     "unarmed_dispatch(address of the Python kernels' ctypes dispatcher) -> address of a function that "
     "calls it with no fault trap armed (what the trampolines must call)."},
    {"drain_logs", drain_logs, METH_NOARGS,
     "[(level, file, function, line, message)] logged by ExecuTorch outside kernel calls since the last drain."},
    {NULL, NULL, 0, NULL},
};

extern PyMethodDef etops_custom_methods[]; /* custom.c */
extern PyMethodDef etops_guard_methods[];  /* guard_signals.c */
extern PyMethodDef etops_fault_state_methods[]; /* fault_state.c */
extern PyMethodDef etops_fault_frame_methods[]; /* fault_frame.c */
int etops_custom_add_constants(PyObject* module);

static int module_exec(PyObject* module) {
  etops_state* st = state_of(module);
  if (PyModule_AddFunctions(module, etops_custom_methods) < 0 || etops_custom_add_constants(module) < 0) return -1;
  if (PyModule_AddFunctions(module, etops_guard_methods) < 0) return -1;
  if (PyModule_AddFunctions(module, etops_fault_state_methods) < 0) return -1;
  if (PyModule_AddFunctions(module, etops_fault_frame_methods) < 0) return -1;
  if (PyModule_AddIntConstant(module, "POOL_ITEMS_SKIPPED", etf_pool_items_skipped) < 0) return -1;
  memset(st, 0, sizeof(*st));
  st->str_dlpack = PyUnicode_InternFromString("__dlpack__");
  st->str_dlpack_device = PyUnicode_InternFromString("__dlpack_device__");
  if (st->str_dlpack == NULL || st->str_dlpack_device == NULL) return -1;
  if (etops_kernel_type_init(module, st) < 0) return -1;
  if (etops_delegate_type_init(module, st) < 0) return -1;
  if (etops_failure_types_init(module, st) < 0) return -1;
  if (etops_slow_path_types_init(module, st) < 0) return -1;
  if (PyModule_AddIntConstant(module, "MAX_DIM", ETB_MAX_DIM) < 0) return -1;
  if (PyModule_AddIntConstant(module, "MAX_ARGS", ETOPS_MAX_ARGS) < 0) return -1;
  return 0;
}

static int module_traverse(PyObject* module, visitproc visit, void* arg) {
  etops_state* st = state_of(module);
  Py_VISIT(st->kernel_type);
  Py_VISIT(st->delegate_type);
  Py_VISIT(st->failure_type);
  Py_VISIT(st->fault_type);
  Py_VISIT(st->slow_path_type);
  Py_VISIT(st->handled_type);
  Py_VISIT(st->torch_tensor_type);
  Py_VISIT(st->densify);
  Py_VISIT(st->copy_back);
  Py_VISIT(st->flush_logs);
  Py_VISIT(st->empty_strided);
  Py_VISIT(st->subclass_type);
  Py_VISIT(st->is_grad_enabled);
  return 0;
}

static int module_clear(PyObject* module) {
  etops_state* st = state_of(module);
  Py_CLEAR(st->kernel_type);
  Py_CLEAR(st->delegate_type);
  Py_CLEAR(st->failure_type);
  Py_CLEAR(st->fault_type);
  Py_CLEAR(st->slow_path_type);
  Py_CLEAR(st->handled_type);
  Py_CLEAR(st->torch_tensor_type);
  Py_CLEAR(st->densify);
  Py_CLEAR(st->copy_back);
  Py_CLEAR(st->flush_logs);
  Py_CLEAR(st->empty_strided);
  Py_CLEAR(st->kwnames_dtype);
  Py_CLEAR(st->str_dlpack);
  Py_CLEAR(st->str_dlpack_device);
  Py_CLEAR(st->subclass_type);
  Py_CLEAR(st->is_grad_enabled);
  st->requires_grad_get = NULL;
  st->grad_mode_enabled = NULL;
  st->tensor_wrap = NULL;
  return 0;
}

static void module_free(void* module) { module_clear((PyObject*)module); }

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "etops._native._core",
    .m_doc = "C core of etops: ExecuTorch kernels as Python callables.",
    .m_size = sizeof(etops_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__core(void) { return PyModuleDef_Init(&module_def); }
