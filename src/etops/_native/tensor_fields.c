/*
 * tensor_fields.c - finds where torch keeps a tensor's lazy bits, inference-ness and
 * version counter (tensor_fields.h reads them on every call), and torch's own Python
 * getters for when it cannot.
 *
 * Found at import (etops/__init__.py gives the samples) from what torch says of its
 * tensors: the TensorImpl pointer is the word of the Python object equal to `_cdata`;
 * the dispatch key set is the one word of the TensorImpl where each tensor and its
 * negative view differ by one bit, each complex tensor and its conjugate by another,
 * and plain tensors have neither; the bits every plain tensor has and no inference
 * tensor has tell an inference tensor; the version counter is the one word equal in a
 * tensor and its views, distinct between unrelated tensors, NULL in inference tensors
 * only; its 32-bit version is the one torch's `_version` reads. Then every answer is
 * checked against torch's getters on other tensors (views, subclasses, grad leaves,
 * each dtype), and a bump through the counter must show in `_version`. Anything
 * that does not fit exactly once turns the fields off. Only words at offsets found
 * this way are ever dereferenced.
 */
#include "tensor_fields.h"

#include <dlfcn.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

etops_tensor_fields_t etops_tensor_fields;

#define MAX_IMPL 64       /* bytes of the Python object searched for the TensorImpl (and within its type's size) */
#define MAX_TENSORIMPL 512 /* bytes of the TensorImpl searched for its fields, and within its allocation */
#define GUESS_TENSORIMPL 160 /* without malloc_usable_size: bytes every TensorImpl has */

/* The bytes of the TensorImpls searched: within every sample's allocation (never a
 * read past one: the heap may end there). */
static Py_ssize_t impl_bytes;

/* torch's getters, for when the fields are off, and inference mode's state */
static PyObject* str_is_neg;
static PyObject* str_is_conj;
static PyObject* str_is_inference;
static PyObject* increment_version; /* torch.autograd.graph.increment_version */
static PyObject* inference_mode_enabled; /* torch.is_inference_mode_enabled */
static _Bool (*c10_inference_mode)(void); /* c10::InferenceMode::is_enabled, if exported */

/* torch's boolean getter `name` of `obj`: 1, 0, -1 with an exception. */
static int ask_torch(PyObject* obj, PyObject* name) {
  PyObject* res = PyObject_VectorcallMethod(name, &obj, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
  if (res == NULL) return -1;
  int yes = PyObject_IsTrue(res);
  Py_DECREF(res);
  return yes;
}

int etops_tensor_lazy_slow(PyObject* obj) {
  int neg = ask_torch(obj, str_is_neg);
  return neg != 0 ? neg : ask_torch(obj, str_is_conj);
}

int etops_bump_version_slow(PyObject* obj) {
  PyObject* res = PyObject_CallOneArg(increment_version, obj);
  if (res == NULL) return -1;
  Py_DECREF(res);
  return 0;
}

static int inference_mode_on(void) {
  if (c10_inference_mode != NULL) return c10_inference_mode() ? 1 : 0;
  PyObject* res = PyObject_CallNoArgs(inference_mode_enabled);
  if (res == NULL) return -1;
  int on = PyObject_IsTrue(res);
  Py_DECREF(res);
  return on;
}

int etops_inference_write_refused(PyObject* obj) {
  int inference = etops_tensor_fields.ok ? (etops_tensor_keys(obj) & etops_tensor_fields.grad_keys) == 0
                                         : ask_torch(obj, str_is_inference);
  if (inference <= 0) return inference;
  int mode = inference_mode_on();
  return mode < 0 ? -1 : !mode;
}

int etops_refuse_inference_write(const char* op, const char* what) {
  PyErr_Format(PyExc_ValueError,
               "%s: argument '%s' is an inference tensor (made under torch.inference_mode()) and the kernel writes "
               "it outside inference mode; torch refuses this too (Inplace update to inference tensor outside "
               "InferenceMode is not allowed): call under torch.inference_mode(), or pass a clone made outside it",
               op, what);
  return -1;
}

/* ---- calibration ------------------------------------------------------------ */

static uintptr_t impl_of(PyObject* t) {
  PyObject* cdata = PyObject_GetAttrString(t, "_cdata");
  if (cdata == NULL) return 0;
  uintptr_t impl = (uintptr_t)PyLong_AsUnsignedLongLong(cdata);
  Py_DECREF(cdata);
  return PyErr_Occurred() ? 0 : impl;
}

static long version_of(PyObject* t) {
  PyObject* v = PyObject_GetAttrString(t, "_version");
  if (v == NULL) return -1;
  long n = PyLong_AsLong(v);
  Py_DECREF(v);
  return n;
}

/* The TensorImpl of sample `t` at the found offset. */
static const void* impl(PyObject* t) { return (const void*)etops_word_at(t, etops_tensor_fields.impl_at); }

static uint64_t keys_at(PyObject* t, Py_ssize_t off) { return (uint64_t)etops_word_at(impl(t), off); }

static int one_bit(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* The list `name` of the samples dict (borrowed), or NULL with a TypeError. */
static PyObject* sample_list(PyObject* samples, const char* name) {
  PyObject* list = PyDict_GetItemString(samples, name);
  if (list == NULL || !PyList_Check(list)) {
    PyErr_Format(PyExc_TypeError, "calibrate_tensor_fields: samples['%s'] must be a list", name);
    return NULL;
  }
  return list;
}

#define EACH(list, i, t) \
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list) && ((t) = PyList_GET_ITEM(list, i), 1); i++)

