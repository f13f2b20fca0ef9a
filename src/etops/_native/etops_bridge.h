/*
 * etops_bridge.h - the C face of the C++ bridge, the only code that touches ExecuTorch's types.
 *
 * The CPython extension (C) describes a kernel call as an array of etb_value slots
 * (one per schema argument, outs included, then one per fresh return value) and
 * hands it to etb_call(). The bridge builds ExecuTorch EValues, TensorImpls and a
 * KernelRuntimeContext on its own stack, runs the kernel and writes back what the
 * kernel changed (out sizes, return slots). No function here aborts: every tag and
 * every size is checked by the caller before it gets here (see kernel.c), and the
 * bridge re-checks the few invariants ExecuTorch would otherwise ET_CHECK.
 */
#ifndef ETOPS_BRIDGE_H
#define ETOPS_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ExecuTorch tensors have at most this many dims (kTensorDimensionLimit). */
#define ETB_MAX_DIM 16

/* Tags of etb_value. The numbering is etops' own, not ExecuTorch's Tag. */
typedef enum etb_tag {
  ETB_NONE = 0,
  ETB_TENSOR,
  ETB_STRING,
  ETB_DOUBLE,
  ETB_INT,
  ETB_BOOL,
  ETB_LIST_BOOL,
  ETB_LIST_DOUBLE,
  ETB_LIST_INT,
  ETB_LIST_TENSOR,
  ETB_LIST_OPT_TENSOR,
  ETB_ALIAS, /* the same EValue as slot u.i (an out variant's return is its out) */
} etb_tag;

/* Shape dynamism of a tensor, ExecuTorch's TensorShapeDynamism numbering. */
typedef enum etb_dynamism {
  ETB_STATIC = 0,
  ETB_DYNAMIC_BOUND = 1,
} etb_dynamism;

/* A CPU tensor as ExecuTorch sees it. The caller fills every field; after a call
 * the bridge rewrites ndim/sizes (and sets `resized`) when the kernel resized it. */
typedef struct etb_tensor {
  void* data;
  int8_t dtype;          /* ExecuTorch ScalarType number */
  uint8_t ndim;
  uint8_t dynamism;      /* etb_dynamism */
  uint8_t resized;       /* out: 1 when the kernel changed sizes */
  int32_t sizes[ETB_MAX_DIM];
  int32_t strides[ETB_MAX_DIM];     /* in elements, consistent with dim_order */
  uint8_t dim_order[ETB_MAX_DIM];
} etb_tensor;

typedef struct etb_value {
  int32_t tag;             /* etb_tag */
  int32_t len;             /* element count for lists and strings */
  union {
    int64_t i;
    double d;
    int b;
    const char* s;              /* ETB_STRING, not NUL-terminated necessarily */
    etb_tensor* t;              /* ETB_TENSOR */
    const int64_t* ints;        /* ETB_LIST_INT */
    const double* doubles;      /* ETB_LIST_DOUBLE */
    const uint8_t* bools;       /* ETB_LIST_BOOL, one byte each (0/1) */
    etb_tensor** tensors;       /* ETB_LIST_TENSOR, ETB_LIST_OPT_TENSOR (NULL = None) */
  } u;
} etb_value;

/* An opaque ExecuTorch OpFunction. */
typedef void* etb_kernel_fn;

/* Result of one kernel call. */
typedef struct etb_status {
  int32_t error;          /* ExecuTorch Error code; 0 is Ok */
  const char* error_name; /* static string such as "InvalidArgument" */
} etb_status;

/* ---- registry -------------------------------------------------------------- */

/* Number of kernels registered, and one of them. Fields point into the registry and
 * stay valid for the life of the process. key is NULL for a fallback kernel. */
size_t etb_kernel_count(void);
int etb_kernel_at(size_t index, const char** name, const char** key, etb_kernel_fn* fn);

/* Registry generation: bumps whenever etops changes the registry, so caches of
 * resolved functions know when to look again. */
uint64_t etb_registry_generation(void);
void etb_registry_touch(void);

/* ExecuTorch's own selection for `name` given the meta of each Tensor argument:
 * exact key first, then the fallback. Returns 0 and sets *fn, or the Error code. */
int etb_lookup(const char* name, int ntensors, const int8_t* dtypes, const uint8_t* ndims,
               const uint8_t* const* dim_orders, etb_kernel_fn* fn);

/* The kernel key string ExecuTorch builds for those tensors (for explain()). */
int etb_make_key(int ntensors, const int8_t* dtypes, const uint8_t* ndims,
                 const uint8_t* const* dim_orders, char* buf, size_t buf_size);

/* ---- calls ----------------------------------------------------------------- */

/* Runs `fn` on `values` (nvalues slots). Never aborts on anything the caller
 * validated. `op_name` is remembered while the kernel runs, for the abort notice. */
etb_status etb_call(etb_kernel_fn fn, const char* op_name, etb_value* values, int nvalues);

/* Name of an ExecuTorch Error code ("Ok", "InvalidArgument", ...). */
const char* etb_error_name(int32_t error);

/* ---- logging --------------------------------------------------------------- */

