/*
 * kernel_checks.c - what torch refuses of a call with outs that depends on the
 * tensor objects themselves, not on the argument signature torch's checks are
 * remembered by (kernel_call.c's validate_once), so it is checked on every call,
 * once the arguments are borrowed and before the kernel runs:
 *
 *   - a tensor that requires grad while grad mode is on (torch: "functions with
 *     out=... arguments don't support automatic differentiation"). Only floating
 *     point and complex tensors can require grad; a tensor without autograd state
 *     cannot (the grad probe below, two loads); for the others grad mode is asked,
 *     then torch's own getter.
 *   - a written tensor (an out or a mutable argument) sharing memory with another
 *     tensor of the call, list items included. Each written tensor's byte range as
 *     the caller gave it (before any copy) is compared with every other one's: two
 *     compares when they do not meet. Ranges that meet go to the slow path's
 *     `overlaps` (etops/overlaps.py), which decides as torch does (a partial
 *     overlap is refused, a full alias of an out and an input allowed where torch's
 *     out= allows it for the operator, two written tensors in one memory refused),
 *     unless both tensors are given as they are with the same bytes, sizes and
 *     strides (a full alias) and the kernel remembers that the slow path allowed
 *     that pair of arguments. A full alias of a kernel that is not pointwise (flip,
 *     roll, tril read elements they already wrote) gets the input from a snapshot
 *     (the slow path's `snapshot`, a copy in the same layout), as torch's out=
 *     computes it correctly; a pointwise kernel computes in place.
 *   - a written torch tensor that is an inference tensor while inference mode is
 *     off (torch: "Inplace update to inference tensor outside InferenceMode is not
 *     allowed"), from its version counter (none: an inference tensor) and key set
 *     (tensor_fields.h).
 *
 * After the call, bump_written_versions bumps each written tensor's version
 * counter, as torch does: autograd then refuses a backward over overwritten data.
 */
#include "kernel_internal.h"
#include "tensor_fields.h"

#include <string.h>

/* Whether a tensor of this dtype can require grad (floating point and complex). */
static inline int may_require_grad(int8_t dtype) {
  return (dtype >= ETB_DTYPE_HALF && dtype <= ETB_DTYPE_COMPLEX_DOUBLE) || dtype == ETB_DTYPE_BFLOAT16;
}

/* The name of rec i in messages: its argument, or 'name[j]' for a list item (its
 * index in the caller's list, found by identity; the error path only). */
static void rec_label(const KernelObject* k, const CallScratch* cs, int i, PyObject* const* bound, char* buf,
                      size_t size) {
  const TensorRec* r = cs->recs[i];
  int kind = k->args[r->arg].kind;
  Py_ssize_t index = -1;
  if (kind == K_TENSOR_LIST || kind == K_OPT_TENSOR_LIST) {
    PyObject* seq = PySequence_Fast(bound[r->arg], "");
    if (seq == NULL) PyErr_Clear();
    for (Py_ssize_t j = 0; seq != NULL && j < PySequence_Fast_GET_SIZE(seq); j++) {
      if (PySequence_Fast_GET_ITEM(seq, j) == r->given) {
        index = j;
        break;
      }
    }
    Py_XDECREF(seq);
  }
  if (index < 0) snprintf(buf, size, "%s", k->args[r->arg].cname);
  else snprintf(buf, size, "%s[%zd]", k->args[r->arg].cname, index);
}

/* Whether grad mode is on for this thread (-1: error). */
static inline int grad_mode(const etops_state* st) {
  if (st->grad_mode_enabled != NULL) return st->grad_mode_enabled() ? 1 : 0;
  PyObject* enabled = PyObject_CallNoArgs(st->is_grad_enabled);
  if (enabled == NULL) return -1;
  int on = PyObject_IsTrue(enabled);
  Py_DECREF(enabled);
  return on;
}

/* torch refuses writing outs while an argument requires grad with grad mode on. */
static Py_NO_INLINE int refuse_requires_grad(KernelObject* k, const CallScratch* cs, int i, PyObject* const* bound) {
  char label[160];
  rec_label(k, cs, i, bound, label, sizeof label);
  PyErr_Format(PyExc_ValueError,
               "%s: argument '%s' requires grad; functions with out=... arguments don't support automatic "
               "differentiation, but one of the arguments requires grad (torch refuses this call too), and "
               "ExecuTorch kernels compute no gradients: call under torch.no_grad() or pass '%s'.detach()",
               k->op_name, label, label);
  return -1;
}

