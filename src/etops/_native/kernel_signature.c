/*
 * kernel_signature.c - a call's argument signature: the hash of what torch's checks,
 * the out shapes and a kernel's writes depend on (kernel_internal.h,
 * call_signature). kernel_call.c keys the validated / probed ring by it
 * (validate_once: torch's checks once per signature), and kernel_alloc.c its
 * allocations.
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

/* ---- torch's checks, once per argument signature ------------------------------- */

/* Finds the call's signature in the kernel's ring, adding it when new (a validating
 * kernel runs torch's checks, the slow path's validate, first). A call with a number
 * given as another object than an exact int, float or bool (`odd_numbers`: a 0-dim
 * tensor where the schema wants a number) is checked by torch even when its
 * signature is known: the signature holds the number's value, not its type, and
 * torch refuses some types a known signature's call did not have. 0: go on, *slot
 * the signature's entry in the ring (validated_static_outs[*slot]: whether its outs
 * go STATIC; probed[*slot]: whether a probe of it ran clean);
 * -1: torch refuses (exception set); 1: the slow path resized outs as torch's
 * out= does and made the call itself (*handled is its result, a new reference). */
int validate_once(KernelObject* k, const etb_value* vals, PyObject* const* bound, int odd_numbers,
                         PyObject** handled, int* slot) {
  uint64_t h = call_signature(vals, k->nargs);
  int known = -1;
  /* newest first: a loop of calls repeats the signature it last added */
  for (int n = 0, i = k->validated_next; n < k->validated_count; n++) {
    i = i == 0 ? VALIDATED_SIGNATURES - 1 : i - 1;
    if (k->validated[i] == h) {
      known = i;
      break;
    }
  }
  if (known >= 0 && !(odd_numbers && k->validates)) {
    *slot = known;
    return 0;
  }
  int static_outs = 0;
  if (k->validates) {
    int answer = slow_validate(k, bound, handled, &static_outs);
    if (answer == SLOW_ERROR) return -1;
    if (answer == SLOW_HANDLED) return 1; /* never remembered: these outs change shape */
    static_outs = k->static_outs_allowed && static_outs;
  }
  if (known >= 0) { /* torch accepted the number's type: the signature's entry as it was */
    *slot = known;
    return 0;
  }
  k->validated_static_outs[k->validated_next] = (uint8_t)static_outs;
  k->probed[k->validated_next] = 0; /* its first call is a probe (kernel_probe.c) */
  *slot = k->validated_next;
  k->validated[k->validated_next] = h;
  k->validated_next = (k->validated_next + 1) % VALIDATED_SIGNATURES;
  if (k->validated_count < VALIDATED_SIGNATURES) k->validated_count++;
  return 0;
}
