/*
 * etops_bridge.h - the C face of the C++ bridge, the only code that touches ExecuTorch's types.
 *
 * The CPython extension (C) describes a kernel call as an array of etb_value slots
 * (one per schema argument, outs included, then one per fresh return value) and
 * hands it to etb_call(). The bridge builds ExecuTorch EValues, TensorImpls and a
 * KernelRuntimeContext on its own stack, runs the kernel and writes back what the
 * kernel changed (out sizes, return slots).
 *
 * RETURN CONVENTION (every function declared here)
 *   - A function that can fail returns `int`: ETB_OK (0) on success, otherwise a
 *     positive error code. Registry edits (registry_edit.cpp) return ETB_REG_*
 *     codes; everything else returns an ExecuTorch Error number (etb_error_name
 *     names it; the few C callers test for are ETB_ERR_*). Results come back
 *     through pointer parameters, written only on success. A call that runs
 *     ExecuTorch code (etb_call, etb_delegate_init, etb_delegate_execute) and fails
 *     also leaves a structured account of why: etb_last_failure.
 *   - A function that cannot fail (a count, a name, a generation, a yes/no
 *     question about a valid object) returns its value; a yes/no answer is an int,
 *     1 or 0.
 *
 * WHAT ABORTS, AND WHO PREVENTS IT
 *   ExecuTorch ends the process (its PAL abort, through ET_CHECK) instead of
 *   returning an Error when: a TensorImpl gets a dtype it does not know, a dim
 *   order that is not a permutation, more than kTensorDimensionLimit dims; an
 *   EValue is read as another tag than it holds (a kernel reading an argument the
 *   schema types differently); a list is built from NULL pointers; a kernel is
 *   registered twice under one name + key, or past the registry's capacity; and
 *   whenever a kernel itself ET_CHECKs its inputs. No function here aborts on what
 *   its caller validated: the C extension checks every tag, dtype, dim order and
 *   size before a call (kernel_convert.c, tensor.c), the slow path's precheck
 *   refuses inputs known kernels abort on (per-operator rules), registry edits check duplicates and capacity first, and
 *   the bridge re-checks the few invariants it can (alias slots, tags). If an abort
 *   happens anyway, the notice on stderr names the kernel that was running.
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

/* Success, for every function that can fail. */
#define ETB_OK 0

/* ExecuTorch Error numbers C code tests for (bridge.cpp checks they match). */
enum {
  ETB_ERR_INVALID_STATE = 0x02,
  ETB_ERR_NOT_SUPPORTED = 0x10,
  ETB_ERR_INVALID_ARGUMENT = 0x12,
  ETB_ERR_INVALID_TYPE = 0x13,
  ETB_ERR_NOT_FOUND = 0x20,
  ETB_ERR_MEMORY_ALLOCATION_FAILED = 0x21,
};

/* Statuses of a call that are not ExecuTorch Errors (etb_failure.kind says the
 * same): ExecuTorch aborted inside the kernel and etops unwound it; the kernel threw
 * a C++ exception of its own; a synchronous fault on the calling thread inside the
 * kernel abandoned its frames (fault_trap.h). */
#define ETB_ERR_ABORTED 0x1000
#define ETB_ERR_CXX_EXCEPTION 0x1001
#define ETB_ERR_CRASHED 0x1002

/* ExecuTorch ScalarType numbers (etb_tensor.dtype), the ones etops borrows
 * tensors of; bridge.cpp checks they match ExecuTorch's. */
typedef enum etb_dtype {
  ETB_DTYPE_BYTE = 0,
  ETB_DTYPE_CHAR = 1,
  ETB_DTYPE_SHORT = 2,
  ETB_DTYPE_INT = 3,
  ETB_DTYPE_LONG = 4,
  ETB_DTYPE_HALF = 5,
  ETB_DTYPE_FLOAT = 6,
  ETB_DTYPE_DOUBLE = 7,
  ETB_DTYPE_COMPLEX_HALF = 8,
  ETB_DTYPE_COMPLEX_FLOAT = 9,
  ETB_DTYPE_COMPLEX_DOUBLE = 10,
  ETB_DTYPE_BOOL = 11,
  ETB_DTYPE_BFLOAT16 = 15,
  ETB_DTYPE_FLOAT8_E5M2 = 23,
  ETB_DTYPE_FLOAT8_E4M3FN = 24,
  ETB_DTYPE_FLOAT8_E5M2FNUZ = 25,
  ETB_DTYPE_FLOAT8_E4M3FNUZ = 26,
  ETB_DTYPE_UINT16 = 27,
  ETB_DTYPE_UINT32 = 28,
  ETB_DTYPE_UINT64 = 29,
  ETB_DTYPE_COUNT /* one past the highest number above (table sizes) */
} etb_dtype;

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
  int8_t dtype;          /* etb_dtype: ExecuTorch's ScalarType number */
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

