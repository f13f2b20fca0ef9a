/*
 * kernel_probe.h - the state of a probed call (kernel_probe.c: the first call of a
 * signature, its written tensors between guard pages). Included by
 * kernel_internal.h only, after TensorRec; it declares the probe's functions.
 */
#ifndef ETOPS_KERNEL_PROBE_H
#define ETOPS_KERNEL_PROBE_H

/* One written tensor's memory during a probe: etops' mapping, guard pages at both
 * ends, the tensor's bytes at `data` (copied from `original`). */
typedef struct {
  const char* name; /* the argument, for errors */
  unsigned char* map; /* guard, [begin, end) readable and writable, guard */
  size_t map_len;
  unsigned char* begin;
  unsigned char* end;
  unsigned char* data; /* the tensor's bytes end at most PROBE_ALIGN before end */
  uintptr_t original;
  size_t nbytes;
} ProbeRegion;

/* A probed call: its regions, and the tensors moved into them (to move back). */
typedef struct {
  int active;
  int n, nmoved;
  ProbeRegion regions[ETOPS_MAX_TENSORS];
  struct {
    TensorRec* rec;
    void* original;
  } moved[2 * ETOPS_MAX_TENSORS];
} Probe;

#endif /* ETOPS_KERNEL_PROBE_H */
