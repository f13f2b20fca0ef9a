/*
 * kernel_slow.c - the typed interface between the C call and its Python slow path.
 *
 * SlowPathTable is the C struct the Python side fills: one callable per hand-off
 * (SlowEntry, kernel_internal.h), each named, all required when it is built
 * (etops/slow_path.py builds it from SlowPath's methods), each replaceable by
 * assignment (a test's recorder), never looked up by name during a call. Handled is
 * the one result type a check returns when the slow path made the call itself:
 * the C call returns Handled.result as the call's. What each hand-off takes and
 * answers is said once, at SlowEntry; the functions below check every answer's
 * type, so a malformed one is a TypeError naming the hand-off, not a guess.
 */
#include "kernel_internal.h"
#include "fault_trap.h"

#include <structmember.h>

/* Python's name of each hand-off: SlowPathTable's keyword arguments and attributes. */
static const char* const ENTRY_NAMES[SLOW_ENTRY_COUNT] = {
    [SLOW_ALLOCATE_AND_CALL] = "allocate_and_call",
    [SLOW_OUTS_TO_REMEMBER] = "outs_to_remember",
    [SLOW_PRECHECK] = "precheck",
    [SLOW_VALIDATE] = "validate",
    [SLOW_EXPLAIN_MISMATCH] = "explain_mismatch",
    [SLOW_FOOTPRINT_REFUSED] = "footprint_refused",
    [SLOW_FAILED] = "failed",
    [SLOW_NO_KERNEL] = "no_kernel",
    [SLOW_RESIZED] = "resized",
    [SLOW_GUARDED] = "guarded",
    [SLOW_OUTS_ALLOCATED] = "outs_allocated",
    [SLOW_OVERLAPS] = "overlaps",
    [SLOW_SNAPSHOT] = "snapshot",
};

/* ---- SlowPathTable ----------------------------------------------------------------- */

static PyObject* table_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static char* kwlist[SLOW_ENTRY_COUNT + 1];
  for (int e = 0; e < SLOW_ENTRY_COUNT; e++) kwlist[e] = (char*)ENTRY_NAMES[e];
  kwlist[SLOW_ENTRY_COUNT] = NULL;
  PyObject* fn[SLOW_ENTRY_COUNT] = {NULL};
  _Static_assert(SLOW_ENTRY_COUNT == 13, "one O per entry below");
  /* keyword-only ("|$": CPython's keyword-only arguments are optional; required below) */
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOOOOOOOOOOO:SlowPathTable", kwlist, &fn[0], &fn[1], &fn[2],
                                   &fn[3], &fn[4], &fn[5], &fn[6], &fn[7], &fn[8], &fn[9], &fn[10], &fn[11], &fn[12]))
    return NULL;
  for (int e = 0; e < SLOW_ENTRY_COUNT; e++) {
    if (fn[e] == NULL) {
      PyErr_Format(PyExc_TypeError, "SlowPathTable: missing required argument '%s'", ENTRY_NAMES[e]);
      return NULL;
    }
    if (!PyCallable_Check(fn[e])) {
      PyErr_Format(PyExc_TypeError, "SlowPathTable: argument '%s' must be callable, not %.100s", ENTRY_NAMES[e],
                   Py_TYPE(fn[e])->tp_name);
      return NULL;
    }
  }
  SlowPathTable* t = (SlowPathTable*)type->tp_alloc(type, 0);
  if (t == NULL) return NULL;
  for (int e = 0; e < SLOW_ENTRY_COUNT; e++) t->fn[e] = Py_NewRef(fn[e]);
  return (PyObject*)t;
}

static int table_traverse(SlowPathTable* t, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(t));
  for (int e = 0; e < SLOW_ENTRY_COUNT; e++) Py_VISIT(t->fn[e]);
  return 0;
}

static int table_clear(SlowPathTable* t) {
  for (int e = 0; e < SLOW_ENTRY_COUNT; e++) Py_CLEAR(t->fn[e]);
  return 0;
}

static void table_dealloc(SlowPathTable* t) {
  PyTypeObject* tp = Py_TYPE(t);
  PyObject_GC_UnTrack(t);
  table_clear(t);
  tp->tp_free((PyObject*)t);
  Py_DECREF(tp);
}

