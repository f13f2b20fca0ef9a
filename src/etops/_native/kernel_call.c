/*
 * kernel_call.c - the call of a Kernel (its vectorcall): bind positional and keyword
 * arguments to the plan, convert each one (kernel_convert.c), check a delegate's
 * specs (kernel_specs.c), check a new argument signature with torch (its outs go
 * STATIC once torch fixed their shapes), pick the function (kernel_select.c), run
 * it through the bridge and return what torch's out variant returns. Nothing on this path
 * allocates Python objects for a call with correctly sized outs.
 *
 * A call without out= whose input signature the kernel met before allocates its
 * outs here (kernel_alloc.c) and runs as a call with outs. Everything unusual is
 * handed to the Python slow-path object given at construction: missing outs
 * (allocate, the first time), a failed kernel (resize outs and retry,
 * or raise), a kernel key with no kernel (raise), outs the kernel resized.
 */
#include "kernel_internal.h"
#include "fault_state.h"
#include "fault_trap.h"

#include <string.h>

/* ---- hand-offs to the slow path ---------------------------------------------------
 * The Python object given as slow_path (etops/slow_path.py's SlowPath) has one
 * method per entry point below. Each takes (kernel, bound, extra): `bound` is the
 * arguments exactly as this call bound them, one item per plan argument in plan
 * order (defaults filled, missing outs as None), so Python never binds again;
 * `extra` is the failure (a CallFailure, call_failure.c) for SLOW_FAILED, else None.
 * SLOW_RESIZED takes (kernel, out object, new sizes, has data, argument name) instead. */
typedef enum {
  SLOW_ALLOCATE_AND_CALL, /* outs are missing: size them, allocate, call again */
  SLOW_PRECHECK,          /* before every call of a kernel known to abort on some inputs */
  SLOW_EXPLAIN_MISMATCH,  /* a delegate's tensor does not match its spec: raise, or accept */
  SLOW_FAILED,            /* the kernel failed: resize outs and call again, or raise */
  SLOW_NO_KERNEL,         /* no registered kernel matches the tensors' key: raise */
  SLOW_RESIZED,           /* the kernel resized an out: mirror it on the Python object */
  SLOW_VALIDATE,          /* a new argument signature: torch's checks, raise if torch refuses */
  SLOW_OUTS_TO_REMEMBER,  /* after an allocation: the outs' (shape, strides, dtype), for kernel_alloc.c */
  SLOW_FOOTPRINT_REFUSED, /* an index value outside the dim it indexes (kernel_footprint.c): raise */
  SLOW_GUARDED,           /* the kernel faulted before, or the process is tainted: run it guarded */
  SLOW_ENTRY_COUNT
} SlowEntry;

static const char* const SLOW_PATH_METHODS[SLOW_ENTRY_COUNT] = {
    [SLOW_ALLOCATE_AND_CALL] = "allocate_and_call",
    [SLOW_PRECHECK] = "precheck",
    [SLOW_EXPLAIN_MISMATCH] = "explain_mismatch",
    [SLOW_FAILED] = "failed",
    [SLOW_NO_KERNEL] = "no_kernel",
    [SLOW_RESIZED] = "resized",
    [SLOW_VALIDATE] = "validate",
    [SLOW_OUTS_TO_REMEMBER] = "outs_to_remember",
    [SLOW_FOOTPRINT_REFUSED] = "footprint_refused",
    [SLOW_GUARDED] = "guarded",
};

/* Calls the slow path's `entry` with the bound arguments (NULL: a missing out). */
static PyObject* slow_path(KernelObject* k, SlowEntry entry, PyObject* const* bound, PyObject* extra) {
  /* a handler a library installed since (faulthandler's and signal.signal are
   * wrapped at import: etops/handler_chain.py) would see kernel faults first:
   * etops' goes back on top, chaining to it,
   * when a call meets a new signature (not on the prechecks every call of a guarded
   * kernel makes: five sigaction queries each) */
  if ((entry == SLOW_VALIDATE || entry == SLOW_ALLOCATE_AND_CALL) && etf_install() != 0)
    return PyErr_SetFromErrno(PyExc_OSError);
  PyObject* values = PyTuple_New(k->nargs);
  if (values == NULL) return NULL;
  for (int i = 0; i < k->nargs; i++) PyTuple_SET_ITEM(values, i, Py_NewRef(bound[i] != NULL ? bound[i] : Py_None));
  PyObject* res = PyObject_CallMethod(k->slow, SLOW_PATH_METHODS[entry], "OOO", (PyObject*)k, values,
                                      extra != NULL ? extra : Py_None);
  Py_DECREF(values);
  return res;
}

