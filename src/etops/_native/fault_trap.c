/*
 * fault_trap.c - the process's handler for synchronous faults (fault_trap.h).
 *
 * A SIGSEGV, SIGBUS, SIGFPE or SIGILL on a thread whose kernel call armed a trap
 * (bridge.cpp's run_trapped) is recorded there and jumped back to: the call fails
 * with ETB_ERR_CRASHED and the process goes on. A fault anywhere else is not etops'
 * to handle: when a kernel call is running on some thread (a threadpool worker
 * faulted) it prints a notice naming that kernel, then hands the fault to the
 * handler installed before etops' (faulthandler, torch's) or to the default action,
 * exactly as if etops had not been there. A SIGABRT (a kernel calling abort()) is
 * never trapped: while a kernel call runs it prints a notice naming the kernel, then
 * goes on the same way, so the process still ends with SIGABRT.
 *
 * Handlers installed or removed after etops' (faulthandler, signal.signal, another
 * library) keep working as their owners expect: etops goes back on top of a handler
 * installed over it (etf_install), and each installation is a function of its own
 * remembering what it displaced, so a handler that saved etops' and restores it
 * later (faulthandler.disable) restores an installation that chains to what was below
 * it then, not to the handler just removed.
 *
 * A fault at the end of the faulting thread's stack is recorded as a stack overflow
 * (is_stack_overflow: the guard below the stack each thread's slot records, or the
 * stack pointer next to the address), for KernelCrashed and the notices.
 *
 * A fault inside an item of a parallel region of ExecuTorch's threadpool, on the
 * calling thread or on a worker, is never jumped out of (the caller holds the pool's
 * lock, the workers run items whose context lives on its frames): fault_pool.c
 * abandons that item only and the call fails once the region completed. Where it
 * cannot (not x86-64: fault_pool.c; a fault in the pool's own code), a fault inside the pool's
 * ThreadPool::run (its library is loaded with RTLD_GLOBAL, so it is found by name)
 * ends the process like a worker's, with the notice. The handler only calls
 * async-signal-safe functions (and backtrace() and the unwinder behind it, loaded
 * before the first fault), and never allocates.
 */
#include "etops_native.h" /* Python.h first: it sets _GNU_SOURCE (dl_iterate_phdr) */

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
  /* the thread's stack: its lowest usable address and how far below it the guard
   * reaches (0, 0: unknown), asked once per thread (a fault there: a stack overflow) */
  uintptr_t stack_lo, stack_guard;
} TrapSlot;
static TrapSlot trap_slots[TRAP_SLOTS];

static __thread TrapSlot* thread_slot; /* this thread's, once it has one */
static __thread int thread_has_no_slot;

