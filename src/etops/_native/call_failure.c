/*
 * call_failure.c - a failed call as Python sees it: the bridge's etb_failure (the
 * thread's last, etb_last_failure) as one CallFailure object with named fields, the
 * fault of a crash as a Fault. What the slow path's `failed` and delegate_init's
 * caller get; etops/call_failure.py's kernel_failure makes the exception from it. Only
 * failed calls come here.
 */
#include "etops_native.h"

#include <string.h>

#include "fault_state.h"

/* Python's name of each etb_failure_kind: what CallFailure.kind holds. */
static const char* const KIND_NAMES[ETB_FAILURE_KIND_COUNT] = {
    [ETB_FAILURE_ERROR] = "error",
    [ETB_FAILURE_RESIZE_REFUSED] = "resize_refused",
    [ETB_FAILURE_ABORTED] = "aborted",
    [ETB_FAILURE_CXX_EXCEPTION] = "exception",
    [ETB_FAILURE_CRASHED] = "crashed",
    [ETB_FAILURE_REFUSED] = "refused",
};

static PyStructSequence_Field failure_fields[] = {
    {"kind", "why the call failed: 'error' (the kernel returned an Error), 'resize_refused' (an Error after "
             "ExecuTorch refused to resize a tensor the kernel resized), 'aborted' (ExecuTorch aborted, unwound), "
             "'exception' (a C++ exception), 'crashed' (a trapped fault), 'refused' (nothing ran)"},
    {"code", "the call's status: an ExecuTorch Error code, or 0x1000 aborted, 0x1001 exception, 0x1002 crashed"},
    {"name", "the status's name (Error::<name>, or Aborted, CxxException, Crashed)"},
    {"message", "what ExecuTorch and the kernel logged during the call, a line a message ('' when nothing)"},
    {"file", "the source file of the last error or fatal message logged (the failing check), or ''"},
    {"line", "its line, 0 when none"},
    {"kernel", "the kernel (or backend) the call ran"},
    {"fault", "a Fault when the kind is 'crashed', else None"},
    {"origin_file", "the source file of the first error or fatal message logged (the check that failed first, "
                    "which an outer check then reported again), or ''"},
    {"origin_line", "its line, 0 when none"},
    {NULL, NULL},
};

static PyStructSequence_Desc failure_desc = {
    "etops._native._core.CallFailure",
    "A failed kernel or backend call, as the bridge saw it (etops_bridge.h's etb_failure).",
    failure_fields,
    10,
};

static PyStructSequence_Field fault_fields[] = {
    {"signal", "the signal number (SIGSEGV, SIGBUS, SIGFPE, SIGILL)"},
    {"code", "its si_code"},
    {"address", "the faulting address: the memory accessed (SIGSEGV, SIGBUS) or the instruction"},
    {"pc", "the program counter"},
    {"is_write", "1 a write, 0 a read, -1 unknown (SIGSEGV)"},
    {"argument", "the tensor argument whose guard page stopped the access (a probe), else None"},
    {"where", "where the address lies relative to that argument, else None"},
    {"offset", "bytes beyond that argument, else None"},
    {"site", "where the program counter lay when it taints the process (fault_state.h): 'libc', 'loader', "
             "'allocator' (libstdc++'s operator new/delete), or '' (the kernel's code)"},
    {"outs_untouched", "True when the kernel wrote etops' copies of the outs (a probe), which were not copied "
                       "back: the caller's outs are as before the call"},
    {"stack_overflow", "True when the address is the end of the thread's stack (a stack overflow)"},
    {NULL, NULL},
};

static PyStructSequence_Desc fault_desc = {
    "etops._native._core.Fault",
    "A synchronous fault trapped inside a kernel on the calling thread (fault_trap.h's etf_fault).",
    fault_fields,
    11,
};