static PyObject* table_get(PyObject* self, void* entry) {
  PyObject* fn = ((SlowPathTable*)self)->fn[(intptr_t)entry];
  return Py_NewRef(fn != NULL ? fn : Py_None);
}

static int table_set(PyObject* self, PyObject* value, void* entry) {
  const char* name = ENTRY_NAMES[(intptr_t)entry];
  if (value == NULL || !PyCallable_Check(value)) {
    PyErr_Format(PyExc_TypeError, "SlowPathTable: entry '%s' must be callable, not %.100s", name,
                 value == NULL ? "deleted" : Py_TYPE(value)->tp_name);
    return -1;
  }
  Py_XSETREF(((SlowPathTable*)self)->fn[(intptr_t)entry], Py_NewRef(value));
  return 0;
}

static PyGetSetDef table_getset[SLOW_ENTRY_COUNT + 1];

static PyType_Slot table_slots[] = {
    {Py_tp_new, table_new},
    {Py_tp_dealloc, table_dealloc},
    {Py_tp_traverse, table_traverse},
    {Py_tp_clear, table_clear},
    {Py_tp_getset, table_getset},
    {Py_tp_doc, "The slow path's hand-offs as the C call sees them: one callable per entry, every one named "
                "when built (keyword-only), replaceable by assignment. etops.slow_path builds SLOW_PATH."},
    {0, NULL},
};

static PyType_Spec table_spec = {
    .name = "etops._native._core.SlowPathTable",
    .basicsize = sizeof(SlowPathTable),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = table_slots,
};

/* ---- Handled ------------------------------------------------------------------------ */

static PyObject* handled_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static char* kwlist[] = {"result", NULL};
  PyObject* result;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Handled", kwlist, &result)) return NULL;
  HandledObject* h = (HandledObject*)type->tp_alloc(type, 0);
  if (h == NULL) return NULL;
  h->result = Py_NewRef(result);
  return (PyObject*)h;
}

static int handled_traverse(HandledObject* h, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(h));
  Py_VISIT(h->result);
  return 0;
}

static int handled_clear(HandledObject* h) {
  Py_CLEAR(h->result);
  return 0;
}

static void handled_dealloc(HandledObject* h) {
  PyTypeObject* tp = Py_TYPE(h);
  PyObject_GC_UnTrack(h);
  handled_clear(h);
  tp->tp_free((PyObject*)h);
  Py_DECREF(tp);
}

static PyObject* handled_repr(PyObject* self) {
  return PyUnicode_FromFormat("Handled(%R)", ((HandledObject*)self)->result);
}

