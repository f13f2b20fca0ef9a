/*
 * etops_native.h - the extension's internals, what its C files share: module state,
 * the argument plan's encoding, the tensor borrowing helpers (tensor.c), failures as
 * Python objects (call_failure.c). The C<->C++ bridge's ABI (slots, statuses, a
 * call's failure) is etops_bridge.h's, included here and not restated.
 */
#ifndef ETOPS_NATIVE_H
#define ETOPS_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <ATen/dlpack.h>

#include "etops_bridge.h"

/* Argument kinds of the plan (mirrored in etops/plan.py, keep in sync). */
enum {
  K_TENSOR = 1,
  K_TENSOR_LIST = 2,
  K_OPT_TENSOR_LIST = 3,
  K_SCALAR = 4,
  K_INT = 5,
  K_FLOAT = 6,
  K_BOOL = 7,
  K_STR = 8,
  K_INT_LIST = 9,
  K_FLOAT_LIST = 10,
  K_BOOL_LIST = 11,
  K_ENUM = 12,
  K_RETURN_SLOT = 13, /* a fresh return value the kernel writes (prim ops) */
  K_COUNT             /* one past the last kind */
};

/* Argument flags of the plan. */
enum {
  F_OPTIONAL = 1,
  F_KWONLY = 2,
  F_OUT = 4,
  F_HAS_DEFAULT = 8,
  F_MUTABLE = 16,
};

/* Most schema arguments a kernel may have, and most direct tensors in one call. */
#define ETOPS_MAX_ARGS 40
#define ETOPS_MAX_TENSORS 40

typedef struct etops_state {
  PyObject* kernel_type;          /* the Kernel type */
  PyObject* delegate_type;        /* the Delegate type (delegate.c) */
  PyObject* failure_type;         /* CallFailure, a failed call (call_failure.c) */
  PyObject* fault_type;           /* Fault, a crashed call's fault (call_failure.c) */
  PyObject* slow_path_type;       /* SlowPathTable, the slow path's hand-offs (kernel_slow.c) */
  PyObject* handled_type;         /* Handled, a check's "the slow path made the call" (kernel_slow.c) */
  PyObject* torch_tensor_type;    /* torch.Tensor, set by configure() */
  const DLPackExchangeAPI* torch_api;
  PyObject* densify;              /* callable(obj) -> contiguous copy */
  PyObject* copy_back;            /* callable(user_tensor, computed) -> None */
  PyObject* flush_logs;           /* callable() -> None, drains queued ET logs */
  PyObject* empty_strided;        /* torch.empty_strided: outs etops allocates in C */
  PyObject* kwnames_dtype;        /* ("dtype",): its keyword */
  PyObject* str_dlpack;           /* "__dlpack__" */
  PyObject* str_dlpack_device;    /* "__dlpack_device__" */
  /* Last non-torch type seen and its exchange API (NULL: none, use __dlpack__). */
  PyTypeObject* other_type;
  const DLPackExchangeAPI* other_api;
  /* Last torch.Tensor subclass seen (owned) and whether it is refused: it has a
   * __torch_dispatch__ of its own (FakeTensor, wrapper subclasses), so its memory is
   * not its data (tensor.c, subclass_refused). */
  PyTypeObject* subclass_type;
  int subclass_refused;
  /* torch.Tensor's `requires_grad` getter, called directly (kernel_checks.c), and
   * torch.is_grad_enabled, asked only once a tensor requires grad. */
  getter requires_grad_get;
  void* requires_grad_closure;
  PyObject* is_grad_enabled;
  /* c10::GradMode::is_enabled() of the torch this process loaded (looked up by its
   * exported name at configure(), never linked), or NULL: is_grad_enabled is called */
  _Bool (*grad_mode_enabled)(void);
  /* The grad probe (kernel_checks.c, etops_calibrate_grad_probe): where an exact
   * torch.Tensor keeps its TensorImpl, and where that keeps its autograd state (NULL
   * for a tensor that never required grad, has no grad_fn and is no view); found at
   * import by comparing tensors torch says do and do not require grad. 0: off. */
  int grad_probe_ok;
  Py_ssize_t grad_probe_impl, grad_probe_meta;
  /* THPVariable_Wrap(const at::TensorBase&) of the torch this process loaded, checked
   * at configure() (tensor_alloc.c), or NULL: outs are allocated through empty_strided */
  PyObject* (*tensor_wrap)(void* const* tensor_base);
} etops_state;

/* ---- tensor_alloc.c: a contiguous torch.Tensor allocated without a Python call ---- */

/* Looks up and checks torch's tensor wrapper (st->tensor_wrap; NULL when anything
 * does not fit). Called by configure(); never raises. */
void etops_find_tensor_wrap(etops_state* st);
/* A new contiguous CPU torch.Tensor of `dtype` and `shape` from torch's allocator (as
 * torch.empty gives: resizable, version 0) into *out, its data pointer into *data: 1;
 * 0 (no exception) when the route is off; -1 with an exception (no memory). */
int etops_alloc_contiguous(etops_state* st, DLDataType dtype, int ndim, const int64_t* shape, PyObject** out,
                           void** data);

