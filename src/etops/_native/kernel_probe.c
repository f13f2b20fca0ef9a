/*
 * kernel_probe.c - the first call of each argument signature cannot corrupt memory.
 *
 * What a kernel writes, and how far, depends on the call's dtypes, sizes and int
 * arguments: exactly what a kernel's argument signature (call_signature) hashes.
 * The first call of a signature is therefore a probe: every tensor the kernel may
 * write (outs and mutable arguments) is moved, for that call, into memory of etops'
 * own that ends against PROT_NONE guard pages (a mebibyte) and starts after them, the bytes
 * between the tensor and the guard pages filled with a canary. A write past either
 * end lands in etops' memory: in a guard page (the fault trap raises
 * KernelCrashed naming the argument, nothing outside was written) or in the canary
 * (found after the call, the same error). A clean probe copies the results back to
 * the caller's tensors and the signature is fast from then on; a failed one leaves
 * the caller's tensors as they were and the signature stays probed.
 *
 * Tensors that alias a written one (an out that is also an input) follow it into
 * the same memory, so the kernel sees the aliasing it was called with. Not probed:
 * delegates (their backend owns its outputs), and writes whose reach depends on the
 * values in a tensor (indices, masks): torch's own checks of those values run first.
 */
#include "kernel_internal.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CANARY 0xA5
/* PROT_NONE on each side of a probed tensor: a write up to this far outside it (a
 * stride for an element, a row too many) lands in etops' mapping, not in memory of
 * the process's; address space only, no memory. */
#define GUARD_BYTES (1u << 20)
#define PROBE_ALIGN 64 /* the tensor's first byte is aligned like an allocator's */

/* [first, first + *nbytes) of the bytes a tensor covers. */
static void tensor_bytes(const etb_tensor* t, uintptr_t* first, size_t* nbytes) {
  uintptr_t end;
  tensor_byte_range(t, first, &end);
  *nbytes = (size_t)(end - *first);
}

static int is_written(const KernelObject* k, const TensorRec* r) {
  return (k->args[r->arg].flags & (F_OUT | F_MUTABLE)) != 0;
}

/* The region that holds [first, first + nbytes) of the caller's memory, or NULL. */
static ProbeRegion* region_holding(Probe* p, uintptr_t first, size_t nbytes) {
  for (int i = 0; i < p->n; i++) {
    ProbeRegion* g = &p->regions[i];
    if (first >= g->original && first + nbytes <= g->original + g->nbytes) return g;
  }
  return NULL;
}

static size_t page_size(void) {
  static size_t page;
  if (page == 0) page = (size_t)sysconf(_SC_PAGESIZE);
  return page;
}

/* Maps a region for `nbytes` of `original` and copies them in. -1: MemoryError set. */
static int map_region(ProbeRegion* g, const char* name, uintptr_t original, size_t nbytes) {
  size_t page = page_size();
  size_t data_len = (nbytes + PROBE_ALIGN + page - 1) / page * page;
  unsigned char* map = MAP_FAILED;
  size_t guard = GUARD_BYTES > page ? GUARD_BYTES : page, len = 0;
  /* a process short of address space (an RLIMIT_AS) gets one guard page a side */
  for (; map == MAP_FAILED && guard >= page; guard = guard > page ? page : 0) {
    len = data_len + 2 * guard;
    map = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map != MAP_FAILED && mprotect(map + guard, data_len, PROT_READ | PROT_WRITE) != 0) {
      munmap(map, len);
      map = MAP_FAILED;
    }
    if (map != MAP_FAILED) break;
  }
  if (map == MAP_FAILED) {
    PyErr_NoMemory();
    return -1;
  }
  unsigned char* begin = map + guard;
  unsigned char* end = begin + data_len;
  unsigned char* data = (unsigned char*)(((uintptr_t)end - nbytes) & ~(uintptr_t)(PROBE_ALIGN - 1));
  memset(begin, CANARY, (size_t)(data - begin));
  memset(data + nbytes, CANARY, (size_t)(end - (data + nbytes)));
  if (nbytes > 0) memcpy(data, (const void*)original, nbytes);
  g->name = name;
  g->map = map;
  g->map_len = len;
  g->begin = begin;
  g->end = end;
  g->data = data;
  g->original = original;
  g->nbytes = nbytes;
  return 0;
}