/* ---- the grad probe ------------------------------------------------------------
 * torch's requires_grad getter costs about 40 ns a tensor, more than the rest of a
 * small call. A tensor that never required grad, has no grad_fn and is no view has
 * no autograd state at all: torch keeps that state behind one pointer of its
 * TensorImpl, NULL for such a tensor. Where the TensorImpl and that pointer are is
 * not public, so it is found at import (etops_calibrate_grad_probe) from tensors
 * torch itself says have and lack autograd state, and used only when exactly one
 * layout fits every sample (else torch's getter answers every time). The probe only
 * ever says "no autograd state": any other tensor goes to grad mode and the getter. */

#define PROBE_MAX_IMPL 64  /* at most these bytes of the Python object searched for the TensorImpl */
#define PROBE_MAX_META 128 /* bytes of the TensorImpl searched for the autograd pointer */

static inline uintptr_t word_at(const void* base, Py_ssize_t offset) {
  uintptr_t w;
  memcpy(&w, (const char*)base + offset, sizeof w);
  return w;
}

/* The TensorImpl address torch gives for `obj` (its _cdata), or 0 with an error. */
static uintptr_t impl_of(PyObject* obj) {
  PyObject* cdata = PyObject_GetAttrString(obj, "_cdata");
  if (cdata == NULL) return 0;
  uintptr_t impl = (uintptr_t)PyLong_AsUnsignedLongLong(cdata);
  Py_DECREF(cdata);
  return PyErr_Occurred() ? 0 : impl;
}

int etops_calibrate_grad_probe(etops_state* st, PyObject* plain, PyObject* grad) {
  st->grad_probe_ok = 0;
  PyObject* samples[2] = {plain, grad};
  Py_ssize_t impl_at = -1, meta_at = -1;
  /* within the object: torch.Tensor's instances are tp_basicsize bytes */
  Py_ssize_t impl_limit = ((PyTypeObject*)st->torch_tensor_type)->tp_basicsize;
  if (impl_limit > PROBE_MAX_IMPL) impl_limit = PROBE_MAX_IMPL;
  for (Py_ssize_t off = sizeof(PyObject); off + (Py_ssize_t)sizeof(uintptr_t) <= impl_limit; off += sizeof(uintptr_t)) {
    int fits = 1;
    for (int g = 0; g < 2 && fits; g++) {
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(samples[g]) && fits; i++) {
        PyObject* t = PyList_GET_ITEM(samples[g], i);
        if (Py_TYPE(t) != (PyTypeObject*)st->torch_tensor_type) return 0;
        uintptr_t impl = impl_of(t);
        if (impl == 0) return -1;
        fits = word_at(t, off) == impl;
      }
    }
    if (fits && impl_at >= 0) return 0; /* two places fit: not sure which it is */
    if (fits) impl_at = off;
  }
  if (impl_at < 0) return 0;
  for (Py_ssize_t off = sizeof(uintptr_t); off + (Py_ssize_t)sizeof(uintptr_t) <= PROBE_MAX_META; off += sizeof(uintptr_t)) {
    int fits = 1;
    for (int g = 0; g < 2 && fits; g++) {
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(samples[g]) && fits; i++) {
        const void* impl = (const void*)word_at(PyList_GET_ITEM(samples[g], i), impl_at);
        fits = (word_at(impl, off) == 0) == (g == 0);
      }
    }
    if (fits && meta_at >= 0) return 0;
    if (fits) meta_at = off;
  }
  if (meta_at < 0) return 0;
  st->grad_probe_impl = impl_at;
  st->grad_probe_meta = meta_at;
  st->grad_probe_ok = 1;
  return 1;
}

/* Whether every out of the call is one etops allocated for it (the slow path's
 * `outs_allocated`: a call without out=, etops.edge's ops), -1 on error. */
static int outs_allocated_by_etops(KernelObject* k, PyObject* const* bound) {
  PyObject* res = slow_call(k, SLOW_OUTS_ALLOCATED, bound, NULL);
  if (res == NULL) return -1;
  int yes = PyObject_IsTrue(res);
  Py_DECREF(res);
  return yes;
}

/* From recs[first] on (the first tensor the probe could not clear): -1 with the
 * error when grad mode is on and one of them requires grad (torch's getter says),
 * else 0. Out of line: a call of plain tensors never gets here. */
static Py_NO_INLINE int ask_torch_about_grad(KernelObject* k, const CallScratch* cs, PyObject* const* bound,
                                             int first) {
  const etops_state* st = k->st;
  int mode = grad_mode(st);
  if (mode <= 0) return mode;
  PyTypeObject* tensor_type = (PyTypeObject*)st->torch_tensor_type;
  for (int i = first; i < cs->nrecs; i++) {
    const TensorRec* r = cs->recs[i];
    PyTypeObject* tp = Py_TYPE(r->given);
    if (!may_require_grad(r->t.dtype) || (tp != tensor_type && !PyType_IsSubtype(tp, tensor_type))) continue;
    PyObject* flag = st->requires_grad_get(r->given, st->requires_grad_closure);
    if (flag == NULL) return -1;
    Py_DECREF(flag);
    if (flag == Py_True) {
      /* torch refuses out= calls; outs etops allocated itself (a call without out=,
       * etops.edge's ops) are a functional call, whose result just has no grad_fn */
      int allocated = outs_allocated_by_etops(k, bound);
      return allocated != 0 ? (allocated < 0 ? -1 : 0) : refuse_requires_grad(k, cs, i, bound);
    }
  }
  return 0;
}