int etops_failure_types_init(PyObject* module, etops_state* st) {
  st->failure_type = (PyObject*)PyStructSequence_NewType(&failure_desc);
  if (st->failure_type == NULL) return -1;
  st->fault_type = (PyObject*)PyStructSequence_NewType(&fault_desc);
  if (st->fault_type == NULL) return -1;
  if (PyModule_AddObjectRef(module, "CallFailure", st->failure_type) < 0) return -1;
  if (PyModule_AddObjectRef(module, "Fault", st->fault_type) < 0) return -1;
  /* every kind CallFailure.kind may hold, in etb_failure_kind's order */
  PyObject* kinds = PyTuple_New(ETB_FAILURE_KIND_COUNT - 1);
  if (kinds == NULL) return -1;
  for (int i = 1; i < ETB_FAILURE_KIND_COUNT; i++) {
    PyObject* name = PyUnicode_InternFromString(KIND_NAMES[i]);
    if (name == NULL) {
      Py_DECREF(kinds);
      return -1;
    }
    PyTuple_SET_ITEM(kinds, i - 1, name);
  }
  int status = PyModule_AddObjectRef(module, "FAILURE_KINDS", kinds);
  Py_DECREF(kinds);
  return status;
}

/* Sets item `i` of the struct sequence `seq` to `value` (stolen); -1 when it is NULL. */
static int set_item(PyObject* seq, Py_ssize_t i, PyObject* value) {
  if (value == NULL) return -1;
  PyStructSequence_SET_ITEM(seq, i, value);
  return 0;
}

/* The Fault of `f`, placed at `placed` ((argument, where, offset)) or not (NULL). */
static PyObject* fault_object(etops_state* st, const etf_fault* f, PyObject* placed, int outs_untouched) {
  PyObject* fault = PyStructSequence_New((PyTypeObject*)st->fault_type);
  if (fault == NULL) return NULL;
  int bad = set_item(fault, 0, PyLong_FromLong(f->signo)) < 0 || set_item(fault, 1, PyLong_FromLong(f->code)) < 0 ||
            set_item(fault, 2, PyLong_FromUnsignedLongLong(f->address)) < 0 ||
            set_item(fault, 3, PyLong_FromUnsignedLongLong(f->pc)) < 0 ||
            set_item(fault, 4, PyLong_FromLong(f->is_write)) < 0;
  for (Py_ssize_t i = 0; !bad && i < 3; i++) {
    bad = set_item(fault, 5 + i, Py_NewRef(placed != NULL ? PyTuple_GET_ITEM(placed, i) : Py_None)) < 0;
  }
  bad = bad || set_item(fault, 8, PyUnicode_FromString(etops_fault_site_name(etops_fault_site(f->pc)))) < 0 ||
        set_item(fault, 9, PyBool_FromLong(outs_untouched)) < 0;
  bad = bad || set_item(fault, 10, PyBool_FromLong(f->stack_overflow)) < 0;
  if (bad) Py_CLEAR(fault);
  return fault;
}

PyObject* etops_last_failure(etops_state* st, PyObject* placed, int outs_untouched) {
  const etb_failure* f = etb_last_failure();
  PyObject* failure = PyStructSequence_New((PyTypeObject*)st->failure_type);
  if (failure == NULL) return NULL;
  const char* kind = f->kind > 0 && f->kind < ETB_FAILURE_KIND_COUNT ? KIND_NAMES[f->kind] : "error";
  PyObject* fault = f->kind == ETB_FAILURE_CRASHED ? fault_object(st, &f->fault, placed, outs_untouched) : Py_NewRef(Py_None);
  if (set_item(failure, 7, fault) < 0 || set_item(failure, 0, PyUnicode_InternFromString(kind)) < 0 || set_item(failure, 1, PyLong_FromLong(f->code)) < 0 ||
      set_item(failure, 2, PyUnicode_FromString(etb_error_name(f->code))) < 0 ||
      set_item(failure, 3, PyUnicode_DecodeUTF8(f->message, (Py_ssize_t)strlen(f->message), "replace")) < 0 ||
      set_item(failure, 4, PyUnicode_DecodeUTF8(f->file, (Py_ssize_t)strlen(f->file), "replace")) < 0 ||
      set_item(failure, 5, PyLong_FromUnsignedLong(f->line)) < 0 ||
      set_item(failure, 6, PyUnicode_DecodeUTF8(f->kernel, (Py_ssize_t)strlen(f->kernel), "replace")) < 0 ||
      set_item(failure, 8, PyUnicode_DecodeUTF8(f->origin_file, (Py_ssize_t)strlen(f->origin_file), "replace")) < 0 ||
      set_item(failure, 9, PyLong_FromUnsignedLong(f->origin_line)) < 0) {
    Py_DECREF(failure);
    return NULL;
  }
  return failure;
}
