/*
 * kernel_slow.h - the typed interface between the C call and its Python slow path
 * (kernel_slow.c): the hand-offs, the table the Python side fills, the result type
 * of a check that made the call. Included by kernel_internal.h only.
 */
#ifndef ETOPS_KERNEL_SLOW_H
#define ETOPS_KERNEL_SLOW_H

#include "etops_native.h"

/* ---- kernel_slow.c: the hand-offs to the Python slow path -------------------------
 * One callable per entry, filled by the Python side (etops/slow_path.py builds the
 * SlowPathTable from SlowPath's methods). Unless said otherwise an entry takes
 * (kernel, values, extra): `values` the arguments exactly as this call bound them,
 * one item per plan argument in plan order (defaults filled, missing outs as None),
 * so Python never binds again; `extra` None. Its answer, by entry: */
typedef enum {
  SLOW_ALLOCATE_AND_CALL, /* outs are missing: size them, allocate, call again -> the call's result */
  SLOW_OUTS_TO_REMEMBER,  /* after an allocation -> a tuple of (shape, strides, dtype) per out, None or False (kernel_alloc.c) */
  SLOW_PRECHECK,          /* before every call of a kernel known to abort on some inputs -> None (go on) or Handled */
  SLOW_VALIDATE,          /* a new argument signature: torch's checks -> a bool (outs go STATIC) or Handled; raises what torch refuses */
  SLOW_EXPLAIN_MISMATCH,  /* a delegate's tensor does not match its spec -> None (accepted), or raises */
  SLOW_FOOTPRINT_REFUSED, /* extra: the argument's name; an index value outside the dim it indexes -> always raises */
  SLOW_FAILED,            /* extra: the CallFailure (call_failure.c); resize outs and call again -> its result, or raises */
  SLOW_NO_KERNEL,         /* no registered kernel matches the tensors' key -> always raises */
  SLOW_RESIZED,           /* (kernel, out object, new sizes, has data, argument name): mirror it -> None */
  SLOW_GUARDED,           /* extra: whether a delegate; the kernel faulted before or the process is tainted: run it guarded -> the call's result */
  SLOW_OUTS_ALLOCATED,    /* whether every out is one etops allocated for this call -> a bool */
  SLOW_OVERLAPS,          /* extra: the plan's flags per argument; tensors whose memory meets -> full aliases to remember, or raises */
  SLOW_SNAPSHOT,          /* (input tensor): a copy in its own layout -> the tensor */
  SLOW_ENTRY_COUNT
} SlowEntry;

typedef struct {
  PyObject_HEAD
  PyObject* fn[SLOW_ENTRY_COUNT]; /* callables, never NULL once built */
} SlowPathTable;

/* Handled(result): a slow-path check made the call itself; its result is the call's. */
typedef struct {
  PyObject_HEAD
  PyObject* result;
} HandledObject;

/* What slow_precheck and slow_validate answer. */
typedef enum {
  SLOW_ERROR = -1,  /* an exception is set (the call is refused) */
  SLOW_GO_ON = 0,   /* the C call goes on */
  SLOW_HANDLED = 1, /* the slow path made the call: *result is its result (a new reference) */
} SlowAnswer;

#endif /* ETOPS_KERNEL_SLOW_H */
