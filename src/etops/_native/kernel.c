/*
 * kernel.c - the Kernel object: one registered ExecuTorch operator as a Python
 * callable, with the vectorcall fast path.
 *
 * A Kernel is built once per operator from an argument plan computed in Python
 * (etops/_plan.py) from the operator's schema. A call binds positional and keyword
 * arguments to the plan, validates and converts each one into an etb_value (tensors
 * borrowed zero-copy, see tensor.c), picks the ExecuTorch function for the tensors'
 * dtypes and dim orders (cached per kernel key), runs it through the bridge and
 * returns what torch's out variant returns. Nothing on this path allocates Python
 * objects for a call with correctly sized outs.
 *
 * A Kernel built with a Delegate (delegate.c) runs that backend handle on the same
 * path instead of a registered kernel: a lowered module called like an out variant.
 *
 * Everything unusual goes to the Python "slow path" object given at construction:
 * missing outs (allocate), a failed kernel (resize outs and retry, or raise
 * KernelError), a kernel key with no kernel (raise), outs the kernel resized.
 */
#include "etops_native.h"

#include <string.h>
#include <structmember.h>

typedef struct {
  PyObject* name;     /* str, interned */
  const char* cname;  /* UTF-8 of name */
  int kind;
  int flags;
  PyObject* default_value; /* owned, or NULL */
  PyObject* extra;         /* enum map (dict) or NULL */
  Py_ssize_t fixed_len;    /* int[N]: N, else 0 */
  int alias_of;            /* return slots: the out argument it is, or -1 (fresh value) */
  int has_default_value;   /* default_converted holds the default, converted once */
  etb_value default_converted;
} ArgSpec;

#define CACHE_KEY_MAX 72
#define CACHE_ENTRIES 4

typedef struct {
  int len;
  uint8_t key[CACHE_KEY_MAX];
  etb_kernel_fn fn;
} CacheEntry;

/* What the tensor of one argument must be, checked in C on every call (a delegate's
 * input and output specs): dtype, dim order, sizes when static. A tensor that
 * differs, or an out that may overlap an input, goes to the slow path's precheck,
 * which raises the error naming the argument (or accepts an out to be resized). */
typedef struct {
  int8_t dtype; /* -1: no spec for this argument */
  uint8_t ndim;
  uint8_t check_sizes;
  int32_t sizes[ETB_MAX_DIM];
  uint8_t dim_order[ETB_MAX_DIM];
} TensorSpec;

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  etops_state* st;
  PyObject* module;
  PyObject* py_name;
  char* op_name;
  int nargs;        /* user-visible schema arguments, outs included */
  int npositional;  /* how many of them may be passed positionally */
  int nslots;       /* nargs + fresh return slots */
  int nreturns;
  int returns[ETOPS_MAX_ARGS]; /* >= 0: argument index; < 0: -(slot+1) of a return slot */
  ArgSpec args[ETOPS_MAX_ARGS];
  PyObject* info;
  PyObject* slow;
  int has_precheck; /* call slow.precheck(...) before every call (kernels that abort) */
  PyObject* delegate;  /* a Delegate (delegate.c) run instead of a registered kernel, or NULL */
  etb_delegate* delegate_handle;
  TensorSpec* specs;   /* per argument, what its tensor must be (delegates), or NULL */
  /* kernel function cache, valid for registry generation `gen` */
  uint64_t gen;
  int has_specialized;
  etb_kernel_fn fallback_fn;
  CacheEntry cache[CACHE_ENTRIES];
  int cache_next;
} KernelObject;

/* ---- scratch memory of one call: a bump arena that never moves ---------------- */

typedef struct ArenaBlock {
  struct ArenaBlock* next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} ArenaBlock;

typedef struct {
  _Alignas(16) unsigned char inline_buf[6144];
  size_t used;
  ArenaBlock* blocks;
} Arena;

