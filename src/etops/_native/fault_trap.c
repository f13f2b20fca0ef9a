/*
 * fault_trap.c - the process's handler for synchronous faults (fault_trap.h).
 *
 * A SIGSEGV, SIGBUS, SIGFPE or SIGILL on a thread whose kernel call armed a trap
 * (bridge.cpp's run_trapped) is recorded there and jumped back to: the call fails
 * with ETB_ERR_CRASHED and the process goes on. A fault anywhere else is not etops'
 * to handle: when a kernel call is running on some thread (a threadpool worker
 * faulted) it prints a notice naming that kernel, then hands the fault to the
 * handler installed before etops' (faulthandler, torch's) or to the default action,
 * exactly as if etops had not been there.
 *
 * A fault inside an item of a parallel region of ExecuTorch's threadpool, on the
 * calling thread or on a worker, is never jumped out of (the caller holds the pool's
 * lock, the workers run items whose context lives on its frames): fault_pool.c
 * abandons that item only and the call fails once the region completed. Where it
 * cannot (not x86-64, a fault in the pool's own code), a fault inside the pool's
 * ThreadPool::run (its library is loaded with RTLD_GLOBAL, so it is found by name)
 * ends the process like a worker's, with the notice. The handler only calls
 * async-signal-safe functions (and backtrace() and the unwinder behind it, loaded
 * before the first fault), and never allocates.
 */
#include "etops_native.h" /* Python.h first: it sets _GNU_SOURCE (REG_ERR, dl_iterate_phdr) */

#include "fault_trap.h"

#include <errno.h>
#include <stddef.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <ucontext.h>
#endif
#include <unistd.h>

/* The table the handler searches: a thread's slot holds its id and its armed trap. */
#define TRAP_SLOTS 4096
typedef struct {
  volatile int used;
  pthread_t owner;
  etf_trap* volatile trap;
  /* this thread's NoThreadPoolGuard flag (ExecuTorch's thread-local, its address
   * asked once per thread), or NULL without the threadpool library */
  volatile _Bool* pool_inline;
} TrapSlot;
static TrapSlot trap_slots[TRAP_SLOTS];

static __thread TrapSlot* thread_slot; /* this thread's, once it has one */
static __thread int thread_has_no_slot;

static const int TRAPPED_SIGNALS[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
#define N_TRAPPED ((int)(sizeof TRAPPED_SIGNALS / sizeof TRAPPED_SIGNALS[0]))

/* The handler each signal had before etops' (what a fault outside a trap goes to). */
static struct sigaction previous[N_TRAPPED];

/* The thread handing a fault on (0: none): a handler chained to that calls us again
 * on that thread (faulthandler re-raises after restoring its own predecessor) gets
 * the default action. */
static volatile pthread_t chaining_thread;

/* ExecuTorch's ThreadPool::run (0, 0 until its library is loaded): a return
 * address in it means the calling thread is in a parallel region, holding the lock. */
static uintptr_t pool_text_lo, pool_text_hi;

/* ExecuTorch's ThreadPool::run, the one frame that holds the pool's lock while the
 * calling thread runs its share of a parallel region (parallel_for itself, in the
 * same library, runs small ranges inline and holds nothing). */
#define POOL_RUN_SYMBOL "_ZN10executorch9extension10threadpool10ThreadPool3runENS_7runtime11FunctionRefIFvmEEEm"

/* ExecuTorch's NoThreadPoolGuard state, a thread-local bool: dlsym gives the calling
 * thread's instance, so each thread asks once (first_trap_of_thread) and then
 * stores to it directly (two calls through the library cost more than a small
 * kernel's call overhead). */
#define POOL_GUARD_FLAG_SYMBOL "_ZN10executorch9extension10threadpool25NoThreadPoolGuard_enabledE"

static void find_pool_run(void) {
  void* run = dlsym(RTLD_DEFAULT, POOL_RUN_SYMBOL);
  Dl_info info;
  const ElfW(Sym)* sym = NULL;
  if (run == NULL || dladdr1(run, &info, (void**)&sym, RTLD_DL_SYMENT) == 0 || sym == NULL) return;
  pool_text_lo = (uintptr_t)run;
  pool_text_hi = pool_text_lo + (uintptr_t)(sym->st_size > 0 ? sym->st_size : 1);
  etf_pool_items_init(run); /* fault_pool.c: a fault in an item skips the item */
}


const char* etf_signal_name(int signo) {
  switch (signo) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "a signal";
  }
}

static int slot_of(int signo) {
  for (int i = 0; i < N_TRAPPED; i++) {
    if (TRAPPED_SIGNALS[i] == signo) return i;
  }
  return -1;
}

/* ---- async-signal-safe output -------------------------------------------------- */