/* A slow-path check that returns nothing when the call may go on. */
static int slow_check(KernelObject* k, SlowEntry entry, PyObject* const* bound) {
  PyObject* ok = slow_path(k, entry, bound, NULL);
  if (ok == NULL) return -1;
  Py_DECREF(ok);
  return 0;
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
static int validate_once(KernelObject* k, const etb_value* vals, PyObject* const* bound, int odd_numbers,
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
    PyObject* res = slow_path(k, SLOW_VALIDATE, bound, NULL);
    if (res == NULL) return -1;
    if (PyTuple_Check(res) && PyTuple_GET_SIZE(res) == 1) { /* never remembered: these outs change shape */
      *handled = Py_NewRef(PyTuple_GET_ITEM(res, 0));
      Py_DECREF(res);
      return 1;
    }
    static_outs = k->static_outs_allowed && res == Py_True;
    Py_DECREF(res);
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

static PyObject* return_value(const etb_value* v) {
  switch (v->tag) {
    case ETB_INT: return PyLong_FromLongLong(v->u.i);
    case ETB_DOUBLE: return PyFloat_FromDouble(v->u.d);
    case ETB_BOOL: return PyBool_FromLong(v->u.b);
    default: Py_RETURN_NONE;
  }
}

static PyObject* build_result(KernelObject* k, PyObject** bound, const etb_value* vals) {
  if (k->nreturns == 0) Py_RETURN_NONE;
  if (k->nreturns == 1) {
    int r = k->returns[0];
    if (r >= 0) return Py_NewRef(bound[r]);
    return return_value(&vals[k->nargs + (-r - 1)]);
  }
  PyObject* tup = PyTuple_New(k->nreturns);
  if (tup == NULL) return NULL;
  for (int i = 0; i < k->nreturns; i++) {
    int r = k->returns[i];
    PyObject* item = r >= 0 ? Py_NewRef(bound[r]) : return_value(&vals[k->nargs + (-r - 1)]);
    if (item == NULL) {
      Py_DECREF(tup);
      return NULL;
    }
    PyTuple_SET_ITEM(tup, i, item);
  }
  return tup;
}

/* Binds a call whose layout (kwnames object, positional count) is the remembered
 * one: what bind_arguments' search would give, without searching. */
static inline void bind_remembered(const KernelObject* k, PyObject* const* args, Py_ssize_t nargs, PyObject** bound,
                                   int* missing_out) {
  for (Py_ssize_t i = 0; i < nargs; i++) bound[i] = args[i];
  for (int j = 0; j < k->bind_nkw; j++) bound[k->bind_kw_arg[j]] = args[nargs + j];
  for (int f = 0; f < k->bind_nfill; f++) bound[k->bind_fill_arg[f]] = k->bind_fill_value[f];
  int missing = k->bind_missing_out;
  for (int o = 0; o < k->bind_nouts_given; o++) missing |= bound[k->bind_out_given[o]] == Py_None;
  *missing_out = missing;
}

static int bind_arguments(KernelObject* k, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                          PyObject** bound, int* missing_out) {
  if (k->bind_valid && kwnames == k->bind_kwnames && nargs == k->bind_nargs) {
    bind_remembered(k, args, nargs, bound, missing_out);
    return 0;
  }
  if (nargs > k->npositional) {
    if (k->npositional < k->nargs) {
      PyErr_Format(PyExc_TypeError,
                   "%s takes at most %d positional arguments but %zd were given (argument '%s' is keyword-only)",
                   k->op_name, k->npositional, nargs, k->args[k->npositional].cname);
    } else {
      PyErr_Format(PyExc_TypeError, "%s takes at most %d positional arguments but %zd were given", k->op_name,
                   k->npositional, nargs);
    }
    return -1;
  }
  /* one loop (two would become memset and memcpy calls, dearer for a few args) */
  for (int i = 0; i < k->nargs; i++) bound[i] = i < nargs ? args[i] : NULL;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  uint8_t kw_arg[ETOPS_MAX_ARGS];
  for (Py_ssize_t j = 0; j < nkw; j++) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, j);
    int found = -1;
    for (int i = 0; i < k->nargs; i++) {
      if (k->args[i].name == key) {
        found = i;
        break;
      }
    }
    if (found < 0) {
      for (int i = 0; i < k->nargs; i++) {
        if (PyUnicode_Compare(k->args[i].name, key) == 0) {
          found = i;
          break;
        }
      }
    }
    if (found < 0) {
      PyErr_Format(PyExc_TypeError, "%s got an unexpected keyword argument '%U'", k->op_name, key);
      return -1;
    }
    if (bound[found] != NULL) {
      PyErr_Format(PyExc_TypeError, "%s got multiple values for argument '%U'", k->op_name, key);
      return -1;
    }
    bound[found] = args[nargs + j];
    kw_arg[j] = (uint8_t)found; /* nkw <= nargs: each keyword bound one argument */
  }
  *missing_out = 0;
  int nfill = 0, nouts_given = 0;
  uint8_t fill_arg[ETOPS_MAX_ARGS], out_given[ETOPS_MAX_ARGS];
  for (int i = 0; i < k->nargs; i++) {
    const ArgSpec* a = &k->args[i];
    if (bound[i] != NULL && (a->flags & F_OUT)) out_given[nouts_given++] = (uint8_t)i;
    if (bound[i] != NULL && !(bound[i] == Py_None && (a->flags & F_OUT))) continue;
    if (bound[i] == NULL) fill_arg[nfill++] = (uint8_t)i;
    if (a->flags & F_OUT) {
      *missing_out = 1;
    } else if (a->flags & F_HAS_DEFAULT) {
      bound[i] = a->default_value;
    } else if (a->flags & F_OPTIONAL) {
      bound[i] = Py_None;
    } else {
      PyErr_Format(PyExc_TypeError, "%s missing required argument '%s'%s", k->op_name, a->cname,
                   (a->flags & F_KWONLY) ? " (keyword-only)" : "");
      return -1;
    }
  }
  /* remembered for the next call of this layout */
  Py_XINCREF(kwnames);
  Py_XSETREF(k->bind_kwnames, kwnames);
  k->bind_nargs = (int)nargs;
  k->bind_nkw = (int)nkw;
  memcpy(k->bind_kw_arg, kw_arg, (size_t)nkw);
  k->bind_nfill = nfill;
  int missing_not_given = 0;
  for (int f = 0; f < nfill; f++) {
    k->bind_fill_arg[f] = fill_arg[f];
    k->bind_fill_value[f] = bound[fill_arg[f]]; /* NULL for an out */
    missing_not_given |= bound[fill_arg[f]] == NULL;
  }
  k->bind_missing_out = missing_not_given;
  k->bind_nouts_given = nouts_given;
  memcpy(k->bind_out_given, out_given, (size_t)nouts_given);
  k->bind_valid = 1;
  return 0;
}

