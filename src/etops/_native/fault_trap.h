/*
 * fault_trap.h - synchronous faults inside a kernel call become the call's failure.
 *
 * A call that runs ExecuTorch code pushes an etf_trap (on its own stack) for its
 * thread; a SIGSEGV, SIGBUS, SIGFPE or SIGILL raised on that thread while the trap is
 * armed records the fault in the trap and jumps back to where it was pushed
 * (siglongjmp), abandoning the kernel's frames. Everywhere else (no trap: another
 * thread, Python, etops' own code) the fault goes to the handler that was installed
 * before etops' (Python's faulthandler, torch's, the default action), after a notice
 * naming the kernel that was running; so does a SIGABRT (never trapped) while a kernel
 * runs. fault_trap.c installs the handler and puts it back on top when another one
 * replaced it; bridge.cpp pushes and pops traps. Shared by C and C++.
 */
#ifndef ETOPS_FAULT_TRAP_H
#define ETOPS_FAULT_TRAP_H

#include <setjmp.h>
#include <stddef.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "etops_bridge.h" /* etf_fault: what a trapped fault was, part of a call's failure */

#ifdef __cplusplus
extern "C" {
#endif

/* One armed region on one thread: jumped back to on a fault. Lives on the stack of
 * the frame that pushed it; `outer` is the trap it hides (a Python kernel calling a
 * kernel), restored when it is popped. */
typedef struct etf_trap {
  sigjmp_buf env;
  struct etf_trap* outer;
  etf_fault fault;
} etf_trap;

/* This thread's armed trap (NULL: none), in a slot of a process-wide table the
 * signal handler searches by thread (a thread-local variable of a loaded library
 * may allocate when first read, which a signal handler must not risk). NULL when
 * the table is full (4096 threads have called kernels at once): faults on such a
 * thread are not trapped. Found once per thread, then one thread-local read. */
etf_trap** etf_thread_trap(void);

/* Installs etops' handler for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT, keeping
 * the handler it displaces to chain to; again when another handler replaced it since
 * (a new installation over that one, which becomes the one chained to). Each
 * installation chains to what it displaced, so a handler that restores an older
 * installation (faulthandler.disable) restores its chain too. Returns 0, or -1 with
 * errno set. Call with the GIL held. */
int etf_install(void);

/* For a process whose faults another handler reports (a guarded call's child,
 * guard_signals.c): etf_install no longer takes the signals back. */
void etf_hand_over(void);
/* For a process whose guarded calls place every tensor in guarded memory
 * themselves (etops.guard.here's task processes): the handler is installed and
 * faults in a kernel call stay trapped (the caller decides whether the process may
 * go on), but the first call of a signature is not probed. */
void etf_trap_guarded_here(void);
/* Whether etf_hand_over or etf_trap_guarded_here was called: a process whose guard
 * pages, not etops' probes, judge the kernel's writes. */
int etf_handed_over(void);

/* This thread's NoThreadPoolGuard flag (ExecuTorch's: set, its parallel regions
 * run inline on the calling thread), or NULL without the threadpool library;
 * `slot` is what etf_thread_trap returned. A fault inside the pool's
 * ThreadPool::run, which holds the pool's lock, cannot be trapped (fault_trap.c):
 * calls of small tensors, which gain nothing from the pool, set the flag for the
 * call so that a fault in them is always trapped. */
volatile bool* etf_pool_flag(etf_trap** slot);

/* fault_frame.c: what a fault's interrupted context says. pc and sp (0: unknown),
 * and for a SIGSEGV whether the access was a write (1, 0, -1 unknown): x86-64's
 * page-fault error code, aarch64's exception syndrome (esr_context) or, in a frame
 * without one (qemu-user), the faulting A64 instruction. Async-signal-safe. */
typedef struct {
  uint64_t pc, sp;
  int is_write;
} etf_frame;
void etf_read_frame(int signo, const siginfo_t* info, const void* context, etf_frame* out);
/* An A64 instruction word's memory direction: 1 a store (or a read-modify-write),
 * 0 a load, -1 not a load or store recognised (fault_frame.c; a pure function, on every host). */
int etf_a64_is_write(uint32_t insn);
/* A SIGSEGV's direction from aarch64 sigcontext records (`limit` bytes of
 * __reserved): esr_context's syndrome, else the instruction word (pure, any host). */
int etf_aarch64_direction(const unsigned char* records, size_t limit, uint32_t insn);

/* fault_pool.c: a fault inside one item of a threadpool region skips that item.
 * etf_pool_items_init: the threadpool library, from its ThreadPool::run (at install).
 * etf_skip_pool_item (in the handler): 1 when the fault at `context` lies in an item
 * run on the pool (under a frame of the threadpool library other than
 * ThreadPool::run, whose inline loop holds nothing and is jumped out of) and the
 * context now returns into that frame (the fault recorded for the call), 0 when it
 * cannot (x86-64 only).
 * etf_take_pool_fault (the bridge, after a kernel that ran parallel regions on the
 * pool returned): 1 with the first fault skipped since, which fails the call. */
void etf_pool_items_init(const void* pool_function);
/* The etops calls running that may run regions on the pool (not inline): counted by
 * the bridge around such a call; a worker's fault is skipped only while one runs. */
extern volatile int etf_pool_calls;
int etf_skip_pool_item(void* context, const etf_fault* f);
/* 1 where etf_skip_pool_item can skip an item (x86-64), 0 elsewhere. */
extern const int etf_pool_items_skipped;
int etf_take_pool_fault(etf_fault* fault);

/* Hides this thread's trap while code runs that must never be jumped out of (a
 * Python kernel called by a kernel): returns it for etf_rearm. */
static inline etf_trap* etf_disarm(void) {
  etf_trap** slot = etf_thread_trap();
  if (slot == 0) return 0;
  etf_trap* t = *slot;
  *slot = 0;
  return t;
}
static inline void etf_rearm(etf_trap* t) {
  etf_trap** slot = etf_thread_trap();
  if (slot != 0) *slot = t;
}

/* etops' own abort path printed why the process ends (bridge.cpp's notice): the
 * SIGABRT that follows goes on without fault_trap.c's notice naming the kernel. */
void etf_abort_explained(void);

/* The name of a signal ("SIGSEGV"), a static string. */
const char* etf_signal_name(int signo);

#ifdef __cplusplus
}
#endif

#endif /* ETOPS_FAULT_TRAP_H */