static void say(const char* s) {
  size_t n = strlen(s);
  while (n > 0) {
    ssize_t w = write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

static void say_hex(uint64_t v) {
  char buf[19] = "0x";
  int len = 2;
  int started = 0;
  for (int shift = 60; shift >= 0; shift -= 4) {
    int d = (int)((v >> shift) & 0xF);
    if (d != 0 || started || shift == 0) {
      buf[len++] = "0123456789abcdef"[d];
      started = 1;
    }
  }
  buf[len] = '\0';
  say(buf);
}

/* ---- the fault's details ------------------------------------------------------- */

static void describe(int signo, const siginfo_t* info, const void* context, etf_fault* out) {
  out->signo = signo;
  out->code = info != NULL ? info->si_code : 0;
  out->address = info != NULL ? (uint64_t)(uintptr_t)info->si_addr : 0;
  out->pc = 0;
  out->is_write = -1;
#if defined(__x86_64__) && defined(REG_ERR) && defined(REG_RIP)
  if (context != NULL) {
    const ucontext_t* uc = (const ucontext_t*)context;
    out->pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
    if (signo == SIGSEGV) out->is_write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
  }
#elif defined(__aarch64__) && defined(__linux__)
  if (context != NULL) out->pc = (uint64_t)((const ucontext_t*)context)->uc_mcontext.pc;
#else
  (void)context;
#endif
}

/* Whether the fault happened inside ThreadPool::run holding the pool's lock: a
 * return address on this thread's stack lies in it, and no NoThreadPoolGuard is on. */
static int in_parallel_region(const TrapSlot* slot) {
  if (pool_text_hi == 0) return 0;
  /* under NoThreadPoolGuard, ThreadPool::run runs the range inline, holding nothing */
  if (slot->pool_inline != NULL && *slot->pool_inline) return 0;
  void* frames[128];
  int n = backtrace(frames, 128);
  for (int i = 0; i < n; i++) {
    uintptr_t a = (uintptr_t)frames[i];
    if (a >= pool_text_lo && a < pool_text_hi) return 1;
  }
  return 0;
}

/* The kernel running on any thread (bridge.cpp), for the notices. */
extern const char* etb_running_kernel(void);

static void notice(const char* why, int signo, const etf_fault* f) {
  const char* op = etb_running_kernel();
  say("etops: ");
  say(etf_signal_name(signo));
  say(" at ");
  say_hex(f->address);
  say(why);
  if (op != NULL) {
    say(" while ExecuTorch kernel ");
    say(op);
    say(" was running");
  }
  say(": the process cannot go on\n");
}

/* Hands the fault to the handler installed before etops' (or the default action). */
/* This thread's slot in the handler (a search: no thread-local read), or NULL. */
static TrapSlot* slot_in_handler(void) {
  pthread_t self = pthread_self();
  for (int i = 0; i < TRAP_SLOTS; i++) {
    if (trap_slots[i].used && pthread_equal(trap_slots[i].owner, self)) return &trap_slots[i];
  }
  return NULL;
}

static void chain(int signo, siginfo_t* info, void* context) {
  int chaining = chaining_thread != 0 && pthread_equal(chaining_thread, pthread_self());
  int slot = slot_of(signo);
  struct sigaction* prev = slot >= 0 ? &previous[slot] : NULL;
  if (!chaining && prev != NULL && (prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction != NULL) {
    chaining_thread = pthread_self();
    prev->sa_sigaction(signo, info, context);
    chaining_thread = 0;
    return;
  }
  if (!chaining && prev != NULL && !(prev->sa_flags & SA_SIGINFO) && prev->sa_handler != SIG_DFL &&
      prev->sa_handler != SIG_IGN) {
    chaining_thread = pthread_self();
    prev->sa_handler(signo);
    chaining_thread = 0;
    return;
  }
  /* The default action: on return the faulting instruction runs again and the
   * signal, no longer caught, ends the process (with a core where enabled); a
   * signal sent by kill() is raised again. */
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(signo, &dfl, NULL);
  if (info == NULL || info->si_code <= 0) raise(signo);
}

static void on_fault(int signo, siginfo_t* info, void* context) {
  int saved_errno = errno;
  int chaining = chaining_thread != 0 && pthread_equal(chaining_thread, pthread_self());
  TrapSlot* slot = chaining ? NULL : slot_in_handler();
  etf_trap* trap = slot != NULL ? slot->trap : NULL;
  etf_fault f;
  describe(signo, info, context, &f);
  if (trap != NULL) {
    /* an item of a region on the pool (the item's own NoThreadPoolGuard hides it
     * from in_parallel_region): the item is abandoned, not the region */
    if (etf_skip_pool_item(context, &f)) goto resume;
    if (!in_parallel_region(slot)) {
      slot->trap = trap->outer; /* popped: a fault from here on is not this call's */
      trap->fault = f;
      siglongjmp(trap->env, 1);
    }
    notice(" inside a parallel region of ExecuTorch's threadpool (its lock stays held)", signo, &f);
  } else if (!chaining && etb_running_kernel() != NULL) {
    /* a worker's item of an etops call's region: skipped, the call fails */
    if (etf_pool_calls > 0 && etf_skip_pool_item(context, &f)) goto resume;
    notice(" on a thread that runs no etops call (a threadpool worker)", signo, &f);
  }
  chain(signo, info, context);
resume:
  errno = saved_errno;
}

/* ---- installation -------------------------------------------------------------- */

volatile bool* etf_pool_flag(etf_trap** slot) {
  return ((TrapSlot*)((char*)slot - offsetof(TrapSlot, trap)))->pool_inline;
}

static int handed_over;   /* etf_hand_over was called: etf_install does nothing */
static int guarded_here;  /* etf_trap_guarded_here was called: no probes, faults trapped */

void etf_hand_over(void) { handed_over = 1; }

void etf_trap_guarded_here(void) { guarded_here = 1; }

int etf_handed_over(void) { return handed_over || guarded_here; }

int etf_install(void) {
  static int primed = 0;
  if (handed_over) return 0;
  if (!primed) {
    /* backtrace() loads its unwinder on first use, which is not signal-safe: now */
    void* frame[2];
    (void)backtrace(frame, 2);
    primed = 1;
  }
  if (pool_text_hi == 0) find_pool_run();
  struct sigaction mine;
  memset(&mine, 0, sizeof mine);
  mine.sa_sigaction = on_fault;
  /* SA_NODEFER: the jump back leaves the handler without sigreturn, so the signal
   * must not stay blocked (a second fault would then kill the process). */
  mine.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&mine.sa_mask);
  for (int i = 0; i < N_TRAPPED; i++) {
    struct sigaction current;
    if (sigaction(TRAPPED_SIGNALS[i], NULL, &current) != 0) return -1;
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_fault) continue;
    if (sigaction(TRAPPED_SIGNALS[i], &mine, &previous[i]) != 0) return -1;
  }
  return 0;
}

/* ---- per-thread slots and alternate stacks --------------------------------------- */

static pthread_key_t thread_key;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;
static const char NO_ALTSTACK = 0; /* the key's value for a thread that kept its own */

/* At thread exit: the slot goes back to the table, an alternate stack etops gave
 * the thread is freed. */
static void release_thread(void* altstack) {
  if (thread_slot != NULL) {
    thread_slot->trap = NULL;
    __atomic_store_n(&thread_slot->used, 0, __ATOMIC_RELEASE);
    thread_slot = NULL;
  }
  if (altstack != &NO_ALTSTACK) {
    stack_t off;
    memset(&off, 0, sizeof off);
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, NULL);
    free(altstack);
  }
}