static void* arena_alloc(Arena* a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (a->used + n <= sizeof(a->inline_buf)) {
    void* p = a->inline_buf + a->used;
    a->used += n;
    return p;
  }
  if (a->blocks == NULL || a->blocks->used + n > a->blocks->cap) {
    size_t cap = n > 16384 ? n : 16384;
    ArenaBlock* b = (ArenaBlock*)PyMem_Malloc(sizeof(ArenaBlock) + cap);
    if (b == NULL) {
      PyErr_NoMemory();
      return NULL;
    }
    b->next = a->blocks;
    b->used = 0;
    b->cap = cap;
    a->blocks = b;
  }
  void* p = a->blocks->data + a->blocks->used;
  a->blocks->used += n;
  return p;
}

static void arena_free(Arena* a) {
  while (a->blocks != NULL) {
    ArenaBlock* next = a->blocks->next;
    PyMem_Free(a->blocks);
    a->blocks = next;
  }
}

/* A borrowed tensor and the Python object it came from. */
typedef struct {
  etb_tensor t;
  PyObject* obj;
  int arg;
} TensorRec;

typedef struct {
  Arena arena;
  etops_keep keep;
  TensorRec** recs;
  int nrecs, caprecs;
  TensorRec* inline_recs[ETOPS_MAX_TENSORS];
  int64_t numel_total;
} CallScratch;

static TensorRec* new_rec(CallScratch* cs) {
  if (cs->nrecs == cs->caprecs) {
    int cap = cs->caprecs * 4;
    TensorRec** grown = (TensorRec**)arena_alloc(&cs->arena, sizeof(TensorRec*) * cap);
    if (grown == NULL) return NULL;
    memcpy(grown, cs->recs, sizeof(TensorRec*) * cs->nrecs);
    cs->recs = grown;
    cs->caprecs = cap;
  }
  TensorRec* r = (TensorRec*)arena_alloc(&cs->arena, sizeof(TensorRec));
  if (r == NULL) return NULL;
  cs->recs[cs->nrecs++] = r;
  return r;
}

/* ---- argument conversion ------------------------------------------------------ */

static int type_error(KernelObject* k, const ArgSpec* a, const char* expected, PyObject* got) {
  PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be %s, not %.100s", k->op_name, a->cname,
               expected, Py_TYPE(got)->tp_name);
  return -1;
}

