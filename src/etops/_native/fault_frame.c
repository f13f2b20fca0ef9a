/*
 * fault_frame.c - what the interrupted context of a synchronous fault says: the
 * program counter, the stack pointer and, for a SIGSEGV, whether the access was a
 * write (fault_trap.h, etf_read_frame). One reader for the trap (fault_trap.c) and
 * the guard's reporter (guard_signals.c), per architecture:
 *
 * - x86-64: the page-fault error code's write bit (gregs[REG_ERR] & 2).
 * - aarch64 (Linux): the exception syndrome the kernel puts in the sigcontext's
 *   records (an `esr_context`, ESR_MAGIC): a data abort's WnR bit, a cache
 *   maintenance operation counting as a read. A frame without that record (qemu-user
 *   writes none) falls back to the faulting instruction itself, decoded from the
 *   A64 load/store encodings (a store, a load, or an atomic read-modify-write,
 *   which writes); an instruction fetch fault (pc == address) or an encoding not
 *   recognised stays unknown (-1).
 * - elsewhere: pc and sp when the platform's ucontext has them, direction unknown.
 *
 * Async-signal-safe: it reads the context and, on aarch64 without a syndrome, the
 * four bytes at pc (mapped and executable: the fault is a data fault elsewhere).
 */
#include "etops_native.h" /* Python.h first: it sets _GNU_SOURCE (REG_ERR) */

#include "fault_trap.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#if defined(__linux__)
#include <ucontext.h>
#endif

/* An A64 instruction's memory direction: 1 store (or a read-modify-write), 0 load,
 * -1 not a load/store (or one not recognised). */
int etf_a64_is_write(uint32_t insn) {
  if ((insn & 0x0a000000u) != 0x08000000u) return -1; /* op0 x1x0: the loads and stores */
  unsigned op0 = insn >> 28, op2 = (insn >> 23) & 3;
  int vector = (insn >> 26) & 1, load = (insn >> 22) & 1;
  if ((op0 & 3) == 0) {
    if (!vector && ((insn >> 23) & 1) && ((insn >> 21) & 1)) return 1; /* compare-and-swap (o2, o1) */
    return !load; /* exclusives, acquire/release, SIMD structures (LD1/ST1...): bit 22 is L */
  }
  if ((op0 & 3) == 1) {
    if ((insn & 0x3b000000u) == 0x18000000u) return 0; /* load register (literal) */
    return -1;                                          /* memory tags, RCpc: not decoded */
  }
  if ((op0 & 3) == 2) return !load; /* load/store pair (all four addressing forms): bit 22 is L */
  /* op0 x11: load/store register, every addressing form */
  if (op2 < 2 && ((insn >> 21) & 1) && ((insn >> 10) & 3) == 0 && !vector) return 1; /* atomic memory operation */
  unsigned opc = (insn >> 22) & 3;
  if (vector) return !(opc & 1); /* FP/SIMD: opc 00/10 store, 01/11 load */
  return opc == 0;               /* opc 00 store, 01 load, 1x sign-extending load (or prefetch) */
}

/* The sigcontext's records (the kernel's uapi asm/sigcontext.h: a chain of
 * {magic, size} headers in __reserved, ended by a zero magic). Spelled here: that
 * header clashes with glibc's signal.h. */
#define ESR_RECORD_MAGIC 0x45535201u
typedef struct {
  uint32_t magic;
  uint32_t size;
} RecordHead;

/* The exception syndrome of the esr_context record among a sigcontext's `records`
 * (its __reserved, `limit` bytes): 1 with *esr, 0 without one. */
static int frame_syndrome(const unsigned char* records, size_t limit, uint64_t* esr) {
  size_t at = 0;
  while (at + sizeof(RecordHead) <= limit) {
    RecordHead head;
    memcpy(&head, records + at, sizeof head);
    if (head.magic == 0 || head.size < sizeof head || at + head.size > limit) return 0;
    if (head.magic == ESR_RECORD_MAGIC && head.size >= sizeof head + sizeof *esr) {
      memcpy(esr, records + at + sizeof head, sizeof *esr);
      return 1;
    }
    at += head.size;
  }
  return 0;
}

