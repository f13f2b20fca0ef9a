/*
 * fault_state.c - what a trapped fault leaves behind, and the calls that must
 * therefore run guarded.
 *
 * A fault the trap turned into KernelCrashed (fault_trap.c, bridge.cpp) abandoned
 * the kernel's frames, and whatever they held stays held. Two marks follow, decided
 * here from structured values only:
 *
 * - the kernel's own mark (KernelObject.faulted_epoch, compared with
 *   etops_guarded_from on every call): a kernel's locks cannot be
 *   seen, so after ANY trapped fault its later calls run in the guard process
 *   (etops.guard), where a deadlock is a GuardTimeout, never a hang of this process;
 * - the process's taint: the fault's program counter was in code whose state every
 *   later call shares (the C library and its allocator, the dynamic loader, the C++
 *   allocator of libstdc++; etops_fault_site, dladdr on the pc after the jump back).
 *   Every later kernel call, of any kernel, runs guarded (or is refused where it
 *   cannot be: a delegate). A fault inside an item of a threadpool region holds no
 *   lock when it is reported: fault_pool.c abandons the item, not the region.
 *
 * A fault in the C library or the C++ allocator may have abandoned a malloc arena's
 * lock: etops releases a lock that stays held (etops_release_arena_locks), so that
 * this process can still allocate, raise the exception and fork a guard process.
 *
 * Both marks last until etops.clear_taint() (clear_taint below bumps the epoch). Not in a
 * process whose guard pages judge the kernels (a guard process, etops.guard.here's
 * task processes: etf_handed_over), whose guarded calls run the kernel themselves.
 */
#include "etops_native.h" /* Python.h first: it sets _GNU_SOURCE (dladdr) */

#include <dlfcn.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fault_state.h"
#include "kernel_internal.h"

uint64_t etops_fault_epoch = 1;
uint64_t etops_guarded_from = 1;
int etops_process_tainted;

/* The taint's cause: its site (FAULT_SITE_*) and the kernel that faulted. */
static int taint_site;
static char taint_op[256];
/* How many abandoned arena locks etops released (etops_release_arena_locks). */
static int arena_locks_released;

/* Python's name of each site (Fault.site, etops.taint()). */
static const char* const SITE_NAMES[FAULT_SITE_COUNT] = {
    [FAULT_SITE_KERNEL] = "",
    [FAULT_SITE_LIBC] = "libc",
    [FAULT_SITE_LOADER] = "loader",
    [FAULT_SITE_ALLOCATOR] = "allocator",
};

const char* etops_fault_site_name(int site) {
  return site > 0 && site < FAULT_SITE_COUNT ? SITE_NAMES[site] : "";
}

/* Whether `name` (a path) names a file whose base name starts with `prefix`. */
static int base_starts_with(const char* name, const char* prefix) {
  const char* slash = strrchr(name, '/');
  const char* base = slash != NULL ? slash + 1 : name;
  return strncmp(base, prefix, strlen(prefix)) == 0;
}

/* Whether `symbol` (a mangled name) is one of libstdc++'s operator new or delete:
 * _Znwm, _Znam (and their nothrow and aligned forms), _ZdlPv, _ZdaPv (sized,
 * aligned): "_Znw", "_Zna", "_Zdl", "_Zda" begin no other symbol of libstdc++. */
static int is_cxx_allocator(const char* symbol) {
  return symbol != NULL && (strncmp(symbol, "_Znw", 4) == 0 || strncmp(symbol, "_Zna", 4) == 0 ||
                            strncmp(symbol, "_Zdl", 4) == 0 || strncmp(symbol, "_Zda", 4) == 0);
}

int etops_fault_site(uint64_t pc) {
  Dl_info info;
  if (pc == 0 || dladdr((void*)(uintptr_t)pc, &info) == 0 || info.dli_fname == NULL) return FAULT_SITE_KERNEL;
  if (base_starts_with(info.dli_fname, "libc.so") || base_starts_with(info.dli_fname, "libc-")) return FAULT_SITE_LIBC;
  if (base_starts_with(info.dli_fname, "ld-linux") || base_starts_with(info.dli_fname, "ld64.so") ||
      base_starts_with(info.dli_fname, "ld-musl"))
    return FAULT_SITE_LOADER;
  if (base_starts_with(info.dli_fname, "libstdc++") && is_cxx_allocator(info.dli_sname)) return FAULT_SITE_ALLOCATOR;
  return FAULT_SITE_KERNEL;
}