/* ---- calls without out= ---------------------------------------------------------- */

/* The slow path allocates the outs and makes the call (bound outs missing), then,
 * when `remember`, the kernel remembers what it allocated for signature `sig`. */
static PyObject* allocate_in_python(KernelObject* k, CallScratch* cs, PyObject** bound, int remember,
                                    uint64_t sig) {
  etops_keep_release(&cs->keep);
  PyObject* result = slow_path(k, SLOW_ALLOCATE_AND_CALL, bound, NULL);
  if (result == NULL || !remember || !k->allocates) return result;
  PyObject* outs = slow_path(k, SLOW_OUTS_TO_REMEMBER, bound, NULL);
  if (outs == NULL || remember_outs(k, sig, outs) < 0) Py_CLEAR(result);
  Py_XDECREF(outs);
  return result;
}

/* A call whose outs kernel_alloc.c allocated (entry `slot`) that did not go as
 * remembered (torch's checks or the kernel wanted other outs): made again by the
 * slow path as before, exactly, with no out given (the kernel writes nothing but
 * its outs: static_outs_allowed), and the signature keeps the slow path from now
 * on. (A kernel that fails on them fails as on the slow path's outs: the error
 * branch raises it, nothing runs twice.) */
static PyObject* allocate_again_in_python(KernelObject* k, CallScratch* cs, PyObject** bound, int slot) {
  forget_allocation(k, slot);
  for (int i = 0; i < k->nargs; i++) {
    if (k->args[i].flags & F_OUT) bound[i] = NULL;
  }
  return allocate_in_python(k, cs, bound, 0, 0);
}