/* -1 (exception set) when grad mode is on and a tensor of the call requires grad,
 * else 0. Each floating point or complex torch tensor: the grad probe (no autograd
 * state: it cannot), and for the others (a tensor with autograd state, a view, a
 * subclass) grad mode (one read of torch's thread-local state) and torch's own
 * getter. */
static inline int check_grad(KernelObject* k, const CallScratch* cs, PyObject* const* bound) {
  const etops_state* st = k->st;
  if (st->requires_grad_get == NULL) return 0;
  PyTypeObject* tensor_type = (PyTypeObject*)st->torch_tensor_type;
  const int probe = st->grad_probe_ok;
  const Py_ssize_t at_impl = st->grad_probe_impl, at_meta = st->grad_probe_meta;
  for (int i = 0; i < cs->nrecs; i++) {
    const TensorRec* r = cs->recs[i];
    if (!may_require_grad(r->t.dtype)) continue;
    PyObject* obj = r->given;
    if (Py_TYPE(obj) == tensor_type) {
      if (probe && word_at((const void*)word_at(obj, at_impl), at_meta) == 0) continue;
    } else if (!PyType_IsSubtype(Py_TYPE(obj), tensor_type)) {
      continue;
    }
    return ask_torch_about_grad(k, cs, bound, i);
  }
  return 0;
}

/* Both given as they are, over the same bytes with the same sizes and strides. */
static inline int same_layout(const TensorRec* a, const TensorRec* b) {
  if (!a->as_given || !b->as_given || a->span.first != b->span.first || a->span.end != b->span.end ||
      a->t.ndim != b->t.ndim)
    return 0;
  for (int d = 0; d < a->t.ndim; d++) {
    if (a->t.sizes[d] != b->t.sizes[d] || a->t.strides[d] != b->t.strides[d]) return 0;
  }
  return 1;
}

enum { ALIAS_UNKNOWN = 0, ALIAS_IN_PLACE, ALIAS_SNAPSHOT };

/* How the kernel remembers the slow path allowed this full alias: ALIAS_IN_PLACE,
 * ALIAS_SNAPSHOT (the input read from a copy), or ALIAS_UNKNOWN. */
static int full_alias_allowed(const KernelObject* k, int written, int other) {
  for (int n = 0; n < k->full_alias_count; n++) {
    if (k->full_alias[n][0] == written && k->full_alias[n][1] == other)
      return k->full_alias[n][2] ? ALIAS_SNAPSHOT : ALIAS_IN_PLACE;
  }
  return ALIAS_UNKNOWN;
}

/* Remembers the (written, other, snapshot) argument triples the slow path returned
 * as full aliases torch allows (a tuple of int triples; anything else: nothing). */
static void remember_full_aliases(KernelObject* k, PyObject* pairs) {
  if (!PyTuple_Check(pairs)) return;
  for (Py_ssize_t n = 0; n < PyTuple_GET_SIZE(pairs); n++) {
    PyObject* pair = PyTuple_GET_ITEM(pairs, n);
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 3) continue;
    long written = PyLong_AsLong(PyTuple_GET_ITEM(pair, 0));
    long other = PyLong_AsLong(PyTuple_GET_ITEM(pair, 1));
    int snapshot = PyObject_IsTrue(PyTuple_GET_ITEM(pair, 2));
    if (PyErr_Occurred() || snapshot < 0) {
      PyErr_Clear();
      continue;
    }
    if (written < 0 || written >= k->nargs || other < 0 || other >= k->nargs ||
        full_alias_allowed(k, (int)written, (int)other) != ALIAS_UNKNOWN)
      continue;
    k->full_alias[k->full_alias_next][0] = (int8_t)written;
    k->full_alias[k->full_alias_next][1] = (int8_t)other;
    k->full_alias[k->full_alias_next][2] = (int8_t)snapshot;
    k->full_alias_next = (k->full_alias_next + 1) % FULL_ALIAS_PAIRS;
    if (k->full_alias_count < FULL_ALIAS_PAIRS) k->full_alias_count++;
  }
}

/* The slow path's exact decision on tensors whose memory meets: raises what torch
 * refuses, else returns the full aliases to remember. */
