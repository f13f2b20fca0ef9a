/*
 * kernel_signature.c - a call's argument signature: the hash of what torch's checks,
 * the out shapes and a kernel's writes depend on (kernel_internal.h,
 * call_signature). kernel_call.c keys the validated / probed ring by it, and
 * kernel_alloc.c its allocations.
 */
#include "kernel_internal.h"

/* `head` (the value's tag and len, bits 16-63, or 0 for a list item) and the
 * tensor's dtype and rank (bits 0-15) in one word, then its sizes two per word.
 * A missing list item (NULL) hashes as dtype and rank 0xFF, which no tensor has. */
static inline uint64_t tensor_signature(uint64_t h, uint64_t head, const etb_tensor* t) {
  if (t == NULL) return signature_mix(h, head | 0xFFFF);
  h = signature_mix(h, head | ((uint64_t)(uint8_t)t->dtype << 8) | t->ndim);
  int d = 0;
  for (; d + 1 < t->ndim; d += 2)
    h = signature_mix(h, ((uint64_t)(uint32_t)t->sizes[d] << 32) | (uint32_t)t->sizes[d + 1]);
  if (d < t->ndim) h = signature_mix(h, (uint32_t)t->sizes[d]);
  return h;
}

uint64_t call_signature(const etb_value* vals, int n) {
  uint64_t h = 0x243F6A8885A308D3ULL;
  for (int i = 0; i < n; i++) {
    const etb_value* v = &vals[i];
    uint64_t head = ((uint64_t)(uint16_t)v->tag << 48) | ((uint64_t)(uint32_t)v->len << 16);
    if (v->tag == ETB_TENSOR) { /* the common case: one word for the header, dtype and rank */
      h = tensor_signature(h, head, v->u.t);
      continue;
    }
    h = signature_mix(h, head);
    switch (v->tag) {
      case ETB_INT: h = signature_mix(h, (uint64_t)v->u.i); break;
      case ETB_BOOL: h = signature_mix(h, (uint64_t)v->u.b); break;
      case ETB_LIST_BOOL:
        for (int j = 0; j < v->len; j++) h = signature_mix(h, v->u.bools[j]);
        break;
      case ETB_LIST_INT:
        for (int j = 0; j < v->len; j++) h = signature_mix(h, (uint64_t)v->u.ints[j]);
        break;
      case ETB_LIST_TENSOR:
      case ETB_LIST_OPT_TENSOR:
        for (int j = 0; j < v->len; j++) h = tensor_signature(h, 0, v->u.tensors[j]);
        break;
      default: break; /* doubles, strings, None: the tag says enough */
    }
  }
  return h;
}
