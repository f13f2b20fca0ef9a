/*
 * kernel_select.c - kernel selection: which registered ExecuTorch function a call
 * runs. ExecuTorch picks by kernel key (dtype and dim order of every Tensor slot)
 * with a fallback; each Kernel remembers its last CACHE_ENTRIES key -> function
 * resolutions, and whether the operator has specialized kernels at all, for the
 * registry generation it saw (any registry edit bumps the generation and so
 * empties the cache).
 */
#include "kernel_internal.h"

#include <string.h>

void refresh_registry_view(KernelObject* k, uint64_t gen) {
  k->gen = gen;
  k->has_specialized = 0;
  k->fallback_fn = NULL;
  k->cache_next = 0;
  for (int i = 0; i < CACHE_ENTRIES; i++) k->cache[i].len = -1;
  size_t n = etb_kernel_count();
  for (size_t i = 0; i < n; i++) {
    const char *name, *key;
    etb_kernel_fn fn;
    if (etb_kernel_at(i, &name, &key, &fn) != ETB_OK || strcmp(name, k->op_name) != 0) continue;
    if (key == NULL) {
      k->fallback_fn = fn;
    } else {
      k->has_specialized = 1;
    }
  }
}

etb_kernel_fn select_kernel(KernelObject* k, const etb_value* vals) {
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
  if (etb_lookup(k->op_name, n, dtypes, ndims, orders, &fn) != ETB_OK) return NULL;
  if (cacheable) {
    CacheEntry* e = &k->cache[k->cache_next];
    k->cache_next = (k->cache_next + 1) % CACHE_ENTRIES;
    e->len = len;
    memcpy(e->key, key, len);
    e->fn = fn;
  }
  return fn;
}