static TensorRec* borrow(KernelObject* k, CallScratch* cs, PyObject* obj, int arg, const char* what,
                         int writable) {
  TensorRec* r = new_rec(cs);
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

/* A Python number as an ExecuTorch Scalar (Bool, Int or Double). */
static int as_scalar(KernelObject* k, const ArgSpec* a, PyObject* o, etb_value* v) {
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

static int convert_arg(KernelObject* k, CallScratch* cs, int i, PyObject* o, etb_value* v) {
  const ArgSpec* a = &k->args[i];
  v->len = 0;
  if (o == Py_None && (a->flags & F_OPTIONAL)) {
    v->tag = ETB_NONE;
    return 0;
  }
  switch (a->kind) {
    case K_TENSOR: {
      TensorRec* r = borrow(k, cs, o, i, a->cname, (a->flags & (F_OUT | F_MUTABLE)) != 0);
      if (r == NULL) return -1;
      if (a->flags & F_OUT) r->t.dynamism = ETB_DYNAMIC_BOUND;
      v->tag = ETB_TENSOR;
      v->u.t = &r->t;
      return 0;
    }
    case K_TENSOR_LIST:
    case K_OPT_TENSOR_LIST: {
      int opt = a->kind == K_OPT_TENSOR_LIST;
      PyObject* seq = as_sequence(k, cs, a, o, opt ? "a list of optional Tensors" : "a list of Tensors");
      if (seq == NULL) return -1;
      Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
      etb_tensor** items = (etb_tensor**)arena_alloc(&cs->arena, sizeof(etb_tensor*) * (n ? n : 1));
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
        TensorRec* r = borrow(k, cs, item, i, what, (a->flags & (F_OUT | F_MUTABLE)) != 0);
        if (r == NULL) return -1;
        if (a->flags & F_OUT) r->t.dynamism = ETB_DYNAMIC_BOUND;
        items[j] = &r->t;
      }
      v->tag = opt ? ETB_LIST_OPT_TENSOR : ETB_LIST_TENSOR;
      v->len = (int32_t)n;
      v->u.tensors = items;
      return 0;
    }
    case K_SCALAR:
      return as_scalar(k, a, o, v);
    case K_INT:
      v->tag = ETB_INT;
      return as_int64(k, a, o, &v->u.i);
    case K_FLOAT:
      v->tag = ETB_DOUBLE;
      return as_double(k, a, o, &v->u.d);
    case K_BOOL:
      if (!PyBool_Check(o)) return type_error(k, a, "a bool", o);
      v->tag = ETB_BOOL;
      v->u.b = o == Py_True;
      return 0;
    case K_STR: {
      if (!PyUnicode_Check(o)) return type_error(k, a, "a str", o);
      Py_ssize_t len;
      const char* s = PyUnicode_AsUTF8AndSize(o, &len);
      if (s == NULL) return -1;
      v->tag = ETB_STRING;
      v->u.s = s;
      v->len = (int32_t)len;
      return 0;
    }
    case K_INT_LIST:
    case K_FLOAT_LIST:
    case K_BOOL_LIST: {
      const char* expected = a->kind == K_INT_LIST ? "a list of ints"
                             : a->kind == K_FLOAT_LIST ? "a list of floats" : "a list of bools";
      PyObject* seq = as_sequence(k, cs, a, o, expected);
      if (seq == NULL) return -1;
      Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
      if (a->fixed_len > 0 && n != a->fixed_len && a->kind != K_INT_LIST) {
        PyErr_Format(PyExc_ValueError, "%s: argument '%s' must have %zd elements, got %zd", k->op_name,
                     a->cname, a->fixed_len, n);
        return -1;
      }
      ArgSpec item_spec = *a;
      char what[160];
      snprintf(what, sizeof what, "%s[]", a->cname);
      item_spec.cname = what;
      if (a->kind == K_INT_LIST) {
        int64_t* buf = (int64_t*)arena_alloc(&cs->arena, sizeof(int64_t) * (n ? n : 1));
        if (buf == NULL) return -1;
        for (Py_ssize_t j = 0; j < n; j++) {
          if (as_int64(k, &item_spec, PySequence_Fast_GET_ITEM(seq, j), &buf[j]) < 0) return -1;
        }
        v->tag = ETB_LIST_INT;
        v->u.ints = buf;
      } else if (a->kind == K_FLOAT_LIST) {
        double* buf = (double*)arena_alloc(&cs->arena, sizeof(double) * (n ? n : 1));
        if (buf == NULL) return -1;
        for (Py_ssize_t j = 0; j < n; j++) {
          if (as_double(k, &item_spec, PySequence_Fast_GET_ITEM(seq, j), &buf[j]) < 0) return -1;
        }
        v->tag = ETB_LIST_DOUBLE;
        v->u.doubles = buf;
      } else {
        uint8_t* buf = (uint8_t*)arena_alloc(&cs->arena, n ? n : 1);
        if (buf == NULL) return -1;
        for (Py_ssize_t j = 0; j < n; j++) {
          PyObject* item = PySequence_Fast_GET_ITEM(seq, j);
          if (!PyBool_Check(item)) return type_error(k, &item_spec, "a bool", item);
          buf[j] = item == Py_True;
        }
        v->tag = ETB_LIST_BOOL;
        v->u.bools = buf;
      }
      v->len = (int32_t)n;
      return 0;
    }
    case K_ENUM: {
      PyObject* mapped = PyDict_GetItemWithError(a->extra, o);
      if (mapped == NULL) {
        if (PyErr_Occurred()) {
          PyErr_Clear();
        }
        /* The right kind of object with a value ExecuTorch lacks is a ValueError;
           another kind of object a TypeError. */
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        int same_type = 0;
        while (PyDict_Next(a->extra, &pos, &key, &value)) same_type |= Py_TYPE(key) == Py_TYPE(o);
        PyObject* accepted = PyDict_Keys(a->extra);
        PyErr_Format(same_type ? PyExc_ValueError : PyExc_TypeError,
                     "%s: argument '%s' got %R; ExecuTorch accepts one of %R", k->op_name,
                     a->cname, o, accepted ? accepted : Py_None);
        Py_XDECREF(accepted);
        return -1;
      }
      v->tag = ETB_INT;
      v->u.i = PyLong_AsLongLong(mapped);
      return 0;
    }
    default:
      PyErr_Format(PyExc_SystemError, "%s: argument '%s' has unknown plan kind %d", k->op_name, a->cname, a->kind);
      return -1;
  }
}

/* ---- kernel selection --------------------------------------------------------- */

static void refresh_registry_view(KernelObject* k, uint64_t gen) {
  k->gen = gen;
  k->has_specialized = 0;
  k->fallback_fn = NULL;
  k->cache_next = 0;
  for (int i = 0; i < CACHE_ENTRIES; i++) k->cache[i].len = -1;
  size_t n = etb_kernel_count();
  for (size_t i = 0; i < n; i++) {
    const char *name, *key;
    etb_kernel_fn fn;
    if (etb_kernel_at(i, &name, &key, &fn) != 0 || strcmp(name, k->op_name) != 0) continue;
    if (key == NULL) {
      k->fallback_fn = fn;
    } else {
      k->has_specialized = 1;
    }
  }
}

/* The function ExecuTorch would pick for these values' tensors, or NULL (no
 * exception set) when none matches. */
static etb_kernel_fn select_kernel(KernelObject* k, const etb_value* vals) {
  uint64_t gen = etb_registry_generation();
  if (gen != k->gen) refresh_registry_view(k, gen);
  if (!k->has_specialized) return k->fallback_fn;

  int8_t dtypes[ETOPS_MAX_TENSORS];
  uint8_t ndims[ETOPS_MAX_TENSORS];
  const uint8_t* orders[ETOPS_MAX_TENSORS];
  uint8_t key[CACHE_KEY_MAX];
  int n = 0, len = 0, cacheable = 1;
  /* ExecuTorch keys on every Tensor slot of the stack, returns included (an out
     variant's return is its out tensor again). */
  for (int i = 0; i < k->nslots && n < ETOPS_MAX_TENSORS; i++) {
    const etb_value* v = vals[i].tag == ETB_ALIAS ? &vals[vals[i].u.i] : &vals[i];
    if (v->tag != ETB_TENSOR) continue;
    const etb_tensor* t = v->u.t;
    dtypes[n] = t->dtype;
    ndims[n] = t->ndim;
    orders[n] = t->dim_order;
    n++;
    if (len + 2 + t->ndim > CACHE_KEY_MAX) {
      cacheable = 0;
      continue;
    }
    key[len++] = (uint8_t)t->dtype;
    key[len++] = t->ndim;
    memcpy(key + len, t->dim_order, t->ndim);
    len += t->ndim;
  }
  if (cacheable) {
    for (int i = 0; i < CACHE_ENTRIES; i++) {
      if (k->cache[i].len == len && memcmp(k->cache[i].key, key, len) == 0) return k->cache[i].fn;
    }
  }
  etb_kernel_fn fn = NULL;
  if (etb_lookup(k->op_name, n, dtypes, ndims, orders, &fn) != 0) return NULL;
  if (cacheable) {
    CacheEntry* e = &k->cache[k->cache_next];
    k->cache_next = (k->cache_next + 1) % CACHE_ENTRIES;
    e->len = len;
    memcpy(e->key, key, len);
    e->fn = fn;
  }
  return fn;
}

/* ---- the call ----------------------------------------------------------------- */

/* args/kwargs of this call as Python objects, for the slow path. */
static int call_as_python(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** pargs,
                          PyObject** pkwargs) {
  *pargs = PyTuple_New(nargs);
  if (*pargs == NULL) return -1;
  for (Py_ssize_t i = 0; i < nargs; i++) {
    Py_INCREF(args[i]);
    PyTuple_SET_ITEM(*pargs, i, args[i]);
  }
  *pkwargs = PyDict_New();
  if (*pkwargs == NULL) {
    Py_CLEAR(*pargs);
    return -1;
  }
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; i++) {
    if (PyDict_SetItem(*pkwargs, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) {
      Py_CLEAR(*pargs);
      Py_CLEAR(*pkwargs);
      return -1;
    }
  }
  return 0;
}

static PyObject* slow_path(KernelObject* k, const char* method, PyObject* const* args, Py_ssize_t nargs,
                           PyObject* kwnames, PyObject* extra) {
  PyObject *pargs, *pkwargs;
  if (call_as_python(args, nargs, kwnames, &pargs, &pkwargs) < 0) return NULL;
  PyObject* res = PyObject_CallMethod(k->slow, method, "OOOO", (PyObject*)k, pargs, pkwargs,
                                      extra ? extra : Py_None);
  Py_DECREF(pargs);
  Py_DECREF(pkwargs);
  return res;
}

static PyObject* return_value(const etb_value* v) {
  switch (v->tag) {
    case ETB_INT: return PyLong_FromLongLong(v->u.i);
    case ETB_DOUBLE: return PyFloat_FromDouble(v->u.d);
    case ETB_BOOL: return PyBool_FromLong(v->u.b);
    default: Py_RETURN_NONE;
  }
}

static PyObject* build_result(KernelObject* k, PyObject** bound, const etb_value* vals) {
  if (k->nreturns == 0) Py_RETURN_NONE;
  if (k->nreturns == 1) {
    int r = k->returns[0];
    if (r >= 0) return Py_NewRef(bound[r]);
    return return_value(&vals[k->nargs + (-r - 1)]);
  }
  PyObject* tup = PyTuple_New(k->nreturns);
  if (tup == NULL) return NULL;
  for (int i = 0; i < k->nreturns; i++) {
    int r = k->returns[i];
    PyObject* item = r >= 0 ? Py_NewRef(bound[r]) : return_value(&vals[k->nargs + (-r - 1)]);
    if (item == NULL) {
      Py_DECREF(tup);
      return NULL;
    }
    PyTuple_SET_ITEM(tup, i, item);
  }
  return tup;
}

static int bind_arguments(KernelObject* k, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
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
  for (int i = 0; i < k->nargs; i++) bound[i] = NULL;
  for (Py_ssize_t i = 0; i < nargs; i++) bound[i] = args[i];
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
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
  }
  *missing_out = 0;
  for (int i = 0; i < k->nargs; i++) {
    const ArgSpec* a = &k->args[i];
    if (bound[i] != NULL && !(bound[i] == Py_None && (a->flags & F_OUT))) continue;
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
  return 0;
}

/* Bytes per element of an ExecuTorch ScalarType (8 for ones etops never sees). */
static size_t element_size(int8_t dtype) {
  switch (dtype) {
    case 0: case 1: case 11: case 23: case 24: case 25: case 26: return 1;
    case 2: case 5: case 15: case 27: return 2;
    case 3: case 6: case 28: return 4;
    case 10: return 16;
    default: return 8;
  }
}

/* [first, end) bytes a tensor covers. */
static void byte_range(const etb_tensor* t, uintptr_t* first, uintptr_t* end) {
  uint64_t extent = 1;
  for (int d = 0; d < t->ndim; d++) {
    if (t->sizes[d] == 0) extent = 0;
  }
  if (extent != 0) {
    for (int d = 0; d < t->ndim; d++) extent += (uint64_t)(t->sizes[d] - 1) * (uint64_t)t->strides[d];
  }
  *first = (uintptr_t)t->data;
  *end = *first + (uintptr_t)(extent * element_size(t->dtype));
}

/* 1 when every tensor matches its spec and no out may overlap an input. */
static int matches_specs(const KernelObject* k, const etb_value* vals) {
  for (int i = 0; i < k->nargs; i++) {
    const TensorSpec* s = &k->specs[i];
    if (s->dtype < 0 || vals[i].tag != ETB_TENSOR) continue;
    const etb_tensor* t = vals[i].u.t;
    if (t->dtype != s->dtype || t->ndim != s->ndim || memcmp(t->dim_order, s->dim_order, t->ndim) != 0) return 0;
    if (s->check_sizes && memcmp(t->sizes, s->sizes, sizeof(int32_t) * t->ndim) != 0) return 0;
    if (!(k->args[i].flags & F_OUT)) continue;
    uintptr_t first, end;
    byte_range(t, &first, &end);
    for (int j = 0; j < k->nargs; j++) {
      if (j == i || (k->args[j].flags & F_OUT) || vals[j].tag != ETB_TENSOR) continue;
      uintptr_t other_first, other_end;
      byte_range(vals[j].u.t, &other_first, &other_end);
      if (first < other_end && other_first < end) return 0;
    }
  }
  return 1;
}

/* Releasing the GIL costs about as much as a tiny kernel: only for big ones. */
#define GIL_RELEASE_NUMEL 32768

static PyObject* kernel_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  KernelObject* k = (KernelObject*)self;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject* bound[ETOPS_MAX_ARGS];
  int missing_out;
  if (bind_arguments(k, args, nargs, kwnames, bound, &missing_out) < 0) return NULL;
  if (k->has_precheck) {
    PyObject* ok = slow_path(k, "precheck", args, nargs, kwnames, NULL);
    if (ok == NULL) return NULL;
    Py_DECREF(ok);
  }
  CallScratch cs;
  cs.arena.used = 0;
  cs.arena.blocks = NULL;
  cs.keep.n = 0;
  cs.keep.overflow = NULL;
  cs.recs = cs.inline_recs;
  cs.nrecs = 0;
  cs.caprecs = ETOPS_MAX_TENSORS;
  cs.numel_total = 0;
  etb_value vals[ETOPS_MAX_ARGS];
  PyObject* result = NULL;

  for (int i = 0; i < k->nargs; i++) {
    const ArgSpec* a = &k->args[i];
    if (missing_out && (a->flags & F_OUT)) {
      vals[i].tag = ETB_NONE;
      continue;
    }
    if (a->has_default_value && bound[i] == a->default_value) {
      vals[i] = a->default_converted; /* scalar defaults are converted once, at plan time */
    } else if (convert_arg(k, &cs, i, bound[i], &vals[i]) < 0) {
      goto done;
    }
  }
  if (k->specs != NULL && !matches_specs(k, vals)) {
    PyObject* ok = slow_path(k, "precheck", args, nargs, kwnames, NULL); /* raises, naming the argument */
    if (ok == NULL) goto done;
    Py_DECREF(ok);
  }
  for (int i = k->nargs; i < k->nslots; i++) {
    vals[i].len = 0;
    if (k->args[i].alias_of >= 0) {
      vals[i].tag = ETB_ALIAS;
      vals[i].u.i = k->args[i].alias_of;
    } else {
      vals[i].tag = ETB_NONE;
    }
  }

  if (missing_out) {
    /* Every given argument is valid: let Python size and allocate the outs. */
    etops_keep_release(&cs.keep);
    result = slow_path(k, "allocate_and_call", args, nargs, kwnames, NULL);
    goto done;
  }

  etb_status status;
  if (k->delegate_handle != NULL) {
    /* a lowered module: its backend executes on the same stack (inputs, then outputs) */
    if (cs.numel_total >= GIL_RELEASE_NUMEL) {
      Py_BEGIN_ALLOW_THREADS
      status = etb_delegate_execute(k->delegate_handle, k->op_name, vals, k->nslots);
      Py_END_ALLOW_THREADS
    } else {
      status = etb_delegate_execute(k->delegate_handle, k->op_name, vals, k->nslots);
    }
  } else {
    etb_kernel_fn fn = select_kernel(k, vals);
    if (fn == NULL) {
      result = slow_path(k, "no_kernel", args, nargs, kwnames, NULL);
      goto done;
    }
    if (cs.numel_total >= GIL_RELEASE_NUMEL) {
      Py_BEGIN_ALLOW_THREADS
      status = etb_call(fn, k->op_name, vals, k->nslots);
      Py_END_ALLOW_THREADS
    } else {
      status = etb_call(fn, k->op_name, vals, k->nslots);
    }
  }
  if (etops_logs_pending || (status.error == 0 && etb_last_call_log()[0] != '\0')) {
    /* queued messages from other threads, and what a successful call logged */
    PyObject* r = PyObject_CallFunction(k->st->flush_logs, "Os", k->py_name,
                                        status.error == 0 ? etb_last_call_log() : "");
    if (r == NULL) goto done;
    Py_DECREF(r);
  }
  if (status.error != 0) {
    PyObject* info = Py_BuildValue("(iss)", (int)status.error, status.error_name, etb_last_call_log());
    if (info == NULL) goto done;
    etops_keep_release(&cs.keep); /* the slow path may resize what we borrowed */
    result = slow_path(k, "failed", args, nargs, kwnames, info);
    Py_DECREF(info);
    goto done;
  }
  for (int i = 0; i < cs.nrecs; i++) {
    TensorRec* r = cs.recs[i];
    if (!r->t.resized) continue;
    PyObject* sizes = etops_sizes_tuple(&r->t);
    if (sizes == NULL) goto done;
    PyObject* res = PyObject_CallMethod(k->slow, "resized", "OOOiO", (PyObject*)k, r->obj, sizes,
                                        (int)(r->t.data != NULL), k->args[r->arg].name);
    Py_DECREF(sizes);
    if (res == NULL) goto done;
    Py_DECREF(res);
  }
  result = build_result(k, bound, vals);

done:
  etops_keep_release(&cs.keep);
  arena_free(&cs.arena);
  return result;
}

