/*
 * fault_state.h - what a trapped fault leaves behind (fault_state.c): the kernel's
 * mark and the process's taint, both sending later calls to the guard process.
 */
#ifndef ETOPS_FAULT_STATE_H
#define ETOPS_FAULT_STATE_H

#include <stdint.h>

#include "fault_trap.h"

/* Where a fault's program counter lay: code every later call shares (a taint), or not. */
enum {
  FAULT_SITE_KERNEL = 0,    /* the kernel's own code, or anything not below */
  FAULT_SITE_LIBC = 1,      /* the C library (malloc, free, memcpy, ...): its locks and heap */
  FAULT_SITE_LOADER = 2,    /* the dynamic loader: its lock */
  FAULT_SITE_ALLOCATOR = 3, /* libstdc++'s operator new / delete (the C library's malloc under them) */
  FAULT_SITE_COUNT
};

/* The current epoch (from 1): a kernel that faults gets it as its faulted_epoch;
 * etops.clear_taint() starts a new one. */
extern uint64_t etops_fault_epoch;
/* Kernels whose faulted_epoch is at least this run guarded: the current epoch, or 0
 * while the process is tainted (every kernel, faulted or not). One compare a call. */
extern uint64_t etops_guarded_from;
/* Nonzero: the process is tainted (the taint's site and kernel: taint_state()). */
extern int etops_process_tainted;

/* The site of a fault at `pc` (FAULT_SITE_*), from the library holding it (dladdr);
 * called after the jump back, never in the signal handler. */
int etops_fault_site(uint64_t pc);
/* "libc", "loader", "allocator", or "" for FAULT_SITE_KERNEL. */
const char* etops_fault_site_name(int site);

/* Finds glibc's malloc arenas (their locks), once, while the heap is sound: at import. */
void etops_find_arenas(void);
/* Releases every arena lock that stays held (for 200 ms: abandoned by a fault in
 * malloc or free on this thread); returns how many. 0 where arenas are not seen. */
int etops_release_arena_locks(void);

/* Whether a call that the marks route to the guard process may go there: not in a
 * process that runs guarded calls itself (a guard process, a task process). */
int etops_must_guard_now(void);

#endif /* ETOPS_FAULT_STATE_H */