/* A data abort's direction from its syndrome: 1 write, 0 read, -1 not a data abort. */
static int syndrome_is_write(uint64_t esr) {
  unsigned ec = (unsigned)(esr >> 26) & 0x3f;
  if (ec != 0x24 && ec != 0x25) return -1; /* data abort from EL0 / the same EL */
  if (esr & (1u << 8)) return 0;           /* CM: a cache maintenance operation reads */
  return (esr >> 6) & 1;                   /* WnR */
}

/* The direction of a SIGSEGV from aarch64 sigcontext records and the faulting
 * instruction word: the syndrome's when the records hold one, else the instruction's. */
int etf_aarch64_direction(const unsigned char* records, size_t limit, uint32_t insn) {
  uint64_t esr;
  if (frame_syndrome(records, limit, &esr)) return syndrome_is_write(esr);
  return etf_a64_is_write(insn);
}

#if defined(__aarch64__) && defined(__linux__)

void etf_read_frame(int signo, const siginfo_t* info, const void* context, etf_frame* out) {
  out->pc = out->sp = 0;
  out->is_write = -1;
  if (context == NULL) return;
  const mcontext_t* mc = &((const ucontext_t*)context)->uc_mcontext;
  out->pc = (uint64_t)mc->pc;
  out->sp = (uint64_t)mc->sp;
  if (signo != SIGSEGV) return;
  const unsigned char* records = (const unsigned char*)mc->__reserved;
  uint64_t esr;
  if (frame_syndrome(records, sizeof mc->__reserved, &esr)) {
    out->is_write = syndrome_is_write(esr);
    return;
  }
  if (info != NULL && (uint64_t)(uintptr_t)info->si_addr == out->pc) return; /* an instruction fetch */
  uint32_t insn;
  memcpy(&insn, (const void*)(uintptr_t)mc->pc, sizeof insn);
  out->is_write = etf_a64_is_write(insn);
}

#else

void etf_read_frame(int signo, const siginfo_t* info, const void* context, etf_frame* out) {
  (void)info;
  out->pc = out->sp = 0;
  out->is_write = -1;
#if defined(__x86_64__) && defined(REG_ERR) && defined(REG_RIP)
  if (context == NULL) return;
  const ucontext_t* uc = (const ucontext_t*)context;
  out->pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
  out->sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
  if (signo == SIGSEGV) out->is_write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
  (void)signo;
  (void)context;
#endif
}

#endif

/* a64_is_write(word) -> 1, 0 or -1: etf_a64_is_write, for the tests (any host). */
static PyObject* a64_is_write(PyObject* module, PyObject* arg) {
  (void)module;
  unsigned long word = PyLong_AsUnsignedLong(arg);
  if (word == (unsigned long)-1 && PyErr_Occurred()) return NULL;
  if (word > 0xffffffffUL) {
    PyErr_SetString(PyExc_ValueError, "a64_is_write: word must be a 32-bit instruction word");
    return NULL;
  }
  return PyLong_FromLong(etf_a64_is_write((uint32_t)word));
}

/* aarch64_direction(records, word) -> 1, 0 or -1: etf_aarch64_direction over a
 * sigcontext's records (bytes) and an instruction word, for the tests (any host). */
static PyObject* aarch64_direction(PyObject* module, PyObject* args) {
  (void)module;
  Py_buffer records;
  unsigned long word;
  if (!PyArg_ParseTuple(args, "y*k:aarch64_direction", &records, &word)) return NULL;
  int direction = etf_aarch64_direction((const unsigned char*)records.buf, (size_t)records.len, (uint32_t)word);
  PyBuffer_Release(&records);
  return PyLong_FromLong(direction);
}

PyMethodDef etops_fault_frame_methods[] = {
    {"aarch64_direction", aarch64_direction, METH_VARARGS,
     "aarch64_direction(records, word): a SIGSEGV's direction from aarch64 sigcontext records (esr_context's "
     "syndrome) or, without one, from the faulting instruction word: 1 write, 0 read, -1 unknown."},
    {"a64_is_write", a64_is_write, METH_O,
     "a64_is_write(word): an A64 instruction word's memory direction, 1 store (or read-modify-write), 0 load, -1 "
     "not recognised (what a fault's direction falls back to without an exception syndrome)."},
    {NULL, NULL, 0, NULL},
};