static PyMemberDef handled_members[] = {
    {"result", T_OBJECT, offsetof(HandledObject, result), READONLY, "what the call returns"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot handled_slots[] = {
    {Py_tp_new, handled_new},
    {Py_tp_dealloc, handled_dealloc},
    {Py_tp_traverse, handled_traverse},
    {Py_tp_clear, handled_clear},
    {Py_tp_repr, handled_repr},
    {Py_tp_members, handled_members},
    {Py_tp_doc, "Handled(result): a slow-path check made the call itself; `result` is what the call returns."},
    {0, NULL},
};

static PyType_Spec handled_spec = {
    .name = "etops._native._core.Handled",
    .basicsize = sizeof(HandledObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = handled_slots,
};

int etops_slow_path_types_init(PyObject* module, etops_state* st) {
  for (int e = 0; e < SLOW_ENTRY_COUNT; e++) {
    table_getset[e] = (PyGetSetDef){ENTRY_NAMES[e], table_get, table_set, NULL, (void*)(intptr_t)e};
  }
  st->slow_path_type = PyType_FromModuleAndSpec(module, &table_spec, NULL);
  if (st->slow_path_type == NULL || PyModule_AddObjectRef(module, "SlowPathTable", st->slow_path_type) < 0) return -1;
  st->handled_type = PyType_FromModuleAndSpec(module, &handled_spec, NULL);
  if (st->handled_type == NULL || PyModule_AddObjectRef(module, "Handled", st->handled_type) < 0) return -1;
  PyObject* names = PyTuple_New(SLOW_ENTRY_COUNT);
  for (int e = 0; names != NULL && e < SLOW_ENTRY_COUNT; e++) {
    PyObject* name = PyUnicode_InternFromString(ENTRY_NAMES[e]);
    if (name == NULL) Py_CLEAR(names);
    else PyTuple_SET_ITEM(names, e, name);
  }
  if (names == NULL) return -1;
  int status = PyModule_AddObjectRef(module, "SLOW_PATH_ENTRIES", names);
  Py_DECREF(names);
  return status;
}

/* ---- calling the slow path ------------------------------------------------------------ */

PyObject* slow_values(const KernelObject* k, PyObject* const* bound) {
  PyObject* values = PyTuple_New(k->nargs);
  if (values == NULL) return NULL;
  for (int i = 0; i < k->nargs; i++) PyTuple_SET_ITEM(values, i, Py_NewRef(bound[i] != NULL ? bound[i] : Py_None));
  return values;
}

PyObject* slow_call(KernelObject* k, SlowEntry entry, PyObject* const* bound, PyObject* extra) {
  /* a handler a library installed since (faulthandler's and signal.signal are
   * wrapped at import: etops/handler_chain.py) would see kernel faults first:
   * etops' goes back on top, chaining to it, when a call meets a new signature
   * (not on the prechecks every call of a guarded kernel makes: five sigaction
   * queries each) */
  if ((entry == SLOW_VALIDATE || entry == SLOW_ALLOCATE_AND_CALL) && etf_install() != 0)
    return PyErr_SetFromErrno(PyExc_OSError);
  PyObject* values = slow_values(k, bound);
  if (values == NULL) return NULL;
  PyObject* args[3] = {(PyObject*)k, values, extra != NULL ? extra : Py_None};
  PyObject* res = PyObject_Vectorcall(k->slow->fn[entry], args, 3, NULL);
  Py_DECREF(values);
  return res;
}

PyObject* slow_call_args(KernelObject* k, SlowEntry entry, PyObject* const* args, size_t nargs) {
  return PyObject_Vectorcall(k->slow->fn[entry], args, nargs, NULL);
}

/* A check's answer that is neither of the types the entry may answer. */
static int malformed(const KernelObject* k, SlowEntry entry, PyObject* res, const char* expected) {
  PyErr_Format(PyExc_TypeError, "%s: the slow path's %s answered %.100s, not %s", k->op_name, ENTRY_NAMES[entry],
               Py_TYPE(res)->tp_name, expected);
  Py_DECREF(res);
  return SLOW_ERROR;
}

/* Takes `res` (a Handled, stolen): its result into *result. */
static int take_handled(PyObject* res, PyObject** result) {
  *result = Py_NewRef(((HandledObject*)res)->result);
  Py_DECREF(res);
  return SLOW_HANDLED;
}

int slow_precheck(KernelObject* k, PyObject* const* bound, PyObject** result) {
  PyObject* res = slow_call(k, SLOW_PRECHECK, bound, NULL);
  if (res == NULL) return SLOW_ERROR;
  if (res == Py_None) {
    Py_DECREF(res);
    return SLOW_GO_ON;
  }
  if (Py_IS_TYPE(res, (PyTypeObject*)k->st->handled_type)) return take_handled(res, result);
  return malformed(k, SLOW_PRECHECK, res, "Handled or None");
}

int slow_validate(KernelObject* k, PyObject* const* bound, PyObject** result, int* static_outs) {
  PyObject* res = slow_call(k, SLOW_VALIDATE, bound, NULL);
  if (res == NULL) return SLOW_ERROR;
  if (PyBool_Check(res)) {
    *static_outs = res == Py_True;
    Py_DECREF(res);
    return SLOW_GO_ON;
  }
  if (Py_IS_TYPE(res, (PyTypeObject*)k->st->handled_type)) return take_handled(res, result);
  return malformed(k, SLOW_VALIDATE, res, "Handled or a bool");
}

int slow_accepts(KernelObject* k, SlowEntry entry, PyObject* const* bound, PyObject* extra) {
  PyObject* res = slow_call(k, entry, bound, extra);
  if (res == NULL) return -1;
  if (res != Py_None) return malformed(k, entry, res, "None (or an exception)");
  Py_DECREF(res);
  return 0;
}

int slow_refuses(KernelObject* k, SlowEntry entry, PyObject* const* bound, PyObject* extra) {
  PyObject* res = slow_call(k, entry, bound, extra);
  if (res == NULL) return -1;
  return malformed(k, entry, res, "an exception (it refuses the call)");
}
