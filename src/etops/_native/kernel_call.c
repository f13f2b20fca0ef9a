/*
 * kernel_call.c - the call of a Kernel (its vectorcall), one step a function:
 *
 *   bind          positional and keyword arguments to the plan (kernel_bind.c)
 *   hand_over     a kernel that must run guarded, or a precheck that made the call
 *   reuse_memo    a call of the last steady call's signature: converted already
 *   convert       each argument (kernel_convert.c); index ranges, a delegate's specs
 *                 (kernel_specs.c), outs C allocates (kernel_alloc.c)
 *   check_signature  torch's checks once per argument signature (its outs go STATIC
 *                 once torch fixed their shapes); missing outs: the slow path allocates
 *   run           the object checks (kernel_checks.c), then the kernel, picked by
 *                 kernel_select.c and probed on a signature's first call
 *                 (kernel_probe.c), or the delegate, through the bridge
 *   report        a fault noted, logs flushed, a failure handed to the slow path
 *   results       resizes mirrored, copies back, versions bumped, what torch's out
 *                 variant returns; a steady call remembered (kernel_memo.c)
 *
 * Nothing on this path allocates Python objects for a call with correctly sized
 * outs. Everything unusual goes to the slow path through its typed table
 * (kernel_slow.c): missing outs, a failed kernel, no kernel for the key, resized outs.
 */
#include "kernel_internal.h"
#include "fault_state.h"
#include "fault_trap.h"

/* Releasing the GIL costs about as much as a tiny kernel: only for big ones. */
#define GIL_RELEASE_NUMEL 32768

#include "kernel_call_state.h" /* Call, CallMemory, the steps' Step and STEP */

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

/* ---- helpers of the steps ------------------------------------------------------------ */