/* Called for every ExecuTorch log message that arrives outside a kernel call
 * (the thread may not hold the GIL). Level is 'D','I','E','F'. */
typedef void (*etb_log_sink)(char level, const char* file, const char* func, size_t line,
                             const char* message, size_t length);

/* Takes over ExecuTorch's platform layer: log messages during a call on this thread
 * are kept for the call's error; others go to `sink`. Abort prints the kernel that
 * was running. Returns 1 on success. */
int etb_install_pal(etb_log_sink sink);

/* Messages logged by the last failed call on this thread, joined by newlines;
 * valid until the next call on this thread. */
const char* etb_last_call_log(void);


/* ==== registry edits: custom kernels (registry_edit.cpp) =========================
 * The only functions that change ExecuTorch's registry. None aborts: each checks
 * what would make ExecuTorch abort (duplicate name + key, a full registry) first and
 * returns one of the ETB_REG_* codes instead. Invariants: see registry_edit.cpp. */

#define ETB_REG_CAPACITY 2000               /* ExecuTorch's kMaxRegisteredKernels */
#define ETB_REG_FREE_NAME "etops::<free>"   /* name of a deregistered (reusable) entry */

enum {
  ETB_REG_OK = 0,
  ETB_REG_DUPLICATE = 1, /* a live entry has this name + key */
  ETB_REG_FULL = 2,      /* no free slot and the registry is at capacity */
  ETB_REG_BAD_KEY = 3,   /* key longer than ExecuTorch's key buffer */
  ETB_REG_NOT_FOUND = 4, /* no live entry at that index */
  ETB_REG_BAD_NAME = 5,  /* NULL name or function, or the free-slot name */
  ETB_REG_STALE = 6,     /* the entry's function is not the one expected */
};

/* Index of the live entry with this name and key (NULL key: the fallback), or -1. */
long etb_reg_find(const char* name, const char* key);
/* Registers fn under name + key (both copied), reusing a free slot if there is one. */
int etb_reg_add(const char* name, const char* key, etb_kernel_fn fn, size_t* index);
/* Replaces the function of entry `index` if it currently is `expected`. */
int etb_reg_swap(size_t index, etb_kernel_fn expected, etb_kernel_fn fn);
/* Makes entry `index` a free slot (if its function is `expected`, unless NULL). */
int etb_reg_free(size_t index, etb_kernel_fn expected);
/* Number of free slots. */
size_t etb_reg_free_count(void);
/* The function a free slot holds (fails with OperatorMissing). */
etb_kernel_fn etb_reg_missing_fn(void);
/* Probe processes only: turns every entry into a free slot. Returns how many. */
int etb_reg_hide_all(void);


/* ==== backends and delegates (backends.cpp) =======================================
 * ExecuTorch's backend registry, and one lowered module's blob run by its backend
 * outside a Method: init as a Method would (runtime allocator, named data, compile
 * specs), execute on the same etb_value stack as a kernel (inputs, then outputs),
 * destroy. None aborts; failures are ExecuTorch Error codes. */

/* Number of registered backends, and the name of one (NULL past the end). */
size_t etb_backend_count(void);
const char* etb_backend_name(size_t index);
/* 1 if the backend `name` is available, 0 if not, -1 if no backend has that name. */
int etb_backend_available(const char* name);

typedef struct etb_compile_spec {
  const char* key;
  const void* value;
  size_t size;
} etb_compile_spec;

/* One named-data entry: bytes a backend loads by key (weights outside the blob). */
typedef struct etb_named_data {
  const char* key;
  const void* data;
  size_t size;
} etb_named_data;

typedef struct etb_delegate etb_delegate;

/* Initialises backend `backend` with the processed blob and compile specs (copied)
 * and the named data (indexed, not copied). The blob and the named data bytes must
 * stay valid and unchanged until etb_delegate_destroy. NotFound: no such backend;
 * NotSupported: the backend is not available; else the backend's init error. The
 * call log (etb_last_call_log) holds what the backend logged. */
etb_status etb_delegate_init(const char* backend, const void* processed, size_t processed_size,
                             const etb_compile_spec* specs, int nspecs, const etb_named_data* data,
                             int ndata, const char* method_name, etb_delegate** out);

/* Runs the delegate on `values`: its inputs then its outputs, as a Method passes them.
 * Calls on one delegate from several threads run one at a time. InvalidState when
 * ExecuTorch's threadpool was replaced since init (the backend may hold the old one). */
etb_status etb_delegate_execute(etb_delegate* d, const char* name, etb_value* values, int nvalues);

/* etops replaced ExecuTorch's threadpool (a resize): delegates initialised before
 * refuse to execute (InvalidState), as they do when the pool pointer changed. */
void etb_threadpool_replaced(void);
uint64_t etb_threadpool_generation(void);
/* 1 when the threadpool the delegate was initialised with is gone. */
int etb_delegate_stale(const etb_delegate* d);

/* Calls the backend's destroy on the handle and frees the delegate. NULL is a no-op. */
void etb_delegate_destroy(etb_delegate* d);

#ifdef __cplusplus
}
#endif
#endif /* ETOPS_BRIDGE_H */