/* What a trapped fault was: the signal, si_code, the faulting address (si_addr:
 * the memory accessed for SIGSEGV/SIGBUS, the instruction for SIGFPE/SIGILL), the
 * program counter, whether a SIGSEGV was a write (1), a read (0) or unknown (-1),
 * and whether the address is the end of the thread's stack (1: a stack overflow,
 * fault_trap.c's is_stack_overflow). */
typedef struct etf_fault {
  int32_t signo;
  int32_t code;
  int32_t is_write;
  int32_t stack_overflow;
  uint64_t address;
  uint64_t pc;
} etf_fault;

/* Why a call failed: one kind per way ExecuTorch code can fail (etb_failure.kind). */
typedef enum etb_failure_kind {
  ETB_FAILURE_ERROR = 1,      /* the kernel or backend returned an Error (ctx.fail) */
  ETB_FAILURE_RESIZE_REFUSED, /* the same, after ExecuTorch refused to resize a tensor the kernel
                                 resized (TensorImpl's resize logged it: a STATIC tensor to another
                                 shape, a DYNAMIC_BOUND one past its memory) */
  ETB_FAILURE_ABORTED,        /* ExecuTorch aborted inside (ET_CHECK, ET_ASSERT_UNREACHABLE), unwound:
                                 code ETB_ERR_ABORTED; file:line is the check's */
  ETB_FAILURE_CXX_EXCEPTION,  /* the kernel threw a C++ exception: code ETB_ERR_CXX_EXCEPTION,
                                 the message says what */
  ETB_FAILURE_CRASHED,        /* a synchronous fault, trapped: code ETB_ERR_CRASHED, `fault` says what */
  ETB_FAILURE_REFUSED,        /* the bridge refused the call before any ExecuTorch code ran (a
                                 malformed slot, no such backend, no memory) */
  ETB_FAILURE_KIND_COUNT      /* one past the last kind (table sizes) */
} etb_failure_kind;

/* A failed call, as the bridge saw it. Strings are NUL-terminated, never NULL. */
typedef struct etb_failure {
  int32_t kind;        /* etb_failure_kind */
  int32_t code;        /* the call's status: an ExecuTorch Error or ETB_ERR_ABORTED / _CXX_EXCEPTION / _CRASHED */
  const char* message; /* what ExecuTorch and the kernel logged during the call, a line a message ("": nothing) */
  const char* file;    /* the source file of the last error or fatal message logged (the failing check;
                          ExecuTorch's own paths from "executorch/" on), "" when none was */
  uint32_t line;       /* its line, 0 when none */
  const char* origin_file; /* the source file of the first error or fatal message logged (the check that
                              failed first, which `file`'s outer check reports again; the same message
                              when only one was logged), "" when none was */
  uint32_t origin_line;    /* its line, 0 when none */
  const char* kernel;  /* the kernel (or backend) the call ran */
  etf_fault fault;     /* ETB_FAILURE_CRASHED: the fault; zeros otherwise */
} etb_failure;

/* An opaque ExecuTorch OpFunction. */
typedef void* etb_kernel_fn;

/* ---- registry queries (registry_query.cpp) ------------------------------------ */

/* Number of kernels registered. */
size_t etb_kernel_count(void);

/* Entry `index` of the registry: its name, its key (NULL for a fallback kernel) and
 * function. The strings live as long as the process. ETB_ERR_INVALID_ARGUMENT when
 * index >= etb_kernel_count(). */
int etb_kernel_at(size_t index, const char** name, const char** key, etb_kernel_fn* fn);

/* Registry generation: bumps whenever etops changes the registry (etb_registry_touch),
 * so caches of resolved functions know when to look again. Never 0. */
uint64_t etb_registry_generation(void);
void etb_registry_touch(void);

/* ExecuTorch's own selection for `name` given the meta of each Tensor argument:
 * exact key first, then the fallback; sets *fn. Errors: OperatorMissing (no kernel
 * matches). With more than 16 tensors (more than ExecuTorch's key holds) only a
 * fallback can match. dtypes must be ScalarTypes and dim orders permutations. */
int etb_lookup(const char* name, int ntensors, const int8_t* dtypes, const uint8_t* ndims,
               const uint8_t* const* dim_orders, etb_kernel_fn* fn);

