/*
 * kernel_internal.h - what the files of the Kernel object share (never included
 * outside them): the KernelObject and its per-argument records, one call's scratch
 * memory, and the functions each file offers the others.
 *
 * A Kernel is one registered ExecuTorch operator (or one delegate) as a Python
 * callable. Its files, one concern each:
 *   kernel_scratch.c  the bump arena and the borrowed-tensor records of one call
 *   kernel_convert.c  Python argument -> etb_value, one converter per plan kind
 *   kernel_convert_list.c  the converters of number lists
 *   kernel_select.c   the kernel-key cache: which registered function runs
 *   kernel_specs.c    a delegate's tensor specs, checked on every call
 *   kernel_checks.c   torch's refusals that depend on the objects: shared memory, grad
 *   kernel_bind.c     a call's arguments bound to the plan (the remembered layout first)
 *   kernel_call.c     the call, step by step: bind, check, convert, run, results
 *   kernel_slow.c     the typed hand-offs to the Python slow path (SlowPathTable, Handled)
 *   kernel_signature.c  a call's argument signature (the hash the rings are keyed by)
 *   kernel_probe.c    the first call of a signature, its written tensors between guard pages
 *   kernel_memo.c     the last signature's converted call, reused by calls that match it
 *   kernel_alloc.c    the outs of calls without out=: remembered sizes, allocation
 *   kernel_type.c     construction and the Python-visible type
 *
 * Return convention of the functions below: an `int` result is 0 on success and
 * -1 with a Python exception set on failure; a pointer result is NULL with an
 * exception set on failure, unless the comment says otherwise.
 */
#ifndef ETOPS_KERNEL_INTERNAL_H
#define ETOPS_KERNEL_INTERNAL_H

#include "etops_native.h"
#include "kernel_slow.h"

/* One plan entry: a schema argument, or a fresh return slot after them. */
typedef struct {
  PyObject* name;     /* str, interned */
  const char* cname;  /* UTF-8 of name */
  int kind;           /* K_* */
  int flags;          /* F_* */
  PyObject* default_value; /* owned, or NULL */
  PyObject* extra;         /* enum map (dict) or NULL */
  Py_ssize_t fixed_len;    /* int[N]: N, else 0 */
  int alias_of;            /* return slots: the out argument it is, or -1 (fresh value) */
  int has_default_value;   /* default_converted holds the default, converted once */
  etb_value default_converted;
} ArgSpec;

#define CACHE_KEY_MAX 72
#define CACHE_ENTRIES 4
/* Argument signatures a kernel remembers torch accepted (a ring). */
#define VALIDATED_SIGNATURES 32

/* An index check of the rules table's footprint part done in C (kernel_footprint.c):
 * every value of integer tensor argument `index` lies in [0, n), n the size of dim
 * `dim_arg`'s value (or `fixed_dim` when dim_arg < 0) of tensor argument `source`. */
#define ETOPS_MAX_INDEX_RANGES 4
typedef struct {
  int8_t index, source, dim_arg, fixed_dim;
} IndexRange;
/* (written, other) argument pairs a kernel remembers torch lets share all memory. */
#define FULL_ALIAS_PAIRS 8
/* Input signatures of calls without out= whose outs a kernel remembers (a ring). */
#define ALLOCATION_SIGNATURES 16

/* One remembered kernel-key -> function resolution (kernel_select.c). */
typedef struct {
  int len; /* -1: empty */
  uint8_t key[CACHE_KEY_MAX];
  etb_kernel_fn fn;
} CacheEntry;

/* What the tensor of one argument must be, checked in C on every call (a delegate's
 * input and output specs, kernel_specs.c): dtype, dim order, sizes when static. */