/* ---- glibc's malloc arenas: their locks, seen and released ----------------------
 *
 * A fault inside malloc or free may abandon the frame that holds an arena's lock;
 * the next allocation of any thread of that arena (this one: the exception's
 * message) then waits forever, and so does fork() (the guard process), which takes
 * every arena's lock. glibc keeps its arenas in a ring starting at `main_arena`, a
 * static object of libc, each starting with its lock (an int: 0 free, 1 held, 2 held
 * with waiters). find_arenas locates main_arena once, at import while the heap is
 * sound, from a fact of glibc's layout (2.27 and later, 64-bit): a chunk freed into
 * the unsorted bin points back into main_arena, at offset ARENA_UNSORTED_BIN, and
 * the ring's link is at ARENA_NEXT (a few chunk sizes are tried: where a freed chunk
 * lands depends on the heap's state). Every found address is checked (inside libc's
 * data, the bin pointing back at the chunk, the ring closing on main_arena); when
 * a check fails, arenas are not seen and a held lock is only reported. */
#define ARENA_UNSORTED_BIN 96 /* offsetof(struct malloc_state, bins) - 2 pointers */
#define ARENA_NEXT 2160       /* offsetof(struct malloc_state, next) */
#define ARENA_RING_MAX 1024
static volatile int* main_arena_lock; /* NULL: arenas not seen */

/* Whether `p` lies inside the C library's own memory. */
static int in_libc(const void* p) {
  Dl_info info;
  return dladdr(p, &info) != 0 && info.dli_fname != NULL && base_starts_with(info.dli_fname, "libc.so");
}

/* Copies `n` bytes at `addr` of this process into `buf` through the kernel
 * (process_vm_readv), not by a load: the words read are those of a chunk just
 * freed, which ASan and valgrind rightly report when the program itself reads them
 * (and under ASan the chunk is its allocator's, so the checks below fail and arenas
 * are not seen). 0, or -1 when it could not be read. */