int probe_begin(KernelObject* k, CallScratch* cs, Probe* p) {
  p->n = 0;
  p->nmoved = 0;
  p->active = 1;
  /* written tensors first: each gets a region, unless it lies inside one already */
  for (int i = 0; i < cs->nrecs; i++) {
    TensorRec* r = cs->recs[i];
    if (!is_written(k, r) || p->n == ETOPS_MAX_TENSORS) continue;
    uintptr_t first;
    size_t nbytes;
    tensor_bytes(&r->t, &first, &nbytes);
    ProbeRegion* g = region_holding(p, first, nbytes);
    if (g == NULL) {
      g = &p->regions[p->n];
      if (map_region(g, k->args[r->arg].cname, first, nbytes) < 0) return -1;
      p->n++;
    }
    p->moved[p->nmoved].rec = r;
    p->moved[p->nmoved].original = r->t.data;
    p->nmoved++;
    r->t.data = g->data + (first - g->original);
  }
  /* then every other tensor that aliases a written one follows it */
  for (int i = 0; i < cs->nrecs; i++) {
    TensorRec* r = cs->recs[i];
    if (is_written(k, r)) continue;
    uintptr_t first;
    size_t nbytes;
    tensor_bytes(&r->t, &first, &nbytes);
    ProbeRegion* g = region_holding(p, first, nbytes);
    if (g == NULL || p->nmoved == 2 * ETOPS_MAX_TENSORS) continue;
    p->moved[p->nmoved].rec = r;
    p->moved[p->nmoved].original = r->t.data;
    p->nmoved++;
    r->t.data = g->data + (first - g->original);
  }
  return 0;
}

int probe_locate(const Probe* p, uint64_t address, const char** name, const char** where, int64_t* offset) {
  for (int i = 0; i < p->n; i++) {
    const ProbeRegion* g = &p->regions[i];
    uintptr_t a = (uintptr_t)address;
    if (a < (uintptr_t)g->map || a >= (uintptr_t)g->map + g->map_len) continue;
    *name = g->name;
    if (a >= (uintptr_t)g->data + g->nbytes) {
      *where = "past the end";
      *offset = (int64_t)(a - ((uintptr_t)g->data + g->nbytes));
    } else if (a < (uintptr_t)g->data) {
      *where = "before the start";
      *offset = (int64_t)((uintptr_t)g->data - 1 - a);
    } else {
      *where = "inside";
      *offset = (int64_t)(a - (uintptr_t)g->data);
    }
    return 1;
  }
  return 0;
}

/* The first canary byte a write changed around region g: 1 and where, or 0. */
static int canary_broken(const ProbeRegion* g, const char** where, int64_t* offset) {
  for (const unsigned char* c = g->data + g->nbytes; c < g->end; c++) {
    if (*c != CANARY) {
      *where = "past the end";
      *offset = (int64_t)(c - (g->data + g->nbytes));
      return 1;
    }
  }
  for (const unsigned char* c = g->data; c > g->begin; c--) {
    if (c[-1] != CANARY) {
      *where = "before the start";
      *offset = (int64_t)(g->data - c);
      return 1;
    }
  }
  return 0;
}

/* KernelCrashed for a write the canary caught (error path only). */
static int raise_overrun(const KernelObject* k, const char* name, const char* where, int64_t offset) {
  PyObject* errors = PyImport_ImportModule("etops.errors");
  PyObject* type = errors != NULL ? PyObject_GetAttrString(errors, "KernelCrashed") : NULL;
  Py_XDECREF(errors);
  if (type == NULL) return -1;
  PyObject* exc = PyObject_CallFunction(type, "sssssLs", k->op_name, "", name, "write", where, (long long)offset,
                                        etb_last_call_log());
  Py_DECREF(type);
  if (exc == NULL) return -1;
  PyErr_SetObject((PyObject*)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return -1;
}

int probe_end(const KernelObject* k, Probe* p, int copy_back) {
  if (!p->active) return 0;
  p->active = 0;
  int rc = 0;
  if (copy_back) {
    for (int i = 0; i < p->n && rc == 0; i++) {
      const char* where;
      int64_t offset;
      if (canary_broken(&p->regions[i], &where, &offset)) rc = raise_overrun(k, p->regions[i].name, where, offset);
    }
  }
  /* the caller's tensors get their memory back, and the results when clean (the
   * kernel may have shrunk an out: at most its bytes before the call go back) */
  for (int i = 0; i < p->nmoved; i++) p->moved[i].rec->t.data = p->moved[i].original;
  for (int i = 0; i < p->n; i++) {
    ProbeRegion* g = &p->regions[i];
    if (copy_back && rc == 0 && g->nbytes > 0) memcpy((void*)g->original, g->data, g->nbytes);
    munmap(g->map, g->map_len);
  }
  p->n = 0;
  p->nmoved = 0;
  return rc;
}