typedef struct {
  int8_t dtype; /* -1: no spec for this argument */
  uint8_t ndim;
  uint8_t check_sizes;
  int32_t sizes[ETB_MAX_DIM];
  uint8_t dim_order[ETB_MAX_DIM];
} TensorSpec;

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  etops_state* st;
  PyObject* module;
  PyObject* py_name;
  char* op_name;
  int nargs;        /* user-visible schema arguments, outs included */
  int npositional;  /* how many of them may be passed positionally */
  int nslots;       /* nargs + fresh return slots */
  int nreturns;
  int returns[ETOPS_MAX_ARGS]; /* >= 0: argument index; < 0: -(slot+1) of a return slot */
  ArgSpec args[ETOPS_MAX_ARGS];
  PyObject* info;
  SlowPathTable* slow;
  int has_precheck; /* call the slow path's abort guard before every call */
  int contiguous_only; /* every tensor reaches the kernel contiguous (the rules table's contiguous_only) */
  /* callable(argument, dim order) warning that the kernel is known silently wrong on
   * a layout (the rules table's wrong_layouts), or NULL: called when a dense tensor
   * not in contiguous order reaches the kernel as it is outside "preserve" mode */
  PyObject* warn_layout;
  /* torch's checks of the call (slow path `validate`), once per argument
   * signature: the signatures (call_signature) of calls torch accepted, and for
   * each whether its outs go STATIC (torch fixed their shapes, and
   * static_outs_allowed) */
  int validates;
  int validated_count, validated_next;
  uint64_t validated[VALIDATED_SIGNATURES];
  uint8_t validated_static_outs[VALIDATED_SIGNATURES];
  /* per ring entry: a call of that signature ran probed and wrote nothing outside
   * its tensors (kernel_probe.c); until then its calls are probes. The ring holds
   * the signatures of every kernel's calls with outs (validating or not). */
  uint8_t probed[VALIDATED_SIGNATURES];
  /* outs may go STATIC: the kernel validates and writes no argument but its outs
   * (a kernel that wants another out shape is called again, which must not
   * mutate an input twice) */
  int static_outs_allowed;
  /* calls without out= (kernel_alloc.c): whether this kernel's outs may be
   * allocated in C (every out one tensor, outs STATIC, no precheck; cleared for
   * data-dependent outs), and per input signature (alloc_signature) what the
   * slow path allocated: a tuple of (shape, strides, dtype) per out, or None
   * (this signature always takes the slow path) */
  int allocates;
  int allocated_count, allocated_next;
  uint64_t allocated[ALLOCATION_SIGNATURES];
  PyObject* allocated_outs[ALLOCATION_SIGNATURES];
  /* full aliases torch allows (kernel_checks.c): (written argument, other argument,
   * snapshot) whose tensors the slow path found the same memory and layout, as
   * torch's out= accepts them for this operator (a ring); snapshot 1: the kernel may
   * read an element after writing another, so the input is read from a copy */
  int full_alias_count, full_alias_next;
  int8_t full_alias[FULL_ALIAS_PAIRS][3];
  PyObject* delegate;  /* a Delegate (delegate.c) run instead of a registered kernel, or NULL */
  etb_delegate* delegate_handle;
  TensorSpec* specs;   /* per argument, what its tensor must be (delegates), or NULL */
  /* kernel function cache, valid for registry generation `gen` */
  uint64_t gen;
  int has_specialized;
  etb_kernel_fn fallback_fn;
  CacheEntry cache[CACHE_ENTRIES];
  int cache_next;
  /* whether an argument converts to a string or a list slot (etb_call's has_lists) */
  int has_lists;
  /* the outs (argument indices), for setting their shape dynamism */
  int nouts;
  uint8_t out_args[ETOPS_MAX_ARGS];
  /* The layout of the last call bound without error (kernel_call.c's bind_arguments),
   * so a loop of calls from one call site (the same keyword-names tuple object, held
   * here so its address cannot be reused) binds without searching: where each keyword
   * goes, what fills each argument not given (its default, None, or NULL for an out),
   * whether an out is not given, and the outs given (None there: missing). */
  int bind_valid;
  PyObject* bind_kwnames; /* owned, or NULL: positional arguments only */
  int bind_nargs, bind_nkw, bind_nfill, bind_nouts_given, bind_missing_out;
  uint8_t bind_kw_arg[ETOPS_MAX_ARGS];
  uint8_t bind_fill_arg[ETOPS_MAX_ARGS];
  PyObject* bind_fill_value[ETOPS_MAX_ARGS]; /* borrowed from args[].default_value, or Py_None, or NULL */
  uint8_t bind_out_given[ETOPS_MAX_ARGS];
  /* the last steady call's converted slots and tensors (kernel_memo.c), or NULL */
  struct CallMemo* memo;
  uint64_t memo_hits; /* calls that matched a memo (for tests: Kernel._memo_hits) */
  /* the rules table's index checks done here (kernel_footprint.c), on every call */
  int nranges;
  IndexRange ranges[ETOPS_MAX_INDEX_RANGES];
  /* etops_fault_epoch when this kernel last faulted, 0 never (fault_state.c): its
   * calls run guarded while it is at least etops_guarded_from */
  uint64_t faulted_epoch;
} KernelObject;

