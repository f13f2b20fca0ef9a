/*
 * fault_state.c - what a trapped fault leaves behind, and the calls that must
 * therefore run guarded.
 *
 * A fault the trap turned into KernelCrashed (fault_trap.c, bridge.cpp) abandoned
 * the kernel's frames, and whatever they held stays held. Two marks follow, decided
 * here from structured values only:
 *
 * - the kernel's own mark (KernelObject.faulted_epoch): a kernel's locks cannot be
 *   seen, so after ANY trapped fault its later calls run in the guard process
 *   (etops.guard), where a deadlock is a GuardTimeout, never a hang of this process;
 * - the process's taint: the fault's program counter was in code whose state every
 *   later call shares (the C library and its allocator, the dynamic loader, the C++
 *   allocator of libstdc++; site_of_pc, dladdr on the pc after the jump back) or the
 *   faulting thread held ExecuTorch's threadpool lock. Every later kernel call, of
 *   any kernel, runs guarded (or is refused where it cannot be).
 *
 * Both last until etops.clear_taint() (clear_taint below bumps the epoch). Not in a
 * process whose guard pages judge the kernels (a guard process, etops.guard.here's
 * task processes: etf_handed_over), whose guarded calls run the kernel themselves.
 */
#include "etops_native.h" /* Python.h first: it sets _GNU_SOURCE (dladdr) */

#include <dlfcn.h>
#include <string.h>

#include "fault_state.h"
#include "kernel_internal.h"

uint64_t etops_fault_epoch = 1;
int etops_process_tainted;

/* The taint's cause: its site (FAULT_SITE_*) and the kernel that faulted. */
static int taint_site;
static char taint_op[256];

/* Python's name of each site (Fault.site, etops.taint()). */
static const char* const SITE_NAMES[FAULT_SITE_COUNT] = {
    [FAULT_SITE_KERNEL] = "",
    [FAULT_SITE_LIBC] = "libc",
    [FAULT_SITE_LOADER] = "loader",
    [FAULT_SITE_ALLOCATOR] = "allocator",
    [FAULT_SITE_POOL] = "threadpool",
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

void etops_note_fault(KernelObject* k, int site) {
  k->faulted_epoch = etops_fault_epoch;
  if (site != FAULT_SITE_KERNEL && !etops_process_tainted) {
    etops_process_tainted = 1;
    taint_site = site;
    snprintf(taint_op, sizeof taint_op, "%s", k->op_name != NULL ? k->op_name : "");
  }
}

int etops_must_guard_now(void) { return !etf_handed_over(); }

/* ---- Python: etops._native.taint_state(), clear_taint() ------------------------- */

static PyObject* taint_state(PyObject* module, PyObject* noargs) {
  if (!etops_process_tainted) Py_RETURN_NONE;
  return Py_BuildValue("(ss)", etops_fault_site_name(taint_site), taint_op);
}

static PyObject* clear_taint(PyObject* module, PyObject* noargs) {
  etops_process_tainted = 0;
  taint_site = FAULT_SITE_KERNEL;
  taint_op[0] = '\0';
  etops_fault_epoch++; /* every kernel's mark is of an earlier epoch now */
  Py_RETURN_NONE;
}

static PyObject* kernel_faulted(PyObject* module, PyObject* kernel) {
  etops_state* st = PyModule_GetState(module);
  if (!PyObject_TypeCheck(kernel, (PyTypeObject*)st->kernel_type)) {
    PyErr_Format(PyExc_TypeError, "kernel_faulted: argument 'kernel' must be a Kernel, not %.100s",
                 Py_TYPE(kernel)->tp_name);
    return NULL;
  }
  return PyBool_FromLong(((KernelObject*)kernel)->faulted_epoch == etops_fault_epoch);
}

PyMethodDef etops_fault_state_methods[] = {
    {"taint_state", taint_state, METH_NOARGS,
     "taint_state() -> None, or (site, kernel): the process is tainted since that kernel faulted with its "
     "program counter in `site` ('libc', 'loader', 'allocator', 'threadpool'); every kernel call runs guarded"},
    {"clear_taint", clear_taint, METH_NOARGS,
     "clear_taint(): the process's taint and every kernel's fault mark cleared: calls run in-process again"},
    {"kernel_faulted", kernel_faulted, METH_O,
     "kernel_faulted(kernel) -> bool: whether the kernel faulted since the last clear_taint() (its calls run "
     "guarded)"},
    {NULL, NULL, 0, NULL},
};