static int read_memory(const void* addr, void* buf, size_t n) {
  struct iovec local = {buf, n};
  struct iovec remote = {(void*)addr, n};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

/* The arena after `arena` in glibc's ring. */
static volatile int* next_arena(volatile int* arena) {
  return *(volatile int* volatile*)((volatile char*)arena + ARENA_NEXT);
}

/* One try of find_arenas with chunks of `size` bytes: main_arena's address, or
 * NULL when this chunk did not land in the unsorted bin (it went to the top chunk or
 * merged with a free neighbour: the heap's state decides) or a check failed. Every
 * word is read through read_memory, so a wrong guess reads nothing it should not. */
static volatile int* try_find_arena(size_t size, void** kept) {
  void** chunk = malloc(size);
  *kept = malloc(size); /* from the same place (the top chunk when the bins are empty): keeps chunk off it */
  if (chunk == NULL || *kept == NULL) {
    free(chunk);
    return NULL;
  }
  free(chunk);
  void* links[2]; /* the freed chunk's forward and back links */
  if (read_memory(chunk, links, sizeof links) != 0 || !in_libc(links[1])) return NULL;
  char* unsorted = (char*)links[1]; /* the unsorted bin's head, inside main_arena */
  void* first;
  int lock;
  volatile int* arena = (volatile int*)(unsorted - ARENA_UNSORTED_BIN);
  if (read_memory(unsorted + 2 * sizeof(void*), &first, sizeof first) != 0 || first != (void*)(chunk - 2) ||
      read_memory((const void*)arena, &lock, sizeof lock) != 0 || lock != 0)
    return NULL;
  volatile int* a = arena; /* the ring closes on main_arena */
  for (int i = 0; i < ARENA_RING_MAX; i++) {
    void* next;
    if (read_memory((const char*)a + ARENA_NEXT, &next, sizeof next) != 0 || next == NULL) return NULL;
    a = (volatile int*)next;
    if (a == arena) return arena;
  }
  return NULL;
}

void etops_find_arenas(void) {
#if defined(__GLIBC__) && UINTPTR_MAX == 0xffffffffffffffffu && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 27)
  if (main_arena_lock != NULL) return;
  /* too big for the thread cache and the fast bins; a few sizes: one lands in the bin */
  void* kept[8] = {0};
  for (int i = 0; i < 8 && main_arena_lock == NULL; i++) main_arena_lock = try_find_arena(1100 + 208 * (size_t)i, &kept[i]);
  for (int i = 0; i < 8; i++) free(kept[i]);
#endif
}

int etops_release_arena_locks(void) {
  int released = 0;
  if (main_arena_lock == NULL) return 0;
  volatile int* a = main_arena_lock;
  for (int i = 0; i < ARENA_RING_MAX; i++) {
    /* another thread's hold ends within microseconds; an abandoned one never does */
    int seen_free = 0;
    for (int spin = 0; spin < 200 && !seen_free; spin++) {
      if (*a == 0) {
        seen_free = 1;
      } else {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
      }
    }
    if (!seen_free) {
      int was = __atomic_exchange_n(a, 0, __ATOMIC_RELEASE);
      if (was > 1) syscall(SYS_futex, a, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
      released++;
    }
    a = next_arena(a);
    if (a == main_arena_lock) break;
  }
  return released;
}

void etops_note_fault(KernelObject* k, int site) {
  if (site == FAULT_SITE_LIBC || site == FAULT_SITE_ALLOCATOR) arena_locks_released += etops_release_arena_locks();
  k->faulted_epoch = etops_fault_epoch;
  if (site != FAULT_SITE_KERNEL && !etops_process_tainted) {
    etops_process_tainted = 1;
    etops_guarded_from = 0; /* every kernel */
    taint_site = site;
    snprintf(taint_op, sizeof taint_op, "%s", k->op_name != NULL ? k->op_name : "");
  }
}

int etops_must_guard_now(void) { return !etf_handed_over(); }

/* ---- Python: etops._native.taint_state(), clear_taint() ------------------------- */

static PyObject* taint_state(PyObject* module, PyObject* noargs) {
  if (!etops_process_tainted) Py_RETURN_NONE;
  return Py_BuildValue("(ssi)", etops_fault_site_name(taint_site), taint_op, arena_locks_released);
}

static PyObject* clear_taint(PyObject* module, PyObject* noargs) {
  etops_process_tainted = 0;
  taint_site = FAULT_SITE_KERNEL;
  taint_op[0] = '\0';
  etops_fault_epoch++; /* every kernel's mark is of an earlier epoch now */
  etops_guarded_from = etops_fault_epoch;
  Py_RETURN_NONE;
}

static PyObject* kernel_faulted(PyObject* module, PyObject* kernel) {
  etops_state* st = PyModule_GetState(module);
  if (!PyObject_TypeCheck(kernel, (PyTypeObject*)st->kernel_type)) {
    PyErr_Format(PyExc_TypeError, "kernel_faulted: argument 'kernel' must be a Kernel, not %.100s",
                 Py_TYPE(kernel)->tp_name);
    return NULL;
  }
  return PyBool_FromLong(((KernelObject*)kernel)->faulted_epoch == etops_fault_epoch);  /* its own mark, taint aside */
}

static PyObject* fault_site(PyObject* module, PyObject* pc) {
  unsigned long long value = PyLong_AsUnsignedLongLong(pc);
  if (value == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  return PyUnicode_FromString(etops_fault_site_name(etops_fault_site(value)));
}

PyMethodDef etops_fault_state_methods[] = {
    {"fault_site", fault_site, METH_O,
     "fault_site(pc) -> str: the site a fault at program counter `pc` would have (Fault.site): 'libc', "
     "'loader', 'allocator' (libstdc++'s operator new/delete) or '' (any other code)"},
    {"taint_state", taint_state, METH_NOARGS,
     "taint_state() -> None, or (site, kernel, released): the process is tainted since that kernel faulted with "
     "its program counter in `site` ('libc', 'loader', 'allocator'); every kernel call runs guarded; "
     "`released`: how many of malloc's arena locks the fault left held and etops released"},
    {"clear_taint", clear_taint, METH_NOARGS,
     "clear_taint(): the process's taint and every kernel's fault mark cleared: calls run in-process again"},
    {"kernel_faulted", kernel_faulted, METH_O,
     "kernel_faulted(kernel) -> bool: whether the kernel faulted since the last clear_taint() (its calls run "
     "guarded)"},
    {NULL, NULL, 0, NULL},
};