/* After a trapped fault of `k` at `site` (FAULT_SITE_*, fault_state.h): its later
 * calls run guarded, and all calls when the site taints the process. */
void etops_note_fault(KernelObject* k, int site);

/* ---- kernel_scratch.c: scratch memory of one call -------------------------------- */

/* A bump arena: memory handed out never moves and is freed all at once. */
typedef struct ArenaBlock ArenaBlock;

typedef struct {
  _Alignas(16) unsigned char inline_buf[6144];
  size_t used;
  ArenaBlock* blocks;
} Arena;

/* etb_value.len of an ETB_TENSOR that wraps a Python number (kernel_convert.c); the
 * bridge never reads len for tensors, call_signature hashes it. */
#define WRAPPED_NUMBER_LEN 1

/* One 64-bit word into a signature hash: a multiply and a shift, not a loop over
 * bytes (this runs on every call of a validating kernel). */
static inline uint64_t signature_mix(uint64_t h, uint64_t v) {
  h = (h ^ v) * 0x9E3779B97F4A7C15ULL;
  return h ^ (h >> 29);
}

/* A hash of what torch's checks of a call depend on: every tensor's dtype,
 * rank and sizes, ints, bools and int lists by value, the tags of the rest
 * (doubles by kind: their values do not change dtypes or shapes). */
uint64_t call_signature(const etb_value* vals, int n);

/* A borrowed tensor and the Python object it came from (argument `arg`). A
 * written tensor in a permuted dim order is borrowed as a contiguous copy `obj`
 * whose contents go back to the user's tensor `copy_back_to` after the call. */
typedef struct {
  etb_tensor t;
  PyObject* obj;
  PyObject* copy_back_to; /* borrowed from the call's arguments; NULL: none */
  int arg;
  PyObject* given;   /* the caller's object (borrowed): obj, or what obj is a copy of */
  etops_span span;   /* the bytes `given` covers (kernel_checks.c compares them) */
  uint8_t as_given;  /* t is `given` itself (no copy): its layout is the caller's */
  uint8_t written;   /* an out or a mutable argument: the kernel writes it */
  uint8_t inline_contiguous; /* a torch.Tensor borrowed by etops_borrow_torch as LAYOUT_CONTIGUOUS */
} TensorRec;

typedef struct {
  Arena arena;
  etops_keep keep;            /* what the borrowed tensors need alive */
  TensorRec** recs;           /* every borrowed tensor, in conversion order */
  int nrecs, caprecs;
  TensorRec* inline_recs[ETOPS_MAX_TENSORS];
  int64_t numel_total;        /* elements of all borrowed tensors */
  int ncopies;                /* tensors borrowed as dense copies (borrow_dense_copy) */
  /* DLTensors torch's exchange API gave a call memo that did not match (kernel_memo.c),
   * by argument: bit i of pre_mask says pre_dl[i] is argument i's, used once */
  uint64_t pre_mask;
  const DLTensor* pre_dl;
  /* the versions check_written_tensors found for the written torch tensors, which
   * bump_written_versions bumps after the call; bump_by_object: some are not here
   * (the fields are off, or more tensors than room), bumped through torch instead */
  uint32_t* versions[ETOPS_MAX_TENSORS];
  int nversions, bump_by_object;
  /* a number argument (or list item) was given as an object other than an exact int,
   * float or bool (a 0-dim tensor, a numpy scalar, an int subclass): it converts to
   * the same value, so the signature cannot tell it apart, but torch may refuse its
   * type, so torch's checks see every such call (kernel_call.c's validate_once) */
  int odd_numbers;
} CallScratch;

/* Grows the arena by a block that holds at least n bytes, and takes n from it. */
void* arena_alloc_block(Arena* a, size_t n);

/* 16-byte aligned memory valid until scratch_release, or NULL with MemoryError.
 * Inline: the inline buffer serves every call with few and short lists. */