/* Converts the outs allocate_outs put in bound[]. */
static int convert_outs(KernelObject* k, CallScratch* cs, PyObject** bound, etb_value* vals) {
  for (int i = 0; i < k->nargs; i++) {
    if ((k->args[i].flags & F_OUT) && convert_arg(k, cs, i, bound[i], &vals[i]) < 0) return -1;
  }
  return 0;
}

/* What a call with allocated outs returns for a schema that returns nothing: the
 * out, or a tuple of them (as the slow path's outs_as_result). */
static PyObject* allocated_outs_result(KernelObject* k, PyObject** bound) {
  PyObject* outs[ETOPS_MAX_ARGS];
  int n = 0;
  for (int i = 0; i < k->nargs; i++) {
    if (k->args[i].flags & F_OUT) outs[n++] = bound[i];
  }
  if (n == 1) return Py_NewRef(outs[0]);
  PyObject* tup = PyTuple_New(n);
  for (int j = 0; tup != NULL && j < n; j++) PyTuple_SET_ITEM(tup, j, Py_NewRef(outs[j]));
  return tup;
}

/* Whether no out was given (allocate_outs allocates every out). */
static int no_out_given(const KernelObject* k, PyObject* const* bound) {
  for (int i = 0; i < k->nargs; i++) {
    if ((k->args[i].flags & F_OUT) && bound[i] != NULL && bound[i] != Py_None) return 0;
  }
  return 1;
}

static int any_resized(const CallScratch* cs) {
  for (int i = 0; i < cs->nrecs; i++) {
    if (cs->recs[i]->t.resized) return 1;
  }
  return 0;
}

/* (argument, where, offset) when the last call's fault lies in the probe's guarded
 * memory (a write past a tensor the guard page stopped), else NULL. */
static PyObject* probe_site(const Probe* probe) {
  const char *name, *where;
  int64_t offset;
  if (!probe_locate(probe, etb_last_failure()->fault.address, &name, &where, &offset)) return NULL;
  return Py_BuildValue("(ssL)", name, where, (long long)offset);
}

/* The rules table's index checks (kernel_footprint.c) of the converted call: -1 with
 * the footprint check's refusal raised when a value lies outside the dim it indexes. */
static int refuse_index_ranges(KernelObject* k, const etb_value* vals, PyObject* const* bound) {
  int broken = index_ranges_broken(k, vals);
  if (broken < 0) return 0;
  PyObject* res = slow_path(k, SLOW_FOOTPRINT_REFUSED, bound, k->args[k->ranges[broken].index].name);
  if (res != NULL) { /* the slow path always raises */
    Py_DECREF(res);
    PyErr_Format(PyExc_SystemError, "%s: footprint_refused returned", k->op_name);
  }
  return -1;
}

/* Releasing the GIL costs about as much as a tiny kernel: only for big ones. */
#define GIL_RELEASE_NUMEL 32768

/* Sets the shape dynamism of every borrowed out tensor (vals: the call's converted outs). */
static void set_out_dynamism(const KernelObject* k, etb_value* vals, uint8_t dynamism) {
  for (int o = 0; o < k->nouts; o++) {
    etb_value* v = &vals[k->out_args[o]];
    if (v->tag == ETB_TENSOR) {
      v->u.t->dynamism = dynamism;
    } else if (v->tag == ETB_LIST_TENSOR || v->tag == ETB_LIST_OPT_TENSOR) {
      for (int j = 0; j < v->len; j++) {
        if (v->u.tensors[j] != NULL) v->u.tensors[j]->dynamism = dynamism;
      }
    }
  }
}

/* Runs `fn` on the slots, without the GIL when the tensors are big; small calls run
 * their parallel regions on this thread (ETB_CALL_POOL_INLINE: a fault is then always
 * trapped; such ranges are one task of the pool anyway). *logged: whether the
 * kernel logged anything. */
