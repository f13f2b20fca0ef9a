/*
 * guard_signals.c - the fault reporter of etops.guard's child processes.
 *
 * guard_signals(fd) installs, in a process that is about to run one guarded kernel
 * call and exit, handlers for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT on an
 * alternate stack. A handler writes one GuardReport (the signal, whether a SIGSEGV
 * was a write, the faulting address, the stack pointer) to `fd` and ends the process with _exit: it
 * only calls async-signal-safe functions. The parent maps the address back to the
 * argument whose guard page it hit (etops/guard/).
 *
 * trap_guarded_here(fd) is for a process that runs guarded calls itself
 * (etops.guard.here): the same reporter, behind etops' fault trap, so that a fault
 * inside a kernel call comes back as the call's KernelCrashed and the caller decides
 * whether the process may go on.
 */
#include "etops_native.h" /* Python.h first */

#include "fault_trap.h"

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the handler writes: "ETGF" then these fields, little-endian as the host. */
typedef struct {
  char magic[4];
  int32_t signo;
  int32_t is_write; /* SIGSEGV: 1 a write, 0 a read, -1 unknown (fault_frame.c) */
  int32_t code;     /* si_code */
  uint64_t address; /* si_addr */
  uint64_t stack_pointer; /* the interrupted stack pointer (0: unknown): a stack overflow's is next to address */
} GuardReport;

static int report_fd = -1;

static void on_signal(int signo, siginfo_t* info, void* context) {
  GuardReport report;
  memcpy(report.magic, "ETGF", 4);
  report.signo = signo;
  report.code = info != NULL ? info->si_code : 0;
  report.address = info != NULL ? (uint64_t)(uintptr_t)info->si_addr : 0;
  etf_frame frame;
  etf_read_frame(signo, info, context, &frame);
  report.is_write = frame.is_write;
  report.stack_pointer = frame.sp;
  ssize_t ignored = write(report_fd, &report, sizeof report);
  (void)ignored;
  _exit(128 + signo);
}

/* Installs the reporter for the fatal signals, writing to `fd`: 0, or -1 with a
 * Python exception set. */
static int install_reporter(PyObject* fd_object) {
  int fd = PyLong_AsLong(fd_object);
  if (fd == -1 && PyErr_Occurred()) return -1;
  report_fd = fd;
  stack_t alt;
  alt.ss_size = 1 << 16;
  alt.ss_sp = malloc(alt.ss_size);
  alt.ss_flags = 0;
  if (alt.ss_sp == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  if (sigaltstack(&alt, NULL) != 0) {
    PyErr_SetFromErrno(PyExc_OSError);
    return -1;
  }
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_signal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  static const int SIGNALS[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  for (size_t i = 0; i < sizeof SIGNALS / sizeof SIGNALS[0]; i++) {
    if (sigaction(SIGNALS[i], &action, NULL) != 0) {
      PyErr_SetFromErrno(PyExc_OSError);
      return -1;
    }
  }
  return 0;
}

/* guard_signals(fd) -> None: see the file comment. Call it in the child only. */
static PyObject* guard_signals(PyObject* module, PyObject* arg) {
  (void)module;
  etf_hand_over(); /* this process's faults are reported, not trapped */
  if (install_reporter(arg) < 0) return NULL;
  Py_RETURN_NONE;
}

/* trap_guarded_here(fd) -> None: in a forked process thrown away after the guarded
 * calls it runs itself (etops.guard.here). A fault in a kernel call stays trapped
 * (KernelCrashed with its address: the caller decides whether the process may go
 * on) and no call is probed (etf_trap_guarded_here); any other fatal signal goes to
 * the reporter, as in guard_signals, and ends the process. */
static PyObject* trap_guarded_here(PyObject* module, PyObject* arg) {
  (void)module;
  if (install_reporter(arg) < 0) return NULL;
  /* etops' handler in front, chaining to the reporter for faults outside a trap */
  if (etf_install() != 0) return PyErr_SetFromErrno(PyExc_OSError);
  etf_trap_guarded_here();
  Py_RETURN_NONE;
}

PyMethodDef etops_guard_methods[] = {
    {"trap_guarded_here", trap_guarded_here, METH_O,
     "trap_guarded_here(fd): in a process that runs guarded calls itself, a fault in a kernel call stays trapped "
     "(KernelCrashed with its address) and no call is probed; any other fatal signal is reported to fd and _exits."},
    {"guard_signals", guard_signals, METH_O,
     "guard_signals(fd): in a guarded call's child, report a fatal signal to fd (a GuardReport) and _exit."},
    {NULL, NULL, 0, NULL},
};