/* The offset of the TensorImpl pointer in every sample of `lists`: 1 found, 0 not
 * (or not unique), -1 error. */
static int find_impl(PyObject* all) {
  Py_ssize_t found = -1, limit = MAX_IMPL;
  PyObject* t;
  EACH(all, i, t) {
    if (Py_TYPE(t)->tp_basicsize < limit) limit = Py_TYPE(t)->tp_basicsize;
  }
  for (Py_ssize_t off = sizeof(PyObject); off + (Py_ssize_t)sizeof(uintptr_t) <= limit; off += sizeof(uintptr_t)) {
    int fits = 1;
    EACH(all, i, t) {
      uintptr_t want = impl_of(t);
      if (want == 0) return -1;
      if (etops_word_at(t, off) != want) {
        fits = 0;
        break;
      }
    }
    if (fits && found >= 0) return 0;
    if (fits) found = off;
  }
  etops_tensor_fields.impl_at = found;
  if (found < 0) return 0;
  impl_bytes = MAX_TENSORIMPL;
  EACH(all, i, t) {
#if defined(__GLIBC__)
    Py_ssize_t usable = (Py_ssize_t)malloc_usable_size((void*)impl(t));
#else
    Py_ssize_t usable = GUESS_TENSORIMPL;
#endif
    if (usable < impl_bytes) impl_bytes = usable & ~(Py_ssize_t)7;
  }
  return 1;
}

/* The key set's offset and bits: exactly one word fits. 1, 0. */
static int find_keys(PyObject* plain, PyObject* negs, PyObject* conjs, PyObject* inference) {
  Py_ssize_t found = -1;
  uint64_t lazy = 0, grad = 0;
  for (Py_ssize_t off = sizeof(uintptr_t); off + 8 <= impl_bytes; off += 8) {
    uint64_t neg_bit = 0, conj_bit = 0, every_plain = ~(uint64_t)0, any_inference = 0;
    int fits = 1;
    PyObject* pair;
    EACH(negs, i, pair) {
      uint64_t d = keys_at(PyTuple_GET_ITEM(pair, 0), off) ^ keys_at(PyTuple_GET_ITEM(pair, 1), off);
      if (!one_bit(d) || (neg_bit != 0 && d != neg_bit)) fits = 0;
      neg_bit = d;
    }
    EACH(conjs, i, pair) {
      uint64_t d = keys_at(PyTuple_GET_ITEM(pair, 0), off) ^ keys_at(PyTuple_GET_ITEM(pair, 1), off);
      if (!one_bit(d) || (conj_bit != 0 && d != conj_bit)) fits = 0;
      conj_bit = d;
    }
    if (!fits || neg_bit == 0 || conj_bit == 0 || neg_bit == conj_bit) continue;
    PyObject* t;
    EACH(plain, i, t) {
      uint64_t k = keys_at(t, off);
      if (k & (neg_bit | conj_bit)) fits = 0;
      every_plain &= k;
    }
    EACH(inference, i, t) any_inference |= keys_at(t, off);
    uint64_t grad_bits = every_plain & ~any_inference;
    if (!fits || grad_bits == 0) continue;
    if (found >= 0) return 0;
    found = off;
    lazy = neg_bit | conj_bit;
    grad = grad_bits;
  }
  if (found < 0) return 0;
  etops_tensor_fields.keys_at = found;
  etops_tensor_fields.lazy_keys = lazy;
  etops_tensor_fields.grad_keys = grad;
  return 1;
}