static inline void* scratch_alloc(CallScratch* cs, size_t n) {
  Arena* a = &cs->arena;
  n = (n + 15) & ~(size_t)15;
  if (a->used + n <= sizeof(a->inline_buf)) {
    void* p = a->inline_buf + a->used;
    a->used += n;
    return p;
  }
  return arena_alloc_block(a, n);
}

/* Makes room for more TensorRec pointers (out of line: past ETOPS_MAX_TENSORS). */
int scratch_grow_recs(CallScratch* cs);

/* A fresh, recorded TensorRec (fields unset). */
static inline TensorRec* scratch_new_rec(CallScratch* cs) {
  if (cs->nrecs == cs->caprecs && scratch_grow_recs(cs) < 0) return NULL;
  TensorRec* r = (TensorRec*)scratch_alloc(cs, sizeof(TensorRec));
  if (r == NULL) return NULL;
  cs->recs[cs->nrecs++] = r;
  return r;
}

/* Empty scratch; cannot fail. */
static inline void scratch_init(CallScratch* cs) {
  cs->arena.used = 0;
  cs->arena.blocks = NULL;
  cs->keep.n = 0;
  cs->keep.overflow = NULL;
  cs->recs = cs->inline_recs;
  cs->nrecs = 0;
  cs->caprecs = ETOPS_MAX_TENSORS;
  cs->numel_total = 0;
  cs->ncopies = 0;
  cs->pre_mask = 0;
  cs->nversions = 0;
  cs->bump_by_object = 0;
  cs->odd_numbers = 0;
}

/* Drops the kept objects and frees the arena's blocks. */
void scratch_release(CallScratch* cs);

/* ---- kernel_footprint.c ------------------------------------------------------------ */

/* The first of the kernel's index ranges a value of the converted call `vals` falls
 * outside (its position in k->ranges), or -1 when every value is within. */
int index_ranges_broken(const KernelObject* k, const etb_value* vals);

/* ---- kernel_convert.c ------------------------------------------------------------- */

/* Converts argument i's value `o` into `v` by the plan's kind (tensors borrowed into
 * cs; cs may be NULL only for kinds that borrow nothing: plan-time defaults). */
int convert_arg(KernelObject* k, CallScratch* cs, int i, PyObject* o, etb_value* v);
/* convert_arg for a K_TENSOR argument `a` (= &k->args[i]) whose value is not None
 * (the call path's common case, called directly). */
int convert_tensor_arg(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v);
/* What the converters share: -1 with "argument 'name' must be <expected>, not <type>"; */
int type_error(KernelObject* k, const ArgSpec* a, const char* expected, PyObject* got);
/* a number argument as int64 (bools and floats refused) or double; */
int as_int64(KernelObject* k, const ArgSpec* a, PyObject* o, int64_t* out);
int as_double(KernelObject* k, const ArgSpec* a, PyObject* o, double* out);
/* a sequence argument as a fast sequence the call keeps alive (an int for int[N]
 * repeated N times), NULL with an exception; */
PyObject* as_sequence(KernelObject* k, CallScratch* cs, const ArgSpec* a, PyObject* o, const char* expected);
/* notes a number given as another object than an exact int, float, bool or plain
 * numpy number (CallScratch.odd_numbers). */
void note_number_type(CallScratch* cs, PyObject* o);

/* ---- kernel_convert_list.c: int[], float[], bool[] (an ArgConverter each) ---------- */

int convert_int_list(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v);
int convert_float_list(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v);
int convert_bool_list(KernelObject* k, CallScratch* cs, int i, const ArgSpec* a, PyObject* o, etb_value* v);

/* ---- kernel_checks.c -------------------------------------------------------------- */

/* What torch refuses of any call with outs, checked on every call once its arguments
 * are borrowed: a tensor that requires grad while grad mode is on (unless etops
 * allocated the outs: `outs_allocated` for outs kernel_alloc.c made, the slow path's
 * `outs_allocated` for the others), and a written tensor (out or mutable argument)
 * sharing memory with another tensor of the call other than as torch allows (the
 * slow path's `overlaps` decides when the byte ranges meet). 0: the call may go on;
 * -1: refused (exception set). */
int check_written_tensors(KernelObject* k, CallScratch* cs, PyObject* const* bound, int outs_allocated);
/* After a call that wrote the caller's tensors: bumps the version counter of each
 * written torch tensor as the caller gave it (outs and mutable arguments; the
 * versions check_written_tensors found), as torch does after an out= or in-place
 * write. 0, or -1 with an exception. */