/* The memory a borrowed tensor covers as the caller gave it (before any copy):
 * bytes [first, end); first == end for an empty tensor. */
typedef struct {
  uintptr_t first, end;
} etops_span;

/* Keeps whatever a borrowed tensor needs alive until the call ends. */
typedef struct etops_keep {
  PyObject* objs[ETOPS_MAX_TENSORS * 2];
  int n;
  PyObject* overflow; /* list, for calls with more temporaries */
} etops_keep;

int etops_keep_add(etops_keep* keep, PyObject* obj); /* steals obj */
void etops_keep_release(etops_keep* keep);

/* What borrowing found about a tensor's layout. */
enum {
  LAYOUT_DENSE = 0,     /* contiguous or channels-last (or any order, under "preserve") */
  LAYOUT_NOT_DENSE = 1, /* a strided view with no ExecuTorch dim order */
  LAYOUT_PERMUTED = 2,  /* dense in a dim order no exported program hands a kernel */
  LAYOUT_OVERLAPPING = 3, /* not dense, and elements share memory (a stride 0 over a size > 1) */
  LAYOUT_CONJUGATE = 4,   /* a torch tensor with its lazy conjugate or negative bit set (tensor_fields.h):
                             DLPack carries neither, so the kernel gets a resolved copy (densify resolves it) */
  LAYOUT_CONTIGUOUS = 5,  /* LAYOUT_DENSE in contiguous order, from etops_borrow_torch's inline path
                             (tensor_inline.h) */
};

/* Layout mode of the calling thread (etops.layout): 0 "programs" (the default:
 * permuted tensors are copied to contiguous), 1 "preserve" (every dense tensor
 * reaches the kernel with its true dim order). */
extern _Thread_local int etops_layout_preserve;

/*
 * Fills `out` from a CPU tensor-like object with zero copy: torch tensors through
 * the DLPack C exchange API, others through __dlpack__. Sets a Python exception
 * naming `what` and returns -1 when the object is not a CPU tensor ExecuTorch can
 * represent. Returns LAYOUT_NOT_DENSE (without exception) for a strided view that
 * has no ExecuTorch dim order (LAYOUT_OVERLAPPING when it is expanded: writing it
 * would write one element through several indices), and LAYOUT_PERMUTED (with `out` filled in its true
 * dim order) for a dense tensor in an order other than contiguous or channels-last
 * while the thread's layout mode is not "preserve"; the caller decides whether to
 * copy or refuse.
 * `writable` refuses read-only producers. A torch.Tensor subclass with its own
 * __torch_dispatch__ (FakeTensor, TwoTensor), a meta tensor, one without storage
 * and one whose data pointer is NULL are refused (UnrepresentableError / TypeError)
 * before anything reads them. `span` (may be NULL) receives the bytes the tensor
 * covers as given.
 */
int etops_borrow_tensor(etops_state* st, PyObject* obj, etb_tensor* out, etops_keep* keep,
                        const char* op, const char* what, int writable, etops_span* span);

/* Raises the ValueError for a written tensor that is expanded (LAYOUT_OVERLAPPING):
 * writing it would write some elements twice. Returns -1. */
int etops_refuse_overlapping_write(const char* op, const char* what);
/* Raises etops.UnrepresentableError (a TypeError and a ValueError): a value torch
 * accepts that ExecuTorch's types cannot express (a memory format, a complex
 * Scalar, a dtype, a rank or size beyond its limits). Returns -1. */
int etops_unrepresentable(const char* fmt, ...);

/* Python list of ints from the sizes of a tensor. */
PyObject* etops_sizes_tuple(const etb_tensor* t);

/* Queued ExecuTorch log messages (from any thread) are waiting to be flushed. */
extern volatile int etops_logs_pending;

int etops_kernel_type_init(PyObject* module, etops_state* st);

/* Finds the grad probe's offsets from exact torch.Tensors torch says have no
 * autograd state (`plain`) and have it (`grad`, which require grad or have a
 * grad_fn); turns the probe on when exactly one layout fits every sample, off
 * otherwise. Returns 1 (on), 0 (off) or -1 (error). */
int etops_calibrate_grad_probe(etops_state* st, PyObject* plain, PyObject* grad);
int etops_delegate_type_init(PyObject* module, etops_state* st);

/* The backend handle of a Delegate object (NULL with TypeError for anything else). */
etb_delegate* etops_delegate_handle(etops_state* st, PyObject* obj);

/* Creates the CallFailure and Fault types (module attributes). */
int etops_failure_types_init(PyObject* module, etops_state* st);
/* Adds SlowPathTable, Handled and SLOW_PATH_ENTRIES (kernel_slow.c) to the module. */
int etops_slow_path_types_init(PyObject* module, etops_state* st);
/* The CallFailure of the call on this thread that just failed (etb_last_failure),
 * its fault placed at `placed` ((argument, where, offset): a probe's guard page
 * stopped it) unless NULL: what the slow path's `failed` and delegate_init's caller
 * get; `outs_untouched`: the kernel wrote etops' copies of the outs (a probe). */
PyObject* etops_last_failure(etops_state* st, PyObject* placed, int outs_untouched);

#endif /* ETOPS_NATIVE_H */
