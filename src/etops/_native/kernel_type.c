/*
 * kernel_type.c - construction of a Kernel and its Python-visible type.
 *
 * A Kernel is built once per operator from an argument plan computed in Python
 * (etops/plan.py) from the operator's schema: parse_plan reads it into ArgSpecs
 * (scalar defaults converted once, here), kernel_new takes the returns, the info
 * object, the slow path, and for a delegate its handle and tensor specs. The type
 * adds the vectorcall slot (kernel_call.c), GC support, and attribute lookup that
 * falls back to the Python info object (`_schema`, `kernels`, `explain`, ...).
 */
#include "kernel_internal.h"

#include <string.h>
#include <structmember.h>

static int parse_plan(KernelObject* k, PyObject* plan) {
  if (!PyTuple_Check(plan)) {
    PyErr_SetString(PyExc_TypeError, "plan must be a tuple");
    return -1;
  }
  Py_ssize_t n = PyTuple_GET_SIZE(plan);
  if (n > ETOPS_MAX_ARGS) {
    PyErr_Format(PyExc_ValueError, "%s has %zd arguments; etops supports at most %d", k->op_name, n,
                 ETOPS_MAX_ARGS);
    return -1;
  }
  k->nargs = 0;
  k->npositional = 0;
  int seen_kwonly = 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *name, *def, *extra;
    int kind, flags;
    Py_ssize_t fixed_len;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(plan, i), "UiiOOn", &name, &kind, &flags, &def, &extra, &fixed_len))
      return -1;
    ArgSpec* a = &k->args[i];
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    a->name = name;
    a->cname = PyUnicode_AsUTF8(name);
    a->kind = kind;
    a->flags = flags;
    a->default_value = (flags & F_HAS_DEFAULT) ? Py_NewRef(def) : NULL;
    a->fixed_len = fixed_len;
    a->alias_of = -1;
    if (kind == K_RETURN_SLOT && PyLong_Check(extra)) {
      a->alias_of = (int)PyLong_AsLong(extra);
      extra = Py_None;
    }
    a->extra = extra == Py_None ? NULL : Py_NewRef(extra);
    if (kind == K_ENUM && (a->extra == NULL || !PyDict_Check(a->extra))) {
      PyErr_Format(PyExc_TypeError, "argument %U: enum kind needs a dict", name);
      return -1;
    }
    if (kind == K_RETURN_SLOT) continue;
    k->nargs = (int)i + 1;
    if (flags & F_KWONLY) seen_kwonly = 1;
    else if (!seen_kwonly) k->npositional = (int)i + 1;
  }
  k->nslots = (int)n;
  for (int i = 0; i < k->nargs; i++) {
    ArgSpec* a = &k->args[i];
    a->has_default_value = 0;
    int scalar_kind = a->kind == K_SCALAR || a->kind == K_INT || a->kind == K_FLOAT || a->kind == K_BOOL ||
                      a->kind == K_ENUM;
    if (a->default_value != NULL && scalar_kind) {
      if (convert_arg(k, NULL, i, a->default_value, &a->default_converted) < 0) return -1;
      a->has_default_value = 1;
    }
  }
  for (int i = k->nargs; i < k->nslots; i++) {
    ArgSpec* a = &k->args[i];
    if (a->kind != K_RETURN_SLOT || a->alias_of >= k->nargs) {
      PyErr_Format(PyExc_ValueError, "%s: plan entry %d must be a return slot of a known out", k->op_name, i);
      return -1;
    }
    /* the slot's value before each call: the out it is, or None for the kernel to fill */
    a->default_converted.tag = a->alias_of >= 0 ? ETB_ALIAS : ETB_NONE;
    a->default_converted.len = 0;
    a->default_converted.u.i = a->alias_of;
  }
  k->nouts = 0;
  k->has_lists = 0;
  for (int i = 0; i < k->nargs; i++) {
    int kind = k->args[i].kind;
    if (k->args[i].flags & F_OUT) k->out_args[k->nouts++] = (uint8_t)i;
    if (kind == K_TENSOR_LIST || kind == K_OPT_TENSOR_LIST || kind == K_STR || kind == K_INT_LIST ||
        kind == K_FLOAT_LIST || kind == K_BOOL_LIST)
      k->has_lists = 1;
  }
  int tensors = 0;
  for (int i = 0; i < k->nargs; i++) tensors += k->args[i].kind == K_TENSOR;
  if (tensors > ETOPS_MAX_TENSORS) {
    PyErr_Format(PyExc_ValueError, "%s has too many tensor arguments", k->op_name);
    return -1;
  }
  return 0;
}