/* The signals etops handles: the faults it traps, and SIGABRT, never trapped (a notice). */
static const int HANDLED_SIGNALS[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define N_HANDLED ((int)(sizeof HANDLED_SIGNALS / sizeof HANDLED_SIGNALS[0]))

/* Installations of etops' handler one signal can have stacked: each time another
 * handler displaced it, etf_install puts a new one on top (a function of its own,
 * HANDLERS[n]); beyond INSTALLS the newest is reused. */
#define INSTALLS 16

/* The handler each installation of etops' displaced (what a fault outside a trap
 * goes to), by signal and installation. */
static struct sigaction previous[N_HANDLED][INSTALLS];

/* Installations in use by signal: the newest is installed[i] - 1 (0: none yet). */
static int installed[N_HANDLED];

/* etops' own abort paths printed why the process ends (etf_abort_explained). */
static volatile sig_atomic_t abort_explained;

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
  for (int i = 0; i < N_HANDLED; i++) {
    if (HANDLED_SIGNALS[i] == signo) return i;
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

/* How far from the stack pointer a stack's overflow touches: a call pushes just below
 * it, a frame's first store may lie anywhere in the frame above it, stack probes reach
 * a few pages below it. Memory this close to a live stack pointer that is not mapped
 * can only be the end of the stack. */
#define NEAR_STACK_POINTER (64 * 1024)

/* Whether a SIGSEGV or SIGBUS at `address`, with the stack pointer at `sp` (0:
 * unknown), ran out of the thread's stack. Where `slot` recorded the stack (a thread
 * that called etops): the address lies in the guard below it, or the stack pointer
 * is at its end and the address next to it (a frame larger than the guard stepped
 * over it). Elsewhere: the address lies next to the stack pointer. Decided from the
 * addresses, for the fault record and the notices. */
static int is_stack_overflow(const TrapSlot* slot, uint64_t address, uint64_t sp) {
  int near_sp = sp != 0 && address + NEAR_STACK_POINTER >= sp && address < sp + NEAR_STACK_POINTER;
  if (slot == NULL || slot->stack_lo == 0) return near_sp;
  if (address < slot->stack_lo && address + slot->stack_guard >= slot->stack_lo) return 1;
  return near_sp && sp < slot->stack_lo + NEAR_STACK_POINTER;
}

static void describe(int signo, const siginfo_t* info, const void* context, const TrapSlot* slot, etf_fault* out) {
  out->signo = signo;
  out->code = info != NULL ? info->si_code : 0;
  out->address = info != NULL ? (uint64_t)(uintptr_t)info->si_addr : 0;
  etf_frame frame;
  etf_read_frame(signo, info, context, &frame);
  out->pc = frame.pc;
  out->is_write = frame.is_write;
  uint64_t sp = frame.sp;
  out->stack_overflow = (signo == SIGSEGV || signo == SIGBUS) && is_stack_overflow(slot, out->address, sp);
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
  if (f->stack_overflow) say(" (a stack overflow: the thread's stack is exhausted)");
  say(why);
  if (op != NULL) {
    say(" while ExecuTorch kernel ");
    say(op);
    say(" was running");
  }
  say(": the process cannot go on\n");
}

static int handed_over;   /* etf_hand_over was called: etf_install does nothing */
static int guarded_here;  /* etf_trap_guarded_here was called: no probes, faults trapped */

/* Before a SIGABRT goes on: which kernel was running (nothing when none was, or
 * when etops' own abort path said it already). */
static void abort_notice(void) {
  const char* op = etb_running_kernel();
  if (op == NULL || abort_explained || handed_over || guarded_here) return;
  say("etops: SIGABRT (abort) while ExecuTorch kernel ");
  say(op);
  say(" was running: the process cannot go on\n");
}

void etf_abort_explained(void) { abort_explained = 1; }

/* This thread's slot in the handler (a search: no thread-local read), or NULL. */
static TrapSlot* slot_in_handler(void) {
  pthread_t self = pthread_self();
  for (int i = 0; i < TRAP_SLOTS; i++) {
    if (trap_slots[i].used && pthread_equal(trap_slots[i].owner, self)) return &trap_slots[i];
  }
  return NULL;
}

/* Hands the signal to the handler installation `install` of etops' displaced (or
 * the default action). */
static void chain(int install, int signo, siginfo_t* info, void* context) {
  int chaining = chaining_thread != 0 && pthread_equal(chaining_thread, pthread_self());
  int slot = slot_of(signo);
  struct sigaction* prev = slot >= 0 ? &previous[slot][install] : NULL;
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
   * signal sent by kill() or raise() (abort()) is raised again. */
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(signo, &dfl, NULL);
  if (info == NULL || info->si_code <= 0) raise(signo);
}

/* etops' handler, as installation `install` (what it chains to). */
static void on_fault(int install, int signo, siginfo_t* info, void* context) {
  int saved_errno = errno;
  int chaining = chaining_thread != 0 && pthread_equal(chaining_thread, pthread_self());
  TrapSlot* slot = chaining ? NULL : slot_in_handler();
  etf_trap* trap = slot != NULL && signo != SIGABRT ? slot->trap : NULL;
  etf_fault f;
  describe(signo, info, context, slot, &f);
  if (trap != NULL) {
    /* an item of a region on the pool (the item's own NoThreadPoolGuard hides it
     * from in_parallel_region): the item is abandoned, not the region */
    if (etf_skip_pool_item(context, &f)) goto resume;
    if (!in_parallel_region(slot)) {
      slot->trap = trap->outer; /* popped: a fault from here on is not this call's */
      trap->fault = f;
      siglongjmp(trap->env, 1);
    }
    notice(etf_pool_items_skipped ? " inside a parallel region of ExecuTorch's threadpool (its lock stays held)"
                                  : " inside a parallel region of ExecuTorch's threadpool (its lock stays held; "
                                    "abandoning one item of a region is x86-64 only)",
           signo, &f);
  } else if (!chaining && signo == SIGABRT) {
    abort_notice();
  } else if (!chaining && etb_running_kernel() != NULL) {
    /* a worker's item of an etops call's region: skipped, the call fails */
    if (etf_pool_calls > 0 && etf_skip_pool_item(context, &f)) goto resume;
    notice(etf_pool_items_skipped ? " on a thread that runs no etops call (a threadpool worker)"
                                  : " on a thread that runs no etops call (a threadpool worker; abandoning one item "
                                    "of a region is x86-64 only)",
           signo, &f);
  }
  chain(install, signo, info, context);
resume:
  errno = saved_errno;
}

/* One function per installation: which one the kernel calls says what it displaced. */
#define ON_FAULT_AS(n) \
  static void on_fault_##n(int signo, siginfo_t* info, void* context) { on_fault(n, signo, info, context); }
ON_FAULT_AS(0) ON_FAULT_AS(1) ON_FAULT_AS(2) ON_FAULT_AS(3) ON_FAULT_AS(4) ON_FAULT_AS(5) ON_FAULT_AS(6)
ON_FAULT_AS(7) ON_FAULT_AS(8) ON_FAULT_AS(9) ON_FAULT_AS(10) ON_FAULT_AS(11) ON_FAULT_AS(12) ON_FAULT_AS(13)
ON_FAULT_AS(14) ON_FAULT_AS(15)
static void (*const HANDLERS[INSTALLS])(int, siginfo_t*, void*) = {
    on_fault_0, on_fault_1, on_fault_2,  on_fault_3,  on_fault_4,  on_fault_5,  on_fault_6,  on_fault_7,
    on_fault_8, on_fault_9, on_fault_10, on_fault_11, on_fault_12, on_fault_13, on_fault_14, on_fault_15};

/* Which installation of etops' handler `action` is, or -1 (another handler). */
static int installation_of(const struct sigaction* action) {
  if (!(action->sa_flags & SA_SIGINFO)) return -1;
  for (int n = 0; n < INSTALLS; n++) {
    if (action->sa_sigaction == HANDLERS[n]) return n;
  }
  return -1;
}

/* ---- installation -------------------------------------------------------------- */

volatile bool* etf_pool_flag(etf_trap** slot) {
  return ((TrapSlot*)((char*)slot - offsetof(TrapSlot, trap)))->pool_inline;
}

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
  /* SA_NODEFER: the jump back leaves the handler without sigreturn, so the signal
   * must not stay blocked (a second fault would then kill the process). */
  mine.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&mine.sa_mask);
  for (int i = 0; i < N_HANDLED; i++) {
    struct sigaction current;
    if (sigaction(HANDLED_SIGNALS[i], NULL, &current) != 0) return -1;
    int on_top = installation_of(&current);
    if (on_top >= 0) { /* etops' is in place: the installations after it were removed */
      installed[i] = on_top + 1;
      continue;
    }
    /* another handler (or none) is in place: a new installation over it, knowing
     * what it displaced before the kernel can call it */
    int n = installed[i] < INSTALLS ? installed[i] : INSTALLS - 1;
    previous[i][n] = current;
    mine.sa_sigaction = HANDLERS[n];
    if (sigaction(HANDLED_SIGNALS[i], &mine, NULL) != 0) return -1;
    installed[i] = n + 1;
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

/* The guard below a thread's stack as far as the kernel keeps it for the main
 * thread (its stack_guard_gap: 256 pages), for which glibc reports no guard size. */
#define MAIN_STACK_GAP (1024 * 1024)

/* Records this thread's stack in `s` (nothing where it cannot be asked). */
static void record_stack(TrapSlot* s) {
  s->stack_lo = s->stack_guard = 0;
#if defined(__linux__)
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void* lowest = NULL;
  size_t size = 0, guard = 0;
  if (pthread_attr_getstack(&attr, &lowest, &size) == 0 && pthread_attr_getguardsize(&attr, &guard) == 0) {
    s->stack_lo = (uintptr_t)lowest;
    s->stack_guard = guard > 0 ? guard : MAIN_STACK_GAP;
  }
  pthread_attr_destroy(&attr);
#endif
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
      record_stack(&trap_slots[i]);
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
