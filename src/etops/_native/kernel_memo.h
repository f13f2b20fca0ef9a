/*
 * kernel_memo.h - the call memo's functions (kernel_memo.c): a kernel's last steady
 * call remembered converted. Included by kernel_internal.h only, after the types it
 * needs.
 */
#ifndef ETOPS_KERNEL_MEMO_H
#define ETOPS_KERNEL_MEMO_H

typedef struct CallMemo CallMemo;

/* Whether this call (bound: its arguments; missing_out: an out is not given) matches
 * the kernel's memo (k->memo not NULL): then *vals points at its slots (the memo's own, or copied into
 * the buffer *vals pointed at when the bridge writes some), cs at its tensor records (the memo's,
 * data pointers patched), the memo is busy until memo_release, and the call runs
 * the function k->memo remembers with STATIC outs, its signature's ring entry being
 * memo_slot(k). A call without out= matches only a memo of one (memo_alloc_slot >= 0),
 * and its outs are then memo_allocate_outs' to allocate. 0: no match (no exception): the DLTensors it asked torch for are in
 * `pre` (ETOPS_MAX_ARGS of them, by argument), cs->pre_mask saying which, for the
 * conversion to use instead of asking again. */
int memo_match(KernelObject* k, PyObject* const* bound, int missing_out, CallScratch* cs, etb_value** vals,
               DLTensor* pre);
/* After a match of a call without out=: allocates its outs into bound[] (new
 * references, also in fresh[], *nfresh of them) as the memo's allocation ring entry
 * says, and aims the memo's out records at them. 1: done; 0: torch gave other
 * tensors than the memo remembers (they stay in bound[] and fresh[]; the call goes
 * the full path with them as outs C allocated); -1: an exception. */
int memo_allocate_outs(KernelObject* k, PyObject** bound, PyObject** fresh, int* nfresh);
/* The allocation ring entry of a memo of a call without out=, or -1 (an out= call's),
 * and its signature. */
int memo_alloc_slot(const KernelObject* k);
uint64_t memo_alloc_sig(const KernelObject* k);
/* The function and ring entry of a matched memo. */
etb_kernel_fn memo_fn(const KernelObject* k);
int memo_slot(const KernelObject* k);
/* The bridge's prepared stack of a matched memo's slots (its outs STATIC), or NULL. */
etb_prepared* memo_prepared(const KernelObject* k);
/* 0: no memo; 1: a memo (calls that match it skip conversion); 2: one with a
 * prepared stack (they skip building the bridge's stack too). For tests. */
int memo_state(const KernelObject* k);
/* Ends the use memo_match began. */
void memo_release(KernelObject* k);
/* After a successful call with STATIC outs whose signature (ring entry `slot`) was
 * probed clean, and which ran `fn` on `vals` (as converted, before the call; return
 * slots aside): remembers it when every argument qualifies (else nothing). Never fails.
 * alloc_slot >= 0: C allocated every out of this call as allocation ring entry
 * alloc_slot (signature alloc_sig) says. */
void memo_remember(KernelObject* k, const CallScratch* cs, PyObject* const* bound, const etb_value* vals,
                   etb_kernel_fn fn, int slot, int alloc_slot, uint64_t alloc_sig);
/* The memo no longer matches anything (a change it cannot see by itself). */
void memo_forget(KernelObject* k);
/* Frees the memo (the kernel's clear, when no call is using it). */
void memo_free(KernelObject* k);

#endif /* ETOPS_KERNEL_MEMO_H */
