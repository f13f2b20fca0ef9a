/*
 * tensor_fields.h - what torch keeps on a tensor that DLPack does not carry, read on
 * every call: its lazy negative and conjugate bits (the tensor's values are its
 * memory's, negated or conjugated), whether it is an inference tensor, and its
 * version counter (autograd's record of in-place writes, which every out= write
 * bumps). torch's C++ getters are inline and its Python ones cost 100 ns or more a
 * tensor, so the fields are read from torch's own structures: where they lie is not
 * public, so tensor_fields.c finds it at import from tensors whose answers torch
 * gives, and checks every answer against torch's getters on other tensors. When no
 * single layout fits, `etops_tensor_fields.ok` is 0 and every question goes to
 * torch's Python getters (correct, slower). Process-wide: one torch per process.
 */
#ifndef ETOPS_TENSOR_FIELDS_H
#define ETOPS_TENSOR_FIELDS_H

#include "etops_native.h"

#include <string.h>

typedef struct {
  int ok;                /* every offset below found and checked */
  Py_ssize_t impl_at;    /* torch.Tensor object -> its TensorImpl pointer */
  Py_ssize_t keys_at;    /* TensorImpl -> its dispatch key set (64 bits) */
  uint64_t lazy_keys;    /* the key set's negative and conjugate bits */
  uint64_t grad_keys;    /* bits every tensor but an inference tensor has */
  Py_ssize_t counter_at; /* TensorImpl -> its version counter (NULL: an inference tensor) */
  Py_ssize_t version_at; /* version counter -> its 32-bit version */
} etops_tensor_fields_t;

extern etops_tensor_fields_t etops_tensor_fields;

static inline uintptr_t etops_word_at(const void* base, Py_ssize_t offset) {
  uintptr_t w;
  memcpy(&w, (const char*)base + offset, sizeof w);
  return w;
}

/* The dispatch key set of a torch.Tensor (exact type or subclass); fields ok. */
static inline uint64_t etops_tensor_keys(PyObject* obj) {
  const void* impl = (const void*)etops_word_at(obj, etops_tensor_fields.impl_at);
  return (uint64_t)etops_word_at(impl, etops_tensor_fields.keys_at);
}

/* Out of line (tensor_fields.c): torch's Python getters, when the fields are not known. */
int etops_tensor_lazy_slow(PyObject* obj);

/* Whether torch.Tensor `obj` (exact type or subclass) has its lazy negative or
 * conjugate bit set: 1, 0, or -1 with an exception. */
static inline int etops_tensor_lazy(PyObject* obj) {
  if (etops_tensor_fields.ok) return (etops_tensor_keys(obj) & etops_tensor_fields.lazy_keys) != 0;
  return etops_tensor_lazy_slow(obj);
}

/* The inline path's question: 0 when the fields say `obj` has neither lazy bit, 1
 * otherwise (a lazy bit, or the fields unknown: the caller then asks
 * etops_tensor_lazy on its general path). Never raises. */
static inline int etops_tensor_maybe_lazy(PyObject* obj) {
  return !etops_tensor_fields.ok || (etops_tensor_keys(obj) & etops_tensor_fields.lazy_keys) != 0;
}

/* Whether writing torch.Tensor `obj` (without a version counter, or the fields off)
 * is refused as torch refuses it: it is an inference tensor and inference mode is
 * off ("Inplace update to inference tensor outside InferenceMode is not allowed").
 * 1, 0, or -1 with an exception. */
int etops_inference_write_refused(PyObject* obj);
/* Raises that refusal, naming argument `what` of `op`. Returns -1. */
int etops_refuse_inference_write(const char* op, const char* what);

/* Where torch.Tensor `obj` keeps its version, or NULL: it has no version counter (an
 * inference tensor), or the fields are off (`*known` then 0). Inline: every write. */
static inline uint32_t* etops_tensor_version(PyObject* obj, int* known) {
  *known = etops_tensor_fields.ok;
  if (!etops_tensor_fields.ok) return NULL;
  const void* impl = (const void*)etops_word_at(obj, etops_tensor_fields.impl_at);
  char* counter = (char*)etops_word_at(impl, etops_tensor_fields.counter_at);
  return counter != NULL ? (uint32_t*)(counter + etops_tensor_fields.version_at) : NULL;
}

/* Bumps a version etops_tensor_version found, as torch does after writing a tensor
 * in place: a load and a store (a locked add costs more than the rest of the call's
 * checks; a write racing this one to the same tensor, the GIL held here, races on its
 * values too, and autograd only needs the version to move). */
static inline void etops_bump(uint32_t* version) {
  __atomic_store_n(version, __atomic_load_n(version, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* Bumps torch.Tensor `obj`'s version counter through torch (the fields off, or no
 * room to remember its version); an inference tensor has none: nothing to bump. 0,
 * or -1 with an exception. */
int etops_bump_version_slow(PyObject* obj);

/* Finds the fields from samples (tensor_fields.c): 1 on, 0 off, -1 error. */
int etops_calibrate_tensor_fields(etops_state* st, PyObject* samples);

#endif /* ETOPS_TENSOR_FIELDS_H */
