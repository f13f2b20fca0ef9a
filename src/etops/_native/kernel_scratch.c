/*
 * kernel_scratch.c - the scratch memory of one kernel call: a bump arena that never
 * moves what it handed out (an inline buffer, then heap blocks), and the records of
 * the tensors the call borrowed (TensorRec: the etb_tensor the bridge reads and the
 * Python object it came from, so resized outs can be reported to the slow path).
 * Everything lives until scratch_release at the end of the call.
 */
#include "kernel_internal.h"

#include <string.h>

struct ArenaBlock {
  struct ArenaBlock* next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
};

#define ARENA_BLOCK_MIN 16384

void* arena_alloc_block(Arena* a, size_t n) {
  if (a->blocks == NULL || a->blocks->used + n > a->blocks->cap) {
    size_t cap = n > ARENA_BLOCK_MIN ? n : ARENA_BLOCK_MIN;
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

int scratch_grow_recs(CallScratch* cs) {
  int cap = cs->caprecs * 4;
  TensorRec** grown = (TensorRec**)scratch_alloc(cs, sizeof(TensorRec*) * cap);
  if (grown == NULL) return -1;
  memcpy(grown, cs->recs, sizeof(TensorRec*) * cs->nrecs);
  cs->recs = grown;
  cs->caprecs = cap;
  return 0;
}

void scratch_release(CallScratch* cs) {
  etops_keep_release(&cs->keep);
  arena_free(&cs->arena);
}