/* index_ranges: a tuple of (index, source, dim argument or -1, fixed dim) argument
 * positions, the rules table's index checks made in C (kernel_footprint.c). */
static int parse_index_ranges(KernelObject* k, PyObject* ranges) {
  k->nranges = 0;
  if (ranges == NULL || ranges == Py_None) return 0;
  if (!PyTuple_Check(ranges) || PyTuple_GET_SIZE(ranges) > ETOPS_MAX_INDEX_RANGES) {
    PyErr_Format(PyExc_TypeError, "Kernel: argument 'index_ranges' must be a tuple of at most %d tuples",
                 ETOPS_MAX_INDEX_RANGES);
    return -1;
  }
  for (Py_ssize_t r = 0; r < PyTuple_GET_SIZE(ranges); r++) {
    int index, source, dim_arg, fixed_dim;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(ranges, r), "iiii", &index, &source, &dim_arg, &fixed_dim)) return -1;
    if (index < 0 || index >= k->nargs || source < 0 || source >= k->nargs || dim_arg >= k->nargs ||
        fixed_dim < -ETB_MAX_DIM || fixed_dim >= ETB_MAX_DIM) {
      PyErr_SetString(PyExc_ValueError, "Kernel: argument 'index_ranges' names an argument the plan lacks");
      return -1;
    }
    k->ranges[r] = (IndexRange){(int8_t)index, (int8_t)source, (int8_t)(dim_arg < 0 ? -1 : dim_arg), (int8_t)fixed_dim};
    k->nranges++;
  }
  return 0;
}

static PyObject* kernel_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static char* kwlist[] = {"name", "plan", "returns", "info", "slow_path", "precheck", "delegate", "specs",
                           "validate", "contiguous_only", "warn_layout", "index_ranges", NULL};
  PyObject *name, *plan, *returns, *info, *slow;
  PyObject* delegate = Py_None;
  PyObject* specs = Py_None;
  PyObject* warn_layout = Py_None;
  PyObject* index_ranges = NULL;
  int precheck = 0, validate = 0, contiguous_only = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UOOOO|pOOppOO", kwlist, &name, &plan, &returns, &info, &slow,
                                   &precheck, &delegate, &specs, &validate, &contiguous_only, &warn_layout,
                                   &index_ranges))
    return NULL;
  PyObject* mod = PyType_GetModule(type);
  if (mod == NULL) return NULL;
  PyTypeObject* table_type = (PyTypeObject*)((etops_state*)PyModule_GetState(mod))->slow_path_type;
  if (!PyObject_TypeCheck(slow, table_type)) {
    PyErr_Format(PyExc_TypeError, "Kernel: argument 'slow_path' must be a SlowPathTable (etops.slow_path.SLOW_PATH), not %.100s",
                 Py_TYPE(slow)->tp_name);
    return NULL;
  }
  KernelObject* k = (KernelObject*)type->tp_alloc(type, 0);
  if (k == NULL) return NULL;
  k->vectorcall = kernel_vectorcall;
  k->module = Py_NewRef(mod);
  k->st = (etops_state*)PyModule_GetState(mod);
  k->py_name = Py_NewRef(name);
  const char* cname = PyUnicode_AsUTF8(name);
  if (cname == NULL || (k->op_name = PyMem_Malloc(strlen(cname) + 1)) == NULL) {
    Py_DECREF(k);
    return NULL;
  }
  strcpy(k->op_name, cname);
  k->info = Py_NewRef(info);
  k->slow = (SlowPathTable*)Py_NewRef(slow);
  k->has_precheck = precheck;
  k->validates = validate;
  k->contiguous_only = contiguous_only;
  k->warn_layout = warn_layout == Py_None ? NULL : Py_NewRef(warn_layout);
  k->validated_count = k->validated_next = 0;
  k->gen = 0;
  if (delegate != Py_None) {
    k->delegate_handle = etops_delegate_handle(k->st, delegate);
    if (k->delegate_handle == NULL) {
      Py_DECREF(k);
      return NULL;
    }
    k->delegate = Py_NewRef(delegate);
  }
  if (parse_plan(k, plan) < 0 || parse_index_ranges(k, index_ranges) < 0) {
    Py_DECREF(k);
    return NULL;
  }
  k->static_outs_allowed = k->validates; /* delegates never validate */
  for (int i = 0; i < k->nargs; i++) {
    if (k->args[i].flags & F_MUTABLE) k->static_outs_allowed = 0;
  }
  k->allocates = allocation_allowed(k);
  if (specs != Py_None && parse_specs(k, specs) < 0) {
    Py_DECREF(k);
    return NULL;
  }
  PyObject* rseq = PySequence_Fast(returns, "returns must be a sequence of ints");
  if (rseq == NULL) {
    Py_DECREF(k);
    return NULL;
  }
  k->nreturns = (int)PySequence_Fast_GET_SIZE(rseq);
  if (k->nreturns > ETOPS_MAX_ARGS) k->nreturns = ETOPS_MAX_ARGS;
  for (int i = 0; i < k->nreturns; i++) {
    long r = PyLong_AsLong(PySequence_Fast_GET_ITEM(rseq, i));
    int slots = k->nslots - k->nargs;
    if ((r == -1 && PyErr_Occurred()) || r >= k->nargs || (r < 0 && -r - 1 >= slots)) {
      Py_DECREF(rseq);
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "return index out of range");
      Py_DECREF(k);
      return NULL;
    }
    k->returns[i] = (int)r;
  }
  Py_DECREF(rseq);
  return (PyObject*)k;
}