static void make_thread_key(void) { (void)pthread_key_create(&thread_key, release_thread); }

/* An alternate signal stack for this thread when it has none (a stack overflow in a
 * kernel is then trapped too): what release_thread gets. */
static void* give_altstack(void) {
  stack_t current;
  if (sigaltstack(NULL, &current) != 0 || !(current.ss_flags & SS_DISABLE)) return (void*)&NO_ALTSTACK;
  stack_t alt;
  alt.ss_size = 64 * 1024;
  alt.ss_sp = malloc(alt.ss_size);
  alt.ss_flags = 0;
  if (alt.ss_sp == NULL) return (void*)&NO_ALTSTACK;
  if (sigaltstack(&alt, NULL) != 0) {
    free(alt.ss_sp);
    return (void*)&NO_ALTSTACK;
  }
  return alt.ss_sp;
}

/* This thread's first kernel call: a slot, an alternate stack, the exit hook. */
static Py_NO_INLINE etf_trap** first_trap_of_thread(void) {
  if (thread_has_no_slot) return NULL;
  pthread_once(&thread_key_once, make_thread_key);
  for (int i = 0; i < TRAP_SLOTS; i++) {
    int expected = 0;
    if (trap_slots[i].used == 0 &&
        __atomic_compare_exchange_n(&trap_slots[i].used, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      trap_slots[i].trap = NULL;
      trap_slots[i].pool_inline = (volatile _Bool*)dlsym(RTLD_DEFAULT, POOL_GUARD_FLAG_SYMBOL);
      trap_slots[i].owner = pthread_self();
      thread_slot = &trap_slots[i];
      (void)pthread_setspecific(thread_key, give_altstack());
      return (etf_trap**)&thread_slot->trap;
    }
  }
  thread_has_no_slot = 1;
  return NULL;
}

etf_trap** etf_thread_trap(void) {
  TrapSlot* s = thread_slot;
  if (s != NULL) return (etf_trap**)&s->trap;
  return first_trap_of_thread();
}