/* The kernel key string ExecuTorch builds for those tensors (for explain()), NUL-
 * terminated in buf. Errors: InvalidArgument (more than 16 tensors, a buffer too
 * small, a value the key cannot represent). */
int etb_make_key(int ntensors, const int8_t* dtypes, const uint8_t* ndims,
                 const uint8_t* const* dim_orders, char* buf, size_t buf_size);

/* ---- calls (bridge.cpp) ---------------------------------------------------------- */

/* Runs `fn` on `values` (nvalues slots) and returns the kernel's failure state (an
 * ExecuTorch Error; InvalidType / InvalidArgument for a malformed slot, before any
 * kernel runs), etb_last_failure saying why when it is not ETB_OK. On return,
 * tensors passed ETB_DYNAMIC_BOUND have their new sizes (and `resized` set) and
 * fresh return slots their value. `op_name` is remembered while the kernel runs,
 * for the abort notice and the failure; what the kernel logs is kept (the failure's
 * message, or etb_last_call_log after a success), and *logged (when the kernel ran)
 * says whether it logged anything (0: etb_last_call_log() is ""). `flags`:
 * ETB_CALL_HAS_LISTS unless no slot is a string or a list (the stack is then built
 * without counting its slots; such a slot is refused with InvalidType);
 * ETB_CALL_POOL_INLINE runs the kernel's parallel regions on this thread (a small
 * call: a fault in it is then always trapped, fault_trap.h). Never aborts on slots
 * the caller validated. */
#define ETB_CALL_HAS_LISTS 1
#define ETB_CALL_POOL_INLINE 2
int etb_call(etb_kernel_fn fn, const char* op_name, etb_value* values, int nvalues, int flags, int* logged);

/* A prepared call (bridge_prepared.hpp): the ExecuTorch stack of `values` built once,
 * for etb_call_prepared to run again and again. Only for at most 16 slots of STATIC
 * tensors, ints, doubles, bools and aliases (anything else, or no memory: NULL).
 * The tensor records stay the caller's: they must outlive the prepared call, their
 * layouts unchanged (only their data pointers may change between calls). `reuse`: a
 * prepared call whose memory is built again (it is freed when NULL is returned), or
 * NULL. */
typedef struct etb_prepared etb_prepared;
etb_prepared* etb_prepare(etb_prepared* reuse, etb_value* values, int nvalues);
/* etb_call(fn, op_name, values, ...) on the prepared stack, each tensor at its
 * record's current data pointer: the same call, failure and log. */
int etb_call_prepared(etb_prepared* p, etb_kernel_fn fn, const char* op_name, int flags, int* logged);
void etb_prepared_free(etb_prepared* p);

/* Name of an ExecuTorch Error code ("Ok", "InvalidArgument", ..., "Unknown"): a
 * static string. */
const char* etb_error_name(int32_t error);

/* ---- logging --------------------------------------------------------------- */

/* Called for every ExecuTorch log message that arrives outside a kernel call
 * (the thread may not hold the GIL). Level is 'D','I','E','F'. */
typedef void (*etb_log_sink)(char level, const char* file, const char* func, size_t line,
                             const char* message, size_t length);

/* Takes over ExecuTorch's platform layer: log messages during a call on this thread
 * are kept for the call's error; others go to `sink`. An abort during a call on this
 * thread unwinds out of the kernel (the call returns ETB_ERR_ABORTED); any other abort
 * prints the kernel that was running and ends the process. Cannot fail; takes the
 * layer back before each call when another library installed its own since. */
void etb_install_pal(etb_log_sink sink);

/* Messages the last call on this thread logged, joined by newlines (a call that
 * succeeded may log warnings: they go to Python's logging); valid until the next
 * call on this thread. A failure's are its message. */
const char* etb_last_call_log(void);

/* Whether the last call on this thread logged a message at Error or Fatal level
 * (the level ExecuTorch gave it, not its text): 1 or 0. A successful call that did
 * is no silent pass (etops._logs records it for the conformance runner). */
int etb_last_call_logged_error(void);

/* The last call on this thread that failed (returned other than ETB_OK): valid,
 * unchanged by calls that succeed, until the next call on this thread fails. */
const etb_failure* etb_last_failure(void);

/* The kernel of the outermost etops call running on any thread, or NULL
 * (async-signal-safe: fault_trap.c's notices). */
const char* etb_running_kernel(void);


