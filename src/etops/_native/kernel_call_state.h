/*
 * kernel_call_state.h - what the steps of one call share (kernel_call.c, its only
 * includer): the Call (scalars and pointers, kept in registers), the memory it points
 * at (CallMemory, in kernel_vectorcall's frame), and what a step says.
 */
#ifndef ETOPS_KERNEL_CALL_STATE_H
#define ETOPS_KERNEL_CALL_STATE_H

#include "kernel_internal.h"

/* One call in progress: what its steps share. Only scalars and pointers: the arrays
 * and records whose addresses the call hands to other files live in
 * kernel_vectorcall's frame (CallMemory), so that no step passes the Call itself (or
 * a field's address) out, and the compiler keeps its fields in registers. */
typedef struct {
  PyObject** bound; /* per plan argument (borrowed), NULL: an out not given */
  int missing_out;  /* an out is missing: the slow path (or C) allocates it */
  CallScratch* cs;
  Probe* probe;
  PyObject* crash_site; /* (argument, where, offset) of a fault in a probe's memory */
  int probed_crash;     /* the fault hit a probe: the kernel wrote etops' copies of the outs */
  etb_value* vals_buf;
  etb_value* vals; /* vals_buf, or the memo's slots */
  DLTensor* pre;   /* what a memo that does not match asked torch, for the conversion */
  int memo_hit;
  PyObject** fresh; /* outs allocated here for a call without out= */
  int nfresh;
  int alloc_slot;     /* their entry in the kernel's allocation ring, or -1 */
  int alloc_remember; /* a new signature: remember what the slow path allocates */
  uint64_t alloc_sig;
  int static_slot;    /* the ring entry of this signature when its outs went STATIC, or -1 */
  int signature_slot; /* the ring entry of this signature (calls with outs), or -1 */
  etb_kernel_fn fn;
  int err;    /* ETB_OK or an ExecuTorch Error code */
  int logged; /* whether the call log may hold messages (a kernel's call tells) */
  PyObject* result; /* what the call returns once a step says STEP_DONE (NULL: raised) */
} Call;

/* What a call's Call points at (kernel_vectorcall's frame). */
typedef struct {
  PyObject* bound[ETOPS_MAX_ARGS];
  CallScratch cs;
  Probe probe;
  etb_value vals_buf[ETOPS_MAX_ARGS];
  DLTensor pre[ETOPS_MAX_ARGS];
  PyObject* fresh[ETOPS_MAX_ARGS];
} CallMemory;

/* Every step is inlined into kernel_vectorcall (a step out of line would take the
 * Call's address and keep its fields in memory). */
#define STEP static inline __attribute__((always_inline))

/* What a step says: go on with the next, or the call is over (Call.result). */
typedef enum { STEP_NEXT, STEP_DONE } Step;

/* A step that ends the call with `result` (NULL: an exception is set). */
STEP Step done_with(Call* c, PyObject* result) {
  c->result = result;
  return STEP_DONE;
}

#endif /* ETOPS_KERNEL_CALL_STATE_H */