/* ---- construction and Python-visible surface ------------------------------------ */

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
    if (k->args[i].kind != K_RETURN_SLOT || k->args[i].alias_of >= k->nargs) {
      PyErr_Format(PyExc_ValueError, "%s: plan entry %d must be a return slot of a known out", k->op_name, i);
      return -1;
    }
  }
  int tensors = 0;
  for (int i = 0; i < k->nargs; i++) tensors += k->args[i].kind == K_TENSOR;
  if (tensors > ETOPS_MAX_TENSORS) {
    PyErr_Format(PyExc_ValueError, "%s has too many tensor arguments", k->op_name);
    return -1;
  }
  return 0;
}

/* specs: one entry per argument, None or (et_dtype, sizes or None, dim_order). */
static int parse_specs(KernelObject* k, PyObject* specs) {
  PyObject* seq = PySequence_Fast(specs, "specs must be a sequence");
  if (seq == NULL) return -1;
  if (PySequence_Fast_GET_SIZE(seq) != k->nargs) {
    Py_DECREF(seq);
    PyErr_Format(PyExc_ValueError, "%s: specs needs one entry per argument (%d)", k->op_name, k->nargs);
    return -1;
  }
  k->specs = (TensorSpec*)PyMem_Calloc((size_t)k->nargs, sizeof(TensorSpec));
  if (k->specs == NULL) {
    Py_DECREF(seq);
    PyErr_NoMemory();
    return -1;
  }
  for (int i = 0; i < k->nargs; i++) {
    TensorSpec* s = &k->specs[i];
    s->dtype = -1;
    PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
    if (item == Py_None) continue;
    int dtype;
    PyObject *sizes, *order;
    if (!PyArg_ParseTuple(item, "iOO", &dtype, &sizes, &order)) goto fail;
    PyObject* oseq = PySequence_Fast(order, "dim order must be a sequence");
    if (oseq == NULL) goto fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(oseq);
    if (n > ETB_MAX_DIM) {
      Py_DECREF(oseq);
      PyErr_SetString(PyExc_ValueError, "spec with more than 16 dims");
      goto fail;
    }
    s->ndim = (uint8_t)n;
    for (Py_ssize_t d = 0; d < n; d++) s->dim_order[d] = (uint8_t)PyLong_AsLong(PySequence_Fast_GET_ITEM(oseq, d));
    Py_DECREF(oseq);
    if (sizes != Py_None) {
      PyObject* sseq = PySequence_Fast(sizes, "sizes must be a sequence");
      if (sseq == NULL) goto fail;
      if (PySequence_Fast_GET_SIZE(sseq) != n) {
        Py_DECREF(sseq);
        PyErr_SetString(PyExc_ValueError, "spec sizes and dim order differ in length");
        goto fail;
      }
      for (Py_ssize_t d = 0; d < n; d++) s->sizes[d] = (int32_t)PyLong_AsLong(PySequence_Fast_GET_ITEM(sseq, d));
      Py_DECREF(sseq);
      s->check_sizes = 1;
    }
    s->dtype = (int8_t)dtype;
    if (PyErr_Occurred()) goto fail;
  }
  Py_DECREF(seq);
  return 0;
fail:
  Py_DECREF(seq);
  return -1;
}

