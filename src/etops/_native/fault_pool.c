/*
 * fault_pool.c - a fault inside one item of a parallel region of ExecuTorch's
 * threadpool abandons that item only, never the region.
 *
 * ThreadPool::run holds the pool's lock while the calling thread and the workers
 * run the region's items; jumping out of the region (the trap's siglongjmp) would
 * leave the lock held and the workers running items whose context lived on the
 * abandoned frames. Instead, a fault on a thread inside an item (the calling
 * thread's share, or a worker's) returns into the threadpool library's frame that
 * called the item, as if the item had returned: the handler rewrites the
 * interrupted context (the resume address, stack pointer and callee-saved
 * registers of that frame, found by the unwinder from the signal frame up), so the
 * thread goes on with the next item, the region completes, the lock is released
 * and the pool stays whole (it is neither re-created nor bypassed). The first such
 * fault is recorded; the call that ran the region reports it (etf_take_pool_fault,
 * called by the bridge after the kernel returned) and raises KernelCrashed, its
 * outs partly written (the skipped items' elements were not computed).
 *
 * Only where the unwinder can rebuild the frame (x86-64; elsewhere, aarch64 too, the
 * fault ends the process as before, with fault_trap.c's notice saying that skipping
 * an item is x86-64 only; etf_pool_items_skipped, _core.POOL_ITEMS_SKIPPED) and only when the fault lies
 * outside the threadpool library itself, under a frame of it. Shared by the signal
 * handler (fault_trap.c) and the bridge; async-signal-safe as the handler's
 * backtrace() is (the unwinder, loaded at install).
 */
#define _GNU_SOURCE
#include "fault_trap.h"

#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <unwind.h>

/* The executable code of ExecuTorch's threadpool library ([lo, hi); 0, 0 unknown),
 * and of its ThreadPool::run (whose inline loop, under NoThreadPoolGuard, calls the
 * items itself and holds nothing: a fault there is jumped out of as any other). */
static uintptr_t pool_lib_lo, pool_lib_hi;
static uintptr_t run_lo, run_hi;

/* How many etops calls are running that may run regions on the pool (bridge.cpp's
 * faulted): a worker's fault is skipped only then, never in a region of code outside
 * etops alone (executorch's own Method.execute), which would go on without the item. */
volatile int etf_pool_calls;

/* The first fault skipped since the last etf_take_pool_fault, and whether one is. */
static etf_fault pool_fault;
static volatile int pool_fault_pending;

typedef struct {
  uintptr_t base;
} LibBase;

static int find_text(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  LibBase* lib = (LibBase*)data;
  if (info->dlpi_addr != lib->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      pool_lib_lo = info->dlpi_addr + ph->p_vaddr;
      pool_lib_hi = pool_lib_lo + ph->p_memsz;
      return 1;
    }
  }
  return 0;
}

void etf_pool_items_init(const void* pool_run) {
  Dl_info info;
  const ElfW(Sym)* sym = NULL;
  if (pool_lib_hi != 0 || pool_run == NULL || dladdr1(pool_run, &info, (void**)&sym, RTLD_DL_SYMENT) == 0 ||
      sym == NULL || sym->st_size == 0)
    return;
  run_lo = (uintptr_t)pool_run;
  run_hi = run_lo + (uintptr_t)sym->st_size;
  LibBase lib = {(uintptr_t)info.dli_fbase};
  dl_iterate_phdr(find_text, &lib);
}

#if defined(__x86_64__) && defined(REG_RIP)

/* DWARF numbers of x86-64's callee-saved registers, and their slots in a ucontext. */
static const int SAVED_DWARF[] = {3, 6, 12, 13, 14, 15}; /* rbx rbp r12 r13 r14 r15 */
static const int SAVED_GREG[] = {REG_RBX, REG_RBP, REG_R12, REG_R13, REG_R14, REG_R15};
#define N_SAVED 6

typedef struct {
  uintptr_t fault_pc;
  int past_fault;        /* the walk reached the faulting frame */
  int found;
  uintptr_t resume_ip;
  uintptr_t resume_sp;
  uintptr_t saved[N_SAVED];
} Walk;

static _Unwind_Reason_Code step(struct _Unwind_Context* ctx, void* arg) {
  Walk* w = (Walk*)arg;
  int before = 0;
  uintptr_t ip = (uintptr_t)_Unwind_GetIPInfo(ctx, &before);
  if (!w->past_fault) {
    /* the handler's own frames and the signal trampoline come first */
    if (ip == w->fault_pc && before) {
      if (ip >= pool_lib_lo && ip < pool_lib_hi) return _URC_END_OF_STACK; /* inside the pool's own code */
      w->past_fault = 1;
    }
    return _URC_NO_REASON;
  }
  if (ip >= pool_lib_lo && ip < pool_lib_hi) { /* the pool's frame that called the item */
    if (ip >= run_lo && ip < run_hi) return _URC_END_OF_STACK; /* run's inline loop: not on the pool */
    w->resume_ip = ip;
    w->resume_sp = (uintptr_t)_Unwind_GetCFA(ctx); /* libgcc: the CFA of the frame walked before, its callee */
    for (int i = 0; i < N_SAVED; i++) w->saved[i] = (uintptr_t)_Unwind_GetGR(ctx, SAVED_DWARF[i]);
    w->found = 1;
    return _URC_END_OF_STACK;
  }
  return _URC_NO_REASON;
}

int etf_skip_pool_item(void* context, const etf_fault* f) {
  if (pool_lib_hi == 0 || context == NULL || f->pc == 0) return 0;
  Walk w;
  memset(&w, 0, sizeof w);
  w.fault_pc = (uintptr_t)f->pc;
  _Unwind_Backtrace(step, &w);
  if (!w.found) return 0;
  if (__atomic_exchange_n(&pool_fault_pending, 1, __ATOMIC_ACQ_REL) == 0) pool_fault = *f;
  /* the item returns (void) into the pool's frame: its registers as that frame had them */
  greg_t* regs = ((ucontext_t*)context)->uc_mcontext.gregs;
  for (int i = 0; i < N_SAVED; i++) regs[SAVED_GREG[i]] = (greg_t)w.saved[i];
  regs[REG_RSP] = (greg_t)w.resume_sp;
  regs[REG_RIP] = (greg_t)w.resume_ip;
  return 1;
}

const int etf_pool_items_skipped = 1;

#else

/* No unwinding into the pool's frame here (fault_trap.c's notice says so). */
const int etf_pool_items_skipped = 0;

int etf_skip_pool_item(void* context, const etf_fault* f) {
  (void)context;
  (void)f;
  return 0;
}

#endif

int etf_take_pool_fault(etf_fault* fault) {
  if (!pool_fault_pending) return 0;
  *fault = pool_fault;
  __atomic_store_n(&pool_fault_pending, 0, __ATOMIC_RELEASE);
  return 1;
}