static Py_NO_INLINE int decide_overlaps(KernelObject* k, PyObject* const* bound) {
  PyObject* flags = PyTuple_New(k->nargs); /* what the slow path must know: outs and mutable arguments */
  for (int i = 0; flags != NULL && i < k->nargs; i++) {
    PyObject* flag = PyLong_FromLong(k->args[i].flags);
    if (flag == NULL) Py_CLEAR(flags); /* the error is set: no call below */
    else PyTuple_SET_ITEM(flags, i, flag);
  }
  PyObject* res = flags != NULL ? slow_call(k, SLOW_OVERLAPS, bound, flags) : NULL;
  Py_XDECREF(flags);
  if (res == NULL) return -1;
  remember_full_aliases(k, res);
  Py_DECREF(res);
  return 0;
}

/* Whether `obj` is a torch.Tensor (exact type first: the common case). */
static inline int is_torch_tensor(const etops_state* st, PyObject* obj) {
  PyTypeObject* tensor_type = (PyTypeObject*)st->torch_tensor_type;
  return Py_TYPE(obj) == tensor_type || PyType_IsSubtype(Py_TYPE(obj), tensor_type);
}

/* Input rec `o` is the memory an out of a kernel that is not pointwise writes: the
 * kernel reads it from a snapshot instead (the slow path's `snapshot`: a copy in
 * the same layout, kept alive by the call). Out of line: aliasing calls only. */
static Py_NO_INLINE int read_from_snapshot(KernelObject* k, CallScratch* cs, TensorRec* o) {
  PyObject* copy = slow_call_args(k, SLOW_SNAPSHOT, &o->given, 1);
  if (copy == NULL || etops_keep_add(&cs->keep, copy) < 0) return -1;
  DLTensor dl;
  if (k->st->torch_api->dltensor_from_py_object_no_sync(copy, &dl) != 0) return -1;
  o->t.data = (char*)dl.data + dl.byte_offset;
  o->obj = copy;
  cs->ncopies++;
  return 0;
}

/* An inference tensor written outside inference mode: refused, naming it. */
static Py_NO_INLINE int check_inference_write(KernelObject* k, const CallScratch* cs, int i, PyObject* const* bound) {
  int refused = etops_inference_write_refused(cs->recs[i]->given);
  if (refused <= 0) return refused;
  char label[160];
  rec_label(k, cs, i, bound, label, sizeof label);
  return etops_refuse_inference_write(k->op_name, label);
}

int check_written_tensors(KernelObject* k, CallScratch* cs, PyObject* const* bound, int outs_allocated) {
  int writes = 0, decided = 0;
  for (int i = 0; i < cs->nrecs; i++) {
    const TensorRec* w = cs->recs[i];
    if (!w->written) continue;
    writes = 1;
    if (!outs_allocated && is_torch_tensor(k->st, w->given)) {
      int known;
      uint32_t* version = etops_tensor_version(w->given, &known);
      if (version != NULL && cs->nversions < ETOPS_MAX_TENSORS) {
        cs->versions[cs->nversions++] = version; /* the common case: bumped after the call */
      } else {
        cs->bump_by_object |= version != NULL || !known;
        if (version == NULL && check_inference_write(k, cs, i, bound) < 0) return -1;
      }
    }
    if (w->span.first == w->span.end) continue;
    for (int j = 0; j < cs->nrecs; j++) {
      TensorRec* o = cs->recs[j];
      if (j == i || o->span.first >= w->span.end || w->span.first >= o->span.end) continue;
      int other_written = o->written;
      if (other_written && j < i) continue; /* decided from o's side */
      if (!other_written && same_layout(w, o)) {
        int how = full_alias_allowed(k, w->arg, o->arg);
        if (how == ALIAS_IN_PLACE) continue;
        if (how == ALIAS_SNAPSHOT) {
          if (read_from_snapshot(k, cs, o) < 0) return -1;
          continue;
        }
      }
      if (decided) continue; /* the slow path looked at every pair: what it let through goes on */
      if (decide_overlaps(k, bound) < 0) return -1;
      decided = 1;
      j--; /* this pair again, with what the slow path remembered */
    }
  }
  return writes && !outs_allocated ? check_grad(k, cs, bound) : 0;
}

int bump_written_versions(const KernelObject* k, const CallScratch* cs) {
  if (!cs->bump_by_object) {
    for (int n = 0; n < cs->nversions; n++) etops_bump(cs->versions[n]);
    return 0;
  }
  for (int i = 0; i < cs->nrecs; i++) { /* through torch, each written tensor once */
    const TensorRec* r = cs->recs[i];
    if (r->written && is_torch_tensor(k->st, r->given) && etops_bump_version_slow(r->given) < 0) return -1;
  }
  return 0;
}