static int run_kernel(KernelObject* k, etb_kernel_fn fn, etb_value* vals, int64_t numel, int* logged,
                      etb_prepared* prepared) {
  int err;
  if (numel >= GIL_RELEASE_NUMEL) {
    Py_BEGIN_ALLOW_THREADS
    err = prepared != NULL ? etb_call_prepared(prepared, fn, k->op_name, 0, logged)
                           : etb_call(fn, k->op_name, vals, k->nslots, k->has_lists ? ETB_CALL_HAS_LISTS : 0, logged);
    Py_END_ALLOW_THREADS
  } else if (prepared != NULL) { /* a memo's stack (kernel_memo.c): only the data pointers change */
    err = etb_call_prepared(prepared, fn, k->op_name, ETB_CALL_POOL_INLINE, logged);
  } else {
    /* small: parallel regions inline (no pool lock held), so any fault is trapped */
    err = etb_call(fn, k->op_name, vals, k->nslots,
                   (k->has_lists ? ETB_CALL_HAS_LISTS : 0) | ETB_CALL_POOL_INLINE, logged);
  }
  return err;
}

PyObject* kernel_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  KernelObject* k = (KernelObject*)self;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  PyObject* bound[ETOPS_MAX_ARGS];
  int missing_out;
  if (bind_arguments(k, args, nargs, kwnames, bound, &missing_out) < 0) return NULL;
  /* a kernel that faulted, or any kernel of a tainted process (fault_state.c): guarded */
  if (__builtin_expect(k->faulted_epoch >= etops_guarded_from, 0) && etops_must_guard_now())
    return slow_path(k, SLOW_GUARDED, bound, k->delegate_handle != NULL ? Py_True : Py_False);
  if (k->has_precheck) {
    /* None: go on; (result,): the slow path made the call with normalized arguments */
    PyObject* handled = slow_path(k, SLOW_PRECHECK, bound, NULL);
    if (handled == NULL) return NULL;
    if (PyTuple_Check(handled) && PyTuple_GET_SIZE(handled) == 1) {
      PyObject* result = Py_NewRef(PyTuple_GET_ITEM(handled, 0));
      Py_DECREF(handled);
      return result;
    }
    Py_DECREF(handled);
  }
  CallScratch cs;
  scratch_init(&cs);
  Probe probe;
  probe.active = 0;
  PyObject* crash_site = NULL; /* (argument, where, offset) of a fault in a probe's memory */
  int probed_crash = 0;        /* the fault hit a probe: the kernel wrote etops' copies of the outs */
  etb_value vals_buf[ETOPS_MAX_ARGS];
  etb_value* vals = vals_buf; /* or the memo's slots */
  PyObject* result = NULL;
  PyObject* fresh[ETOPS_MAX_ARGS]; /* outs allocated here for a call without out= */
  int nfresh = 0;
  int alloc_slot = -1;             /* their entry in the kernel's allocation ring */
  int alloc_remember = 0;          /* a new signature: remember what the slow path allocates */
  uint64_t alloc_sig = 0;
  int static_slot = -1; /* the ring entry of this signature when its outs went STATIC */
  int signature_slot = -1; /* the ring entry of this signature (calls with outs) */
  etb_kernel_fn fn = NULL;

  /* a call of the last steady call's signature: converted, validated, selected */
  DLTensor pre[ETOPS_MAX_ARGS]; /* what a memo that does not match asked torch, for the conversion */
  const int memo_hit = !missing_out && k->memo != NULL && memo_match(k, bound, &cs, &vals, pre);
  if (memo_hit) {
    fn = memo_fn(k);
    static_slot = signature_slot = memo_slot(k);
    if (k->nranges > 0 && refuse_index_ranges(k, vals, bound) < 0) goto done;
    goto checks;
  }

  for (int i = 0; i < k->nargs; i++) {
    const ArgSpec* a = &k->args[i];
    if (missing_out && (a->flags & F_OUT)) {
      vals[i].tag = ETB_NONE;
      vals[i].len = 0; /* hashed by alloc_signature */
      continue;
    }
    if (a->has_default_value && bound[i] == a->default_value) {
      vals[i] = a->default_converted; /* scalar defaults are converted once, at plan time */
    } else if (a->kind == K_TENSOR && bound[i] != Py_None) { /* the common kind, called directly */
      if (convert_tensor_arg(k, &cs, i, a, bound[i], &vals[i]) < 0) goto done;
    } else if (convert_arg(k, &cs, i, bound[i], &vals[i]) < 0) {
      goto done;
    }
  }
  /* the rules table's index checks, on every call, before anything is resized or allocated */
  if (k->nranges > 0 && refuse_index_ranges(k, vals, bound) < 0) goto done;
  /* raises, naming the argument (or accepts an out the slow path will resize) */
  if (k->specs != NULL && !matches_specs(k, vals) && slow_check(k, SLOW_EXPLAIN_MISMATCH, bound) < 0) goto done;
  if (missing_out && k->allocates && no_out_given(k, bound)) {
    /* outs the kernel allocated before for this signature: allocated here, then a call with outs */
    int slot = find_allocation(k, &cs, vals, &alloc_sig);
    alloc_remember = slot == -1;
    if (slot >= 0 && allocation_known(k, slot)) {
      if (allocate_outs(k, slot, bound, fresh, &nfresh) < 0 || convert_outs(k, &cs, bound, vals) < 0) goto done;
      missing_out = 0;
      alloc_slot = slot;
    }
  }
  for (int i = k->nargs; i < k->nslots; i++) vals[i] = k->args[i].default_converted; /* alias or None */

  /* Outs whose shapes torch fixed reach the kernel STATIC, as a program exported
   * with static shapes passes them (and ExecuTorch skips recomputing their strides);
   * the others DYNAMIC_BOUND, which the kernel may shrink. */
  if (!missing_out && k->delegate_handle == NULL) {
    int slot = -1;
    int checked = validate_once(k, vals, bound, cs.odd_numbers, &result, &slot);
    signature_slot = slot;
    if (checked != 0 && alloc_slot >= 0) { /* allocated outs torch did not take as they are */
      Py_CLEAR(result);
      PyErr_Clear();
      result = allocate_again_in_python(k, &cs, bound, alloc_slot);
      goto done;
    }
    if (checked != 0) goto done; /* refused (result NULL), or made by the slow path */
    if (k->validated_static_outs[slot]) {
      set_out_dynamism(k, vals, ETB_STATIC);
      static_slot = slot;
    } else if (alloc_slot >= 0) { /* outs the kernel may resize: the slow path's call */
      result = allocate_again_in_python(k, &cs, bound, alloc_slot);
      goto done;
    }
  }

  if (missing_out) {
    /* Every given argument is valid: let Python size and allocate the outs. */
    result = allocate_in_python(k, &cs, bound, alloc_remember, alloc_sig);
    goto done;
  }