/* ==== registry edits: custom kernels (registry_edit.cpp) =========================
 * The only functions that change ExecuTorch's registry. ExecuTorch's own
 * register_kernels aborts on a duplicate name + key and on a full registry, and has
 * no unregister; none of these aborts: each checks what would make ExecuTorch abort
 * first and returns one of the ETB_REG_* codes instead. Each successful edit bumps
 * the registry generation. Invariants: see registry_edit.cpp. */

#define ETB_REG_CAPACITY 2000               /* ExecuTorch's kMaxRegisteredKernels */
#define ETB_REG_FREE_NAME "etops::<free>"   /* name of a deregistered (reusable) entry */

/* The codes are part of etops._native's Python interface (etops/custom/registration.py). */
enum {
  ETB_REG_OK = ETB_OK,
  ETB_REG_DUPLICATE = 1, /* a live entry has this name + key */
  ETB_REG_FULL = 2,      /* no free slot and the registry is at capacity */
  ETB_REG_BAD_KEY = 3,   /* key longer than ExecuTorch's key buffer */
  ETB_REG_NOT_FOUND = 4, /* no live entry at that index, or with that name + key */
  ETB_REG_BAD_NAME = 5,  /* NULL name or function, or the free-slot name */
  ETB_REG_STALE = 6,     /* the entry's function is not the one expected */
};

/* Sets *index to the live entry with this name and key (NULL key: the fallback).
 * Errors: ETB_REG_NOT_FOUND. */
int etb_reg_find(const char* name, const char* key, size_t* index);
/* Registers fn under name + key (both copied, never freed), reusing a free slot if
 * there is one; sets *index. Errors: ETB_REG_BAD_NAME, ETB_REG_BAD_KEY,
 * ETB_REG_DUPLICATE, ETB_REG_FULL. */
int etb_reg_add(const char* name, const char* key, etb_kernel_fn fn, size_t* index);
/* Replaces the function of entry `index` if it currently is `expected` (one atomic
 * compare-and-swap). Errors: ETB_REG_BAD_NAME (fn NULL), ETB_REG_NOT_FOUND,
 * ETB_REG_STALE. */
int etb_reg_swap(size_t index, etb_kernel_fn expected, etb_kernel_fn fn);
/* Makes entry `index` a free slot (if its function is `expected`, unless NULL): no
 * lookup matches it any more. Errors: ETB_REG_NOT_FOUND, ETB_REG_STALE. */
int etb_reg_free(size_t index, etb_kernel_fn expected);
/* Number of free slots. */
size_t etb_reg_free_count(void);
/* The function a free slot holds (it fails with OperatorMissing, never aborts). */
etb_kernel_fn etb_reg_missing_fn(void);
/* Probe processes only: turns every entry into a free slot. Returns how many. */
size_t etb_reg_hide_all(void);


/* ==== backends and delegates (backends.cpp) =======================================
 * ExecuTorch's backend registry, and one lowered module's blob run by its backend
 * outside a Method: init as a Method would (runtime allocator, named data, compile
 * specs), execute on the same etb_value stack as a kernel (inputs, then outputs),
 * destroy. None aborts; failures are ExecuTorch Error codes. */

/* Number of registered backends. */
size_t etb_backend_count(void);
/* Sets *name to backend `index`'s name (a string that lives as long as the process).
 * Errors: InvalidArgument (index >= etb_backend_count()). */
int etb_backend_name(size_t index, const char** name);
/* Sets *available to 1 if the backend `name` says it is available, else 0 (what it
 * logs while asked goes to the call log). Errors: NotFound (no backend has that name). */
int etb_backend_available(const char* name, int* available);

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
 * and the named data (indexed, not copied), and sets *out. The blob and the named
 * data bytes must stay valid and unchanged until etb_delegate_destroy. Errors:
 * NotFound (no such backend), NotSupported (the backend is not available),
 * MemoryAllocationFailed, else the backend's init error; etb_last_failure says why
 * (its message: what the backend logged). */
int etb_delegate_init(const char* backend, const void* processed, size_t processed_size,
                      const etb_compile_spec* specs, int nspecs, const etb_named_data* data, int ndata,
                      const char* method_name, etb_delegate** out);

/* Runs the delegate on `values`: its inputs then its outputs, as a Method passes them
 * (the same slots and write-back as etb_call). Returns the backend's Error. Calls on
 * one delegate from several threads run one at a time. InvalidState when
 * ExecuTorch's threadpool was replaced since init (the backend may hold the old one). */
int etb_delegate_execute(etb_delegate* d, const char* name, etb_value* values, int nvalues);

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