static PyObject* kernel_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static char* kwlist[] = {"name", "plan", "returns", "info", "slow_path", "precheck", "delegate", "specs", NULL};
  PyObject *name, *plan, *returns, *info, *slow;
  PyObject* delegate = Py_None;
  PyObject* specs = Py_None;
  int precheck = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UOOOO|pOO", kwlist, &name, &plan, &returns, &info, &slow,
                                   &precheck, &delegate, &specs))
    return NULL;
  KernelObject* k = (KernelObject*)type->tp_alloc(type, 0);
  if (k == NULL) return NULL;
  k->vectorcall = kernel_vectorcall;
  PyObject* mod = PyType_GetModule(type);
  if (mod == NULL) {
    Py_DECREF(k);
    return NULL;
  }
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
  k->slow = Py_NewRef(slow);
  k->has_precheck = precheck;
  k->gen = 0;
  if (delegate != Py_None) {
    k->delegate_handle = etops_delegate_handle(k->st, delegate);
    if (k->delegate_handle == NULL) {
      Py_DECREF(k);
      return NULL;
    }
    k->delegate = Py_NewRef(delegate);
  }
  if (parse_plan(k, plan) < 0) {
    Py_DECREF(k);
    return NULL;
  }
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
  k->delegate_handle = NULL;
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

static PyMethodDef kernel_methods[] = {
    {"__dir__", kernel_dir, METH_NOARGS, NULL},
    {"_registry_state", kernel_registry_state, METH_NOARGS,
     "(generation, has specialized kernels, has a fallback) as this kernel object sees the registry."},
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
  st->kernel_type = PyType_FromModuleAndSpec(module, &kernel_spec, NULL);
  if (st->kernel_type == NULL) return -1;
  return PyModule_AddObjectRef(module, "Kernel", st->kernel_type);
}