/* Whether the kernel resized any borrowed tensor. */
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
  return slow_refuses(k, SLOW_FOOTPRINT_REFUSED, bound, k->args[k->ranges[broken].index].name);
}

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
STEP int run_kernel(KernelObject* k, etb_kernel_fn fn, etb_value* vals, int64_t numel, int* logged,
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

/* ---- the steps ---------------------------------------------------------------------- */

/* A kernel that faulted, or any kernel of a tainted process (fault_state.c), runs
 * guarded; a kernel with a precheck asks it first (the slow path may make the call
 * itself, with normalized arguments). */
STEP Step hand_over(KernelObject* k, Call* c) {
  if (__builtin_expect(k->faulted_epoch >= etops_guarded_from, 0) && etops_must_guard_now())
    return done_with(c, slow_call(k, SLOW_GUARDED, c->bound, k->delegate_handle != NULL ? Py_True : Py_False));
  if (k->has_precheck) {
    PyObject* handled = NULL;
    int answer = slow_precheck(k, c->bound, &handled);
    if (answer != SLOW_GO_ON) return done_with(c, handled); /* NULL when refused */
  }
  return STEP_NEXT;
}

/* A call without out= that matched a memo of one: its outs allocated as the memo
 * says, then a call with outs C allocated. When torch gave other tensors than the
 * memo remembers, the hit is undone and the call goes the full path with them. */
STEP Step allocate_remembered_outs(KernelObject* k, Call* c) {
  const int slot = memo_alloc_slot(k);
  int nfresh = c->nfresh;
  int done = memo_allocate_outs(k, c->bound, c->fresh, &nfresh);
  c->nfresh = nfresh;
  if (done < 0) return done_with(c, NULL);
  c->missing_out = 0;
  c->alloc_slot = slot;
  c->alloc_sig = memo_alloc_sig(k);
  if (done == 0) { /* the scratch as scratch_init left it, the memo free again */
    memo_release(k);
    c->memo_hit = 0;
    c->vals = c->vals_buf;
    c->cs->recs = c->cs->inline_recs;
    c->cs->nrecs = 0;
    c->cs->caprecs = ETOPS_MAX_TENSORS;
    c->cs->numel_total = 0;
    c->cs->pre_mask = 0;
  }
  return STEP_NEXT;
}

/* Whether the call matches the last steady call's memo (converted, validated,
 * selected): then its index ranges alone are checked again. A call without out=
 * matches a memo of one and gets its outs here. */
STEP Step reuse_memo(KernelObject* k, Call* c) {
  etb_value* vals = c->vals;
  c->memo_hit = k->memo != NULL && memo_match(k, c->bound, c->missing_out, c->cs, &vals, c->pre);
  c->vals = vals;
  if (!c->memo_hit) return STEP_NEXT;
  if (c->missing_out) {
    if (allocate_remembered_outs(k, c) == STEP_DONE) return STEP_DONE;
    if (!c->memo_hit) return STEP_NEXT; /* undone: the full path, its outs given */
  }
  c->fn = memo_fn(k);
  c->static_slot = c->signature_slot = memo_slot(k);
  if (k->nranges > 0 && refuse_index_ranges(k, c->vals, c->bound) < 0) return done_with(c, NULL);
  return STEP_NEXT;
}

/* Converts every argument, runs the rules table's index checks and a delegate's
 * spec checks, and allocates the outs of a call without out= whose signature the
 * kernel remembers (then the call goes on as one with outs). */
STEP Step convert(KernelObject* k, Call* c) {
  PyObject** bound = c->bound;
  etb_value* vals = c->vals;
  for (int i = 0; i < k->nargs; i++) {
    const ArgSpec* a = &k->args[i];
    if (c->missing_out && (a->flags & F_OUT)) {
      vals[i].tag = ETB_NONE;
      vals[i].len = 0; /* hashed by alloc_signature */
      continue;
    }
    if (a->has_default_value && bound[i] == a->default_value) {
      vals[i] = a->default_converted; /* scalar defaults are converted once, at plan time */
    } else if (a->kind == K_TENSOR && bound[i] != Py_None) { /* the common kind, called directly */
      if (convert_tensor_arg(k, c->cs, i, a, bound[i], &vals[i]) < 0) return done_with(c, NULL);
    } else if (convert_arg(k, c->cs, i, bound[i], &vals[i]) < 0) {
      return done_with(c, NULL);
    }
  }
  /* the rules table's index checks, on every call, before anything is resized or allocated */
  if (k->nranges > 0 && refuse_index_ranges(k, vals, bound) < 0) return done_with(c, NULL);
  /* raises, naming the argument (or accepts an out the slow path will resize) */
  if (k->specs != NULL && !matches_specs(k, vals) && slow_accepts(k, SLOW_EXPLAIN_MISMATCH, bound, NULL) < 0)
    return done_with(c, NULL);
  if (c->missing_out && k->allocates && no_out_given(k, bound)) {
    /* outs the kernel allocated before for this signature: allocated here, then a call with outs */
    uint64_t sig = 0;
    int slot = find_allocation(k, c->cs, vals, &sig);
    c->alloc_sig = sig;
    c->alloc_remember = slot == -1;
    if (slot >= 0 && allocation_known(k, slot)) {
      int nfresh = c->nfresh;
      int failed = allocate_outs(k, slot, bound, c->fresh, &nfresh) < 0;
      c->nfresh = nfresh;
      if (failed || convert_outs(k, c->cs, bound, vals) < 0) return done_with(c, NULL);
      c->missing_out = 0;
      c->alloc_slot = slot;
    }
  }
  for (int i = k->nargs; i < k->nslots; i++) vals[i] = k->args[i].default_converted; /* alias or None */
  return STEP_NEXT;
}

/* Outs whose shapes torch fixed reach the kernel STATIC, as a program exported with
 * static shapes passes them (and ExecuTorch skips recomputing their strides); the
 * others DYNAMIC_BOUND, which the kernel may shrink. A call with outs still missing
 * ends here: every given argument is valid, Python sizes and allocates the outs. */
STEP Step check_signature(KernelObject* k, Call* c) {
  if (!c->missing_out && k->delegate_handle == NULL) {
    int slot = -1;
    PyObject* handled = NULL;
    int checked = validate_once(k, c->vals, c->bound, c->cs->odd_numbers, &handled, &slot);
    c->result = handled;
    c->signature_slot = slot;
    if (checked != 0 && c->alloc_slot >= 0) { /* allocated outs torch did not take as they are */
      Py_CLEAR(c->result);
      PyErr_Clear();
      return done_with(c, allocate_again_in_python(k, c->cs, c->bound, c->alloc_slot));
    }
    if (checked != 0) return STEP_DONE; /* refused (result NULL), or made by the slow path */
    if (k->validated_static_outs[slot]) {
      set_out_dynamism(k, c->vals, ETB_STATIC);
      c->static_slot = slot;
    } else if (c->alloc_slot >= 0) { /* outs the kernel may resize: the slow path's call */
      return done_with(c, allocate_again_in_python(k, c->cs, c->bound, c->alloc_slot));
    }
  }
  if (c->missing_out) return done_with(c, allocate_in_python(k, c->cs, c->bound, c->alloc_remember, c->alloc_sig));
  return STEP_NEXT;
}

/* A lowered module: its backend executes on the same stack (inputs, then outputs). */
STEP void run_delegate(KernelObject* k, Call* c) {
  if (c->cs->numel_total >= GIL_RELEASE_NUMEL) {
    Py_BEGIN_ALLOW_THREADS
    c->err = etb_delegate_execute(k->delegate_handle, k->op_name, c->vals, k->nslots);
    Py_END_ALLOW_THREADS
  } else {
    c->err = etb_delegate_execute(k->delegate_handle, k->op_name, c->vals, k->nslots);
  }
}

/* ExecuTorch's kernel sized an out otherwise than torch's meta kernel (batch norm's
 * save_mean of an eval call: [0], where the meta says [C]): ExecuTorch refused to
 * resize the STATIC out, before the kernel computed anything. This signature's outs
 * go DYNAMIC_BOUND from now on, and the call runs again as before, the kernel
 * shrinking the out and etops mirroring it. */
STEP Step run_again_dynamic(KernelObject* k, Call* c) {
  k->validated_static_outs[c->static_slot] = 0;
  memo_forget(k); /* (its outs were STATIC; a hit's are now DYNAMIC_BOUND below) */
  if (c->alloc_slot >= 0) /* outs etops allocated: the slow path's call from now on, run once */
    return done_with(c, allocate_again_in_python(k, c->cs, c->bound, c->alloc_slot));
  set_out_dynamism(k, c->vals, ETB_DYNAMIC_BOUND);
  c->static_slot = -1; /* the outs may be resized now */
  int logged = c->logged;
  c->err = run_kernel(k, c->fn, c->vals, c->cs->numel_total, &logged, NULL); /* a stack built anew */
  c->logged = logged;
  return STEP_NEXT;
}

/* The registered kernel: picked by its key, probed on its signature's first call
 * (written tensors in guarded memory), run. */
STEP Step run_registered(KernelObject* k, Call* c) {
  if (!c->memo_hit) c->fn = select_kernel(k, c->vals);
  if (c->fn == NULL) return done_with(c, slow_call(k, SLOW_NO_KERNEL, c->bound, NULL)); /* raises */
  if (c->signature_slot >= 0 && !k->probed[c->signature_slot] && !etf_handed_over() &&
      probe_begin(k, c->cs, c->probe) < 0)
    return done_with(c, NULL);
  int logged = c->logged;
  c->err = run_kernel(k, c->fn, c->vals, c->cs->numel_total, &logged, c->memo_hit ? memo_prepared(k) : NULL);
  c->logged = logged;
  if (c->err != ETB_OK && c->static_slot >= 0 && etb_last_failure()->kind == ETB_FAILURE_RESIZE_REFUSED &&
      run_again_dynamic(k, c) == STEP_DONE)
    return STEP_DONE;
  if (c->probe->active) {
    if (c->err == ETB_ERR_CRASHED) {
      c->probed_crash = 1;
      c->crash_site = probe_site(c->probe);
      if (c->crash_site == NULL && PyErr_Occurred()) PyErr_Clear(); /* unplaced: reported without a site */
    }
    if (probe_end(k, c->probe, c->err == ETB_OK) < 0) return done_with(c, NULL); /* a write past a tensor */
    if (c->err == ETB_OK) k->probed[c->signature_slot] = 1;
  }
  if (c->alloc_slot >= 0 && c->err == ETB_OK && any_resized(c->cs)) {
    /* the kernel sized its outs otherwise than torch: the slow path's call (it
     * mirrors the sizes without warning: etops allocated those outs) from now on */
    return done_with(c, allocate_again_in_python(k, c->cs, c->bound, c->alloc_slot));
  }
  return STEP_NEXT;
}

/* torch's refusals of the objects themselves (kernel_checks.c: grad, shared memory),
 * then the delegate or the kernel. */
STEP Step run(KernelObject* k, Call* c) {
  if (check_written_tensors(k, c->cs, c->bound, c->alloc_slot >= 0) < 0) return done_with(c, NULL);
  if (k->delegate_handle != NULL) {
    run_delegate(k, c);
    return STEP_NEXT;
  }
  return run_registered(k, c);
}

/* A fault noted, what was logged flushed, a failure handed to the slow path (which
 * resizes outs and calls again, or raises). */
STEP Step report(KernelObject* k, Call* c) {
  /* first, before anything allocates: a fault in malloc may have left its lock held */
  if (c->err == ETB_ERR_CRASHED) etops_note_fault(k, etops_fault_site(etb_last_failure()->fault.pc));
  if (etops_logs_pending || (c->err == ETB_OK && c->logged && etb_last_call_log()[0] != '\0')) {
    /* queued messages from other threads, and what a successful call logged */
    PyObject* r = PyObject_CallFunction(k->st->flush_logs, "Osi", k->py_name,
                                        c->err == ETB_OK ? etb_last_call_log() : "",
                                        c->err == ETB_OK && etb_last_call_logged_error());
    if (r == NULL) return done_with(c, NULL);
    Py_DECREF(r);
  }
  if (c->err == ETB_OK) return STEP_NEXT;
  /* crash_site: the fault hit a probe's guard page, named here */
  PyObject* failure = etops_last_failure(k->st, c->crash_site, c->probed_crash);
  if (failure == NULL) return done_with(c, NULL);
  etops_keep_release(&c->cs->keep); /* the slow path may resize what we borrowed */
  c->result = slow_call(k, SLOW_FAILED, c->bound, failure);
  Py_DECREF(failure);
  return STEP_DONE;
}

/* Out `r` the kernel resized, mirrored on its Python object. */
static int mirror_resize(KernelObject* k, const TensorRec* r) {
  PyObject* sizes = etops_sizes_tuple(&r->t);
  if (sizes == NULL) return -1;
  PyObject* args[5] = {(PyObject*)k, r->obj, sizes, r->t.data != NULL ? Py_True : Py_False, k->args[r->arg].name};
  PyObject* res = slow_call_args(k, SLOW_RESIZED, args, 5);
  Py_DECREF(sizes);
  if (res == NULL) return -1;
  Py_DECREF(res);
  return 0;
}

/* What a successful call returns, after its resizes are mirrored, its copies
 * written back and the versions of the written tensors bumped. */
STEP void results(KernelObject* k, Call* c) {
  /* Outs that went STATIC cannot have been resized: with no copies either, nothing to mirror */
  for (int i = 0; (c->static_slot < 0 || c->cs->ncopies > 0) && i < c->cs->nrecs; i++) {
    TensorRec* r = c->cs->recs[i];
    if (r->t.resized && mirror_resize(k, r) < 0) return; /* mirrored first: a copy back then takes the new size */
    if (r->copy_back_to != NULL) {
      PyObject* res = PyObject_CallFunctionObjArgs(k->st->copy_back, r->copy_back_to, r->obj, NULL);
      if (res == NULL) return;
      Py_DECREF(res);
    }
  }
  /* the caller's written tensors changed: autograd's version counters say so, as torch's out= does */
  if (bump_written_versions(k, c->cs) < 0) return;
  c->result = c->alloc_slot >= 0 && k->nreturns == 0 ? allocated_outs_result(k, c->bound)
                                                     : build_result(k, c->bound, c->vals);
  /* a steady call (STATIC outs, signature probed clean): the next one like it starts from here */
  if (!c->memo_hit && c->result != NULL && c->static_slot >= 0 && k->probed[c->static_slot] &&
      k->delegate_handle == NULL)
    memo_remember(k, c->cs, c->bound, c->vals, c->fn, c->static_slot, c->alloc_slot, c->alloc_sig);
}

/* The steps in order; Call.result is the call's answer when they return. */
STEP void run_steps(KernelObject* k, Call* c) {
  if (hand_over(k, c) == STEP_DONE || reuse_memo(k, c) == STEP_DONE) return;
  if (!c->memo_hit && (convert(k, c) == STEP_DONE || check_signature(k, c) == STEP_DONE)) return;
  if (run(k, c) == STEP_DONE || report(k, c) == STEP_DONE) return;
  results(k, c);
}

PyObject* kernel_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  KernelObject* k = (KernelObject*)self;
  CallMemory mem;
  Call c;
  int missing_out;
  if (bind_arguments(k, args, PyVectorcall_NARGS(nargsf), kwnames, mem.bound, &missing_out) < 0) return NULL;
  scratch_init(&mem.cs);
  mem.probe.active = 0;
  c.bound = mem.bound;
  c.missing_out = missing_out;
  c.cs = &mem.cs;
  c.probe = &mem.probe;
  c.crash_site = NULL;
  c.probed_crash = 0;
  c.vals_buf = c.vals = mem.vals_buf;
  c.pre = mem.pre;
  c.memo_hit = 0;
  c.fresh = mem.fresh;
  c.nfresh = 0;
  c.alloc_slot = -1;
  c.alloc_remember = 0;
  c.alloc_sig = 0;
  c.static_slot = c.signature_slot = -1;
  c.fn = NULL;
  c.err = ETB_OK;
  c.logged = 1;
  c.result = NULL;
  run_steps(k, &c);
  if (c.memo_hit) memo_release(k);
  if (mem.probe.active) probe_end(k, &mem.probe, 0); /* an early exit during a probe: the tensors get their memory back */
  Py_XDECREF(c.crash_site);
  scratch_release(&mem.cs);
  for (int i = 0; i < c.nfresh; i++) Py_DECREF(mem.fresh[i]);
  return c.result;
}