int bump_written_versions(const KernelObject* k, const CallScratch* cs);

/* ---- kernel_select.c -------------------------------------------------------------- */

/* Forgets cached resolutions and re-reads the registry for this operator. */
void refresh_registry_view(KernelObject* k, uint64_t gen);
/* The function ExecuTorch would pick for these values' tensors, or NULL (no
 * exception set) when none matches. */
etb_kernel_fn select_kernel(KernelObject* k, const etb_value* vals);

/* ---- kernel_specs.c --------------------------------------------------------------- */

/* Reads `specs` (one entry per argument: None or (et_dtype, sizes or None, dim_order))
 * into k->specs. */
int parse_specs(KernelObject* k, PyObject* specs);
/* 1 when every tensor matches its spec and no out may overlap an input, else 0. */
int matches_specs(const KernelObject* k, const etb_value* vals);

/* ---- kernel_alloc.c --------------------------------------------------------------- */

/* Whether a kernel with this plan may allocate outs in C (set once, at construction). */
int allocation_allowed(const KernelObject* k);
/* The ring entry remembered for this call without out= (vals: outs ETB_NONE; *sig
 * its signature), -1 (none yet: the slow path allocates, then remember_outs) or
 * -2 (never: inputs borrowed as copies lost the layouts torch sizes outs by). */
int find_allocation(KernelObject* k, const CallScratch* cs, const etb_value* vals, uint64_t* sig);
/* Whether the entry says C allocates (else the signature keeps the slow path). */
int allocation_known(const KernelObject* k, int slot);
/* Allocates the outs of entry `slot` into bound[] (new references, also in
 * fresh[], *nfresh of them) for the caller to convert. */
int allocate_outs(KernelObject* k, int slot, PyObject** bound, PyObject** fresh, int* nfresh);
/* After the slow path allocated outs for signature `sig`: remembers its answer to
 * `outs_to_remember` (a tuple of (shape, strides, dtype) per out, None: this
 * signature keeps the slow path, False: every signature does). */
int remember_outs(KernelObject* k, uint64_t sig, PyObject* outs);
/* The entry of `slot` keeps the slow path from now on. */
void forget_allocation(KernelObject* k, int slot);
/* Drops every remembered entry (the kernel's clear). */
void clear_allocations(KernelObject* k);
/* The slow path allocates the outs and makes the call (bound outs missing), then,
 * when `remember`, the kernel remembers what it allocated for signature `sig`:
 * the call's result. */
PyObject* allocate_in_python(KernelObject* k, CallScratch* cs, PyObject** bound, int remember, uint64_t sig);
/* A call whose outs C allocated (entry `slot`) that did not go as remembered
 * (torch's checks or the kernel wanted other outs): made again by the slow path
 * as before, exactly, with no out given (the kernel writes nothing but its outs:
 * static_outs_allowed); the signature keeps the slow path from now on. (A kernel
 * that fails on them fails as on the slow path's outs: nothing runs twice.) */
PyObject* allocate_again_in_python(KernelObject* k, CallScratch* cs, PyObject** bound, int slot);
/* Converts the outs allocate_outs put in bound[]. */
int convert_outs(KernelObject* k, CallScratch* cs, PyObject** bound, etb_value* vals);
/* What a call with allocated outs returns for a schema that returns nothing: the
 * out, or a tuple of them (as the slow path's outs_as_result). */
PyObject* allocated_outs_result(const KernelObject* k, PyObject* const* bound);
/* Whether no out was given (allocate_outs allocates every out); never fails. */
int no_out_given(const KernelObject* k, PyObject* const* bound);

/* Bytes per element of an ExecuTorch ScalarType (the widest plain size for an
 * unknown one). */
size_t tensor_element_size(int8_t dtype);
/* 0 when every dtype tensor.c borrows has its element size here; -1: ImportError set. */
int check_element_sizes(void);
/* [first, end) of the bytes a tensor covers by its sizes and (non-negative) strides. */
void tensor_byte_range(const etb_tensor* t, uintptr_t* first, uintptr_t* end);

/* ---- kernel_probe.c --------------------------------------------------------------- */

#include "kernel_probe.h" /* Probe (needs TensorRec, above) */