checks:
  /* torch's refusals of the objects themselves (kernel_checks.c): grad, shared memory */
  if (check_written_tensors(k, &cs, bound, alloc_slot >= 0) < 0) goto done;

  int err;        /* ETB_OK or an ExecuTorch Error code */
  int logged = 1; /* whether the call log may hold messages (a kernel's call tells) */
  if (k->delegate_handle != NULL) {
    /* a lowered module: its backend executes on the same stack (inputs, then outputs) */
    if (cs.numel_total >= GIL_RELEASE_NUMEL) {
      Py_BEGIN_ALLOW_THREADS
      err = etb_delegate_execute(k->delegate_handle, k->op_name, vals, k->nslots);
      Py_END_ALLOW_THREADS
    } else {
      err = etb_delegate_execute(k->delegate_handle, k->op_name, vals, k->nslots);
    }
  } else {
    if (!memo_hit) fn = select_kernel(k, vals);
    if (fn == NULL) {
      result = slow_path(k, SLOW_NO_KERNEL, bound, NULL);
      goto done;
    }
    /* the first call of a signature is a probe: written tensors in guarded memory */
    if (signature_slot >= 0 && !k->probed[signature_slot] && !etf_handed_over() && probe_begin(k, &cs, &probe) < 0)
      goto done;
    err = run_kernel(k, fn, vals, cs.numel_total, &logged, memo_hit ? memo_prepared(k) : NULL);
    if (err != ETB_OK && static_slot >= 0 && etb_last_failure()->kind == ETB_FAILURE_RESIZE_REFUSED) {
      /* ExecuTorch's kernel sizes an out otherwise than torch's meta kernel (batch
       * norm's save_mean of an eval call: [0], where the meta says [C]): ExecuTorch
       * refused to resize the STATIC out, before the kernel computed anything. This
       * signature's outs go DYNAMIC_BOUND from now on, and the call
       * runs again as before, the kernel shrinking the out and etops mirroring it. */
      k->validated_static_outs[static_slot] = 0;
      memo_forget(k); /* (its outs were STATIC; a hit's are now DYNAMIC_BOUND below) */
      if (alloc_slot >= 0) { /* outs etops allocated: the slow path's call from now on, run once */
        result = allocate_again_in_python(k, &cs, bound, alloc_slot);
        goto done;
      }
      set_out_dynamism(k, vals, ETB_DYNAMIC_BOUND);
      static_slot = -1; /* the outs may be resized now */
      err = run_kernel(k, fn, vals, cs.numel_total, &logged, NULL); /* DYNAMIC_BOUND outs: a stack built anew */
    }
    if (probe.active) {
      if (err == ETB_ERR_CRASHED) {
        probed_crash = 1;
        crash_site = probe_site(&probe);
        if (crash_site == NULL && PyErr_Occurred()) PyErr_Clear(); /* unplaced: the failure is reported without a site */
      }
      if (probe_end(k, &probe, err == ETB_OK) < 0) goto done; /* a write past a tensor: raised */
      if (err == ETB_OK) k->probed[signature_slot] = 1;
    }
    if (alloc_slot >= 0 && err == ETB_OK && any_resized(&cs)) {
      /* the kernel sized its outs otherwise than torch: the slow path's call (it
       * mirrors the sizes without warning: etops allocated those outs) from now on */
      result = allocate_again_in_python(k, &cs, bound, alloc_slot);
      goto done;
    }
  }
  /* first, before anything allocates: a fault in malloc may have left its lock held */
  if (err == ETB_ERR_CRASHED) etops_note_fault(k, etops_fault_site(etb_last_failure()->fault.pc));
  if (etops_logs_pending || (err == ETB_OK && logged && etb_last_call_log()[0] != '\0')) {
    /* queued messages from other threads, and what a successful call logged */
    PyObject* r = PyObject_CallFunction(k->st->flush_logs, "Osi", k->py_name,
                                        err == ETB_OK ? etb_last_call_log() : "",
                                        err == ETB_OK && etb_last_call_logged_error());
    if (r == NULL) goto done;
    Py_DECREF(r);
  }
  if (err != ETB_OK) {
    /* crash_site: the fault hit a probe's guard page, named here */
    PyObject* info = etops_last_failure(k->st, crash_site, probed_crash);
    if (info == NULL) goto done;
    etops_keep_release(&cs.keep); /* the slow path may resize what we borrowed */
    result = slow_path(k, SLOW_FAILED, bound, info);
    Py_DECREF(info);
    goto done;
  }
  /* Outs that went STATIC cannot have been resized: with no copies either, nothing to mirror */
  for (int i = 0; (static_slot < 0 || cs.ncopies > 0) && i < cs.nrecs; i++) {
    TensorRec* r = cs.recs[i];
    if (r->t.resized) { /* mirrored first: a copy back then takes the new size */
      PyObject* sizes = etops_sizes_tuple(&r->t);
      if (sizes == NULL) goto done;
      PyObject* res = PyObject_CallMethod(k->slow, SLOW_PATH_METHODS[SLOW_RESIZED], "OOOiO", (PyObject*)k, r->obj,
                                          sizes, (int)(r->t.data != NULL), k->args[r->arg].name);
      Py_DECREF(sizes);
      if (res == NULL) goto done;
      Py_DECREF(res);
    }
    if (r->copy_back_to != NULL) {
      PyObject* res = PyObject_CallFunctionObjArgs(k->st->copy_back, r->copy_back_to, r->obj, NULL);
      if (res == NULL) goto done;
      Py_DECREF(res);
    }
  }
  /* the caller's written tensors changed: autograd's version counters say so, as torch's out= does */
  if (bump_written_versions(k, &cs) < 0) goto done;
  result = alloc_slot >= 0 && k->nreturns == 0 ? allocated_outs_result(k, bound) : build_result(k, bound, vals);
  /* a steady call (STATIC outs, signature probed clean): the next one like it starts from here */
  if (!memo_hit && result != NULL && static_slot >= 0 && alloc_slot < 0 && k->probed[static_slot] &&
      k->delegate_handle == NULL)
    memo_remember(k, &cs, bound, vals, fn, static_slot);

done:
  if (memo_hit) memo_release(k);
  if (probe.active) probe_end(k, &probe, 0); /* an early exit during a probe: the tensors get their memory back */
  Py_XDECREF(crash_site);
  scratch_release(&cs);
  for (int i = 0; i < nfresh; i++) Py_DECREF(fresh[i]);
  return result;
}