static int kernel_traverse(KernelObject* k, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(k));
  Py_VISIT(k->module);
  Py_VISIT(k->info);
  Py_VISIT(k->slow);
  Py_VISIT(k->delegate);
  Py_VISIT(k->warn_layout);
  for (int i = 0; i < ALLOCATION_SIGNATURES; i++) Py_VISIT(k->allocated_outs[i]);
  for (int i = 0; i < k->nslots; i++) {
    Py_VISIT(k->args[i].default_value);
    Py_VISIT(k->args[i].extra);
  }
  return 0;
}

static int kernel_clear(KernelObject* k) {
  Py_CLEAR(k->info);
  Py_CLEAR(k->slow);
  Py_CLEAR(k->delegate);
  Py_CLEAR(k->warn_layout);
  k->delegate_handle = NULL;
  k->bind_valid = 0;
  Py_CLEAR(k->bind_kwnames);
  clear_allocations(k);
  memo_free(k);
  for (int i = 0; i < k->nslots; i++) {
    Py_CLEAR(k->args[i].default_value);
    Py_CLEAR(k->args[i].extra);
    Py_CLEAR(k->args[i].name);
  }
  k->nslots = k->nargs = 0;
  return 0;
}

static void kernel_dealloc(KernelObject* k) {
  PyTypeObject* tp = Py_TYPE(k);
  PyObject_GC_UnTrack(k);
  kernel_clear(k);
  Py_CLEAR(k->module);
  Py_CLEAR(k->py_name);
  PyMem_Free(k->op_name);
  PyMem_Free(k->specs);
  tp->tp_free((PyObject*)k);
  Py_DECREF(tp);
}

/* Attributes the C type does not define come from the Python info object. */
static PyObject* kernel_getattro(PyObject* self, PyObject* name) {
  PyObject* r = PyObject_GenericGetAttr(self, name);
  if (r != NULL || !PyErr_ExceptionMatches(PyExc_AttributeError)) return r;
  KernelObject* k = (KernelObject*)self;
  if (k->info == NULL) return NULL;
  PyErr_Clear();
  return PyObject_GetAttr(k->info, name);
}