/* Moves every tensor the kernel may write (and every tensor inside one) into guarded
 * memory for this call. 0, or -1 with an exception (the caller runs probe_end). */
int probe_begin(KernelObject* k, CallScratch* cs, Probe* p);
/* Whether `address` lies in a probe region: its argument, "past the end" /
 * "before the start" / "inside", and the distance in bytes. */
int probe_locate(const Probe* p, uint64_t address, const char** name, const char** where, int64_t* offset);
/* Ends the probe (nothing when none is active): the tensors get their memory back,
 * and when `copy_back` (the kernel succeeded) their results, unless a write past a
 * tensor changed the canary: then -1 with KernelCrashed set and nothing copied. */
int probe_end(const KernelObject* k, Probe* p, int copy_back);

/* ---- kernel_memo.c ---------------------------------------------------------------- */

#include "kernel_memo.h" /* the call memo (needs KernelObject and CallScratch, above) */

/* ---- kernel_slow.c ---------------------------------------------------------------- */

/* The call's bound arguments as the tuple every entry takes (NULL: None). */
PyObject* slow_values(const KernelObject* k, PyObject* const* bound);
/* Calls `entry` with (kernel, values of bound, extra or None): its answer. */
PyObject* slow_call(KernelObject* k, SlowEntry entry, PyObject* const* bound, PyObject* extra);
/* Calls `entry` with these arguments (the entries that take others: SLOW_RESIZED, SLOW_SNAPSHOT, SLOW_OVERLAPS). */
PyObject* slow_call_args(KernelObject* k, SlowEntry entry, PyObject* const* args, size_t nargs);
/* SLOW_PRECHECK's answer (SlowAnswer). */
int slow_precheck(KernelObject* k, PyObject* const* bound, PyObject** result);
/* SLOW_VALIDATE's answer (SlowAnswer); *static_outs when SLOW_GO_ON. */
int slow_validate(KernelObject* k, PyObject* const* bound, PyObject** result, int* static_outs);
/* An entry that answers None or raises: 0 accepted, -1 raised. */
int slow_accepts(KernelObject* k, SlowEntry entry, PyObject* const* bound, PyObject* extra);
/* An entry that always raises: -1 (a TypeError when it answered instead). */
int slow_refuses(KernelObject* k, SlowEntry entry, PyObject* const* bound, PyObject* extra);

/* ---- kernel_bind.c ---------------------------------------------------------------- */

/* Binds a call whose layout (kwnames object, positional count) is the remembered
 * one: what bind_arguments_searched would give, without searching. */
static inline void bind_remembered(const KernelObject* k, PyObject* const* args, Py_ssize_t nargs, PyObject** bound,
                                   int* missing_out) {
  for (Py_ssize_t i = 0; i < nargs; i++) {
    PyObject* a = args[i];
    __asm__("" : "+r"(a)); /* a few pointers: a loop, not the memcpy call gcc would make of it */
    bound[i] = a;
  }
  for (int j = 0; j < k->bind_nkw; j++) bound[k->bind_kw_arg[j]] = args[nargs + j];
  for (int f = 0; f < k->bind_nfill; f++) bound[k->bind_fill_arg[f]] = k->bind_fill_value[f];
  int missing = k->bind_missing_out;
  for (int o = 0; o < k->bind_nouts_given; o++) missing |= bound[k->bind_out_given[o]] == Py_None;
  *missing_out = missing;
}

/* Binds positional and keyword arguments to the plan: bound[i] per argument (defaults
 * filled, NULL for an out not given), *missing_out whether an out is missing; the
 * layout is remembered for the next call. -1 with a TypeError naming the argument. */
int bind_arguments_searched(KernelObject* k, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                            PyObject** bound, int* missing_out);

/* bind_arguments_searched, the remembered layout first (a loop of calls from one call site). */
static inline int bind_arguments(KernelObject* k, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                                 PyObject** bound, int* missing_out) {
  if (k->bind_valid && kwnames == k->bind_kwnames && nargs == k->bind_nargs) {
    bind_remembered(k, args, nargs, bound, missing_out);
    return 0;
  }
  return bind_arguments_searched(k, args, nargs, kwnames, bound, missing_out);
}

/* ---- kernel_call.c ---------------------------------------------------------------- */

PyObject* kernel_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames);

#endif /* ETOPS_KERNEL_INTERNAL_H */