/* The version counter's offset (pointer compares only), then its version's (the one
 * pointer found dereferenced). 1, 0, -1. */
static int find_counter(PyObject* plain, PyObject* views, PyObject* inference) {
  Py_ssize_t found = -1;
  for (Py_ssize_t off = sizeof(uintptr_t); off + 8 <= impl_bytes; off += 8) {
    int fits = 1;
    PyObject *t, *u, *pair;
    EACH(inference, i, t) fits &= etops_word_at(impl(t), off) == 0;
    EACH(plain, i, t) {
      uintptr_t w = etops_word_at(impl(t), off);
      fits &= w != 0 && (w & 7) == 0;
      EACH(plain, j, u) fits &= j == i || etops_word_at(impl(u), off) != w;
    }
    EACH(views, i, pair) {
      fits &= etops_word_at(impl(PyTuple_GET_ITEM(pair, 0)), off) == etops_word_at(impl(PyTuple_GET_ITEM(pair, 1)), off);
    }
    if (!fits) continue;
    if (found >= 0) return 0;
    found = off;
  }
  if (found < 0) return 0;
  etops_tensor_fields.counter_at = found;
  Py_ssize_t version = -1;
  Py_ssize_t counter_bytes = 28; /* the search's end, within every counter's allocation */
#if defined(__GLIBC__)
  PyObject* t;
  EACH(plain, i, t) {
    Py_ssize_t usable = (Py_ssize_t)malloc_usable_size((void*)etops_word_at(impl(t), found));
    if (usable < counter_bytes) counter_bytes = usable;
  }
#endif
  for (Py_ssize_t at = 8; at + 4 <= counter_bytes; at += 4) { /* past the counter's own reference count */
    int fits = 1;
    PyObject* t;
    EACH(plain, i, t) {
      long want = version_of(t);
      if (want < 0) return -1;
      uint32_t got;
      memcpy(&got, (const char*)etops_word_at(impl(t), found) + at, sizeof got);
      fits &= got == (uint32_t)want;
    }
    if (fits && version >= 0) return 0;
    if (fits) version = at;
  }
  etops_tensor_fields.version_at = version;
  return version >= 0;
}

/* Every answer of the fields on `t` is torch's: 1, 0, -1. */
static int agrees_with_torch(PyObject* t) {
  int neg = ask_torch(t, str_is_neg), conj = ask_torch(t, str_is_conj), inf = ask_torch(t, str_is_inference);
  if (neg < 0 || conj < 0 || inf < 0) return -1;
  uint64_t k = etops_tensor_keys(t);
  if (((k & etops_tensor_fields.lazy_keys) != 0) != (neg || conj)) return 0;
  if (((k & etops_tensor_fields.grad_keys) == 0) != inf) return 0;
  const char* counter = (const char*)etops_word_at(impl(t), etops_tensor_fields.counter_at);
  if ((counter == NULL) != inf) return 0;
  if (counter == NULL) return 1;
  long want = version_of(t);
  if (want < 0) return -1;
  uint32_t got;
  memcpy(&got, counter + etops_tensor_fields.version_at, sizeof got);
  return got == (uint32_t)want;
}