static PyObject* kernel_repr(PyObject* self) {
  KernelObject* k = (KernelObject*)self;
  if (k->info == NULL) return PyUnicode_FromFormat("<etops kernel %s>", k->op_name);
  return PyObject_Repr(k->info);
}

static PyObject* kernel_dir(PyObject* self, PyObject* noargs) {
  KernelObject* k = (KernelObject*)self;
  PyObject* names = PyObject_Dir((PyObject*)Py_TYPE(self));
  if (names == NULL) return NULL;
  if (k->info != NULL) {
    PyObject* more = PyObject_Dir(k->info);
    if (more == NULL || PyList_SetSlice(names, PyList_GET_SIZE(names), PyList_GET_SIZE(names), more) < 0) {
      Py_XDECREF(more);
      Py_DECREF(names);
      return NULL;
    }
    Py_DECREF(more);
  }
  PyObject* unique = PySet_New(names);
  Py_DECREF(names);
  if (unique == NULL) return NULL;
  PyObject* sorted = PySequence_List(unique);
  Py_DECREF(unique);
  if (sorted != NULL && PyList_Sort(sorted) < 0) Py_CLEAR(sorted);
  return sorted;
}

static PyObject* kernel_registry_state(PyObject* self, PyObject* noargs) {
  KernelObject* k = (KernelObject*)self;
  uint64_t gen = etb_registry_generation();
  if (gen != k->gen) refresh_registry_view(k, gen);
  return Py_BuildValue("(Kii)", (unsigned long long)k->gen, k->has_specialized, k->fallback_fn != NULL);
}

static PyObject* kernel_memo_state(PyObject* self, PyObject* noargs) {
  return PyLong_FromLong(memo_state((KernelObject*)self));
}

static PyObject* kernel_memo_hits(PyObject* self, PyObject* noargs) {
  return PyLong_FromUnsignedLongLong(((KernelObject*)self)->memo_hits);
}

static PyMethodDef kernel_methods[] = {
    {"__dir__", kernel_dir, METH_NOARGS, NULL},
    {"_registry_state", kernel_registry_state, METH_NOARGS,
     "(generation, has specialized kernels, has a fallback) as this kernel object sees the registry."},
    {"_memo_state", kernel_memo_state, METH_NOARGS,
     "0: no call memo; 1: the last steady call remembered (kernel_memo.c); 2: with its prepared stack."},
    {"_memo_hits", kernel_memo_hits, METH_NOARGS, "How many calls of this kernel object matched its call memo."},
    {NULL, NULL, 0, NULL},
};

static PyObject* kernel_get_name(PyObject* self, void* closure) {
  return Py_NewRef(((KernelObject*)self)->py_name);
}

static PyObject* kernel_get_info(PyObject* self, void* closure) {
  KernelObject* k = (KernelObject*)self;
  return Py_NewRef(k->info ? k->info : Py_None);
}

static PyGetSetDef kernel_getset[] = {
    {"name", kernel_get_name, NULL, "The operator name, such as 'aten::add.out'.", NULL},
    {"_info", kernel_get_info, NULL, "The Python object describing this kernel.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef kernel_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(KernelObject, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot kernel_slots[] = {
    {Py_tp_new, kernel_new},
    {Py_tp_dealloc, kernel_dealloc},
    {Py_tp_traverse, kernel_traverse},
    {Py_tp_clear, kernel_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_getattro, kernel_getattro},
    {Py_tp_repr, kernel_repr},
    {Py_tp_methods, kernel_methods},
    {Py_tp_getset, kernel_getset},
    {Py_tp_members, kernel_members},
    {Py_tp_doc, "An ExecuTorch kernel as a Python callable. Build it with etops' registry, not directly."},
    {0, NULL},
};

static PyType_Spec kernel_spec = {
    .name = "etops._native._core.Kernel",
    .basicsize = sizeof(KernelObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = kernel_slots,
};

int etops_kernel_type_init(PyObject* module, etops_state* st) {
  if (check_element_sizes() < 0) return -1;
  st->kernel_type = PyType_FromModuleAndSpec(module, &kernel_spec, NULL);
  if (st->kernel_type == NULL) return -1;
  return PyModule_AddObjectRef(module, "Kernel", st->kernel_type);
}