int etops_calibrate_tensor_fields(etops_state* st, PyObject* samples) {
  etops_tensor_fields.ok = 0;
  if (!PyDict_Check(samples)) return PyErr_SetString(PyExc_TypeError, "calibrate_tensor_fields: a dict"), -1;
  if (str_is_neg == NULL) {
    str_is_neg = PyUnicode_InternFromString("is_neg");
    str_is_conj = PyUnicode_InternFromString("is_conj");
    str_is_inference = PyUnicode_InternFromString("is_inference");
    if (str_is_neg == NULL || str_is_conj == NULL || str_is_inference == NULL) return -1;
  }
  PyObject* bump = PyDict_GetItemString(samples, "increment_version");
  PyObject* mode = PyDict_GetItemString(samples, "is_inference_mode_enabled");
  if (bump == NULL || mode == NULL) {
    PyErr_SetString(PyExc_TypeError, "calibrate_tensor_fields: increment_version and is_inference_mode_enabled needed");
    return -1;
  }
  Py_XSETREF(increment_version, Py_NewRef(bump));
  Py_XSETREF(inference_mode_enabled, Py_NewRef(mode));
  void* c10 = dlopen("libc10.so", RTLD_LAZY | RTLD_NOLOAD);
  c10_inference_mode = c10 != NULL ? (_Bool(*)(void))dlsym(c10, "_ZN3c1013InferenceMode10is_enabledEv") : NULL;
  if (c10 != NULL) dlclose(c10); /* torch keeps it loaded */
  PyObject *plain, *negs, *conjs, *inference, *views, *check, *fresh;
  if ((plain = sample_list(samples, "plain")) == NULL || (negs = sample_list(samples, "neg")) == NULL ||
      (conjs = sample_list(samples, "conj")) == NULL || (inference = sample_list(samples, "inference")) == NULL ||
      (views = sample_list(samples, "views")) == NULL || (check = sample_list(samples, "check")) == NULL ||
      (fresh = PyDict_GetItemString(samples, "fresh")) == NULL)
    return PyErr_Occurred() ? -1 : (PyErr_SetString(PyExc_TypeError, "calibrate_tensor_fields: samples['fresh']"), -1);
  /* every tensor given, for the TensorImpl's place (exact torch.Tensors and subclasses) */
  PyObject* all = PySequence_List(plain);
  if (all == NULL) return -1;
  int rc = 0;
  PyObject* pair;
  PyObject* lists[] = {negs, conjs, views};
  for (int l = 0; l < 3 && rc == 0; l++) {
    EACH(lists[l], i, pair) {
      if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || PyList_Append(all, PyTuple_GET_ITEM(pair, 0)) < 0 ||
          PyList_Append(all, PyTuple_GET_ITEM(pair, 1)) < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "calibrate_tensor_fields: pairs of tensors");
        rc = -1;
        break;
      }
    }
  }
  if (rc == 0 && (PyList_SetSlice(all, PyList_GET_SIZE(all), PyList_GET_SIZE(all), inference) < 0 ||
                  PyList_SetSlice(all, PyList_GET_SIZE(all), PyList_GET_SIZE(all), check) < 0 ||
                  PyList_Append(all, fresh) < 0))
    rc = -1;
  if (rc == 0) rc = find_impl(all);
  if (rc == 1) rc = find_keys(plain, negs, conjs, inference);
  if (rc == 1) rc = find_counter(plain, views, inference);
  PyObject* t;
  if (rc == 1) {
    EACH(all, i, t) {
      if ((rc = agrees_with_torch(t)) != 1) break;
    }
  }
  if (rc == 1) { /* a bump through the counter is one torch sees */
    long before = version_of(fresh);
    etops_tensor_fields.ok = 1;
    int known;
    etops_bump(etops_tensor_version(fresh, &known));
    long after = version_of(fresh);
    rc = before >= 0 && after >= 0 ? after == before + 1 : -1;
  }
  Py_DECREF(all);
  etops_tensor_fields.ok = rc == 1;
  (void)st;
  return rc;
}
