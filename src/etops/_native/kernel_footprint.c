/*
 * kernel_footprint.c - the index checks of the rules table's footprint part that run
 * in C, on every call (the call memo's included): a kernel whose reads or writes are
 * placed by an index tensor's values (gather, scatter, index_select, embedding, the
 * quantized embeddings) has each value checked against the size of the dim it
 * indexes before the kernel runs. The values scanned are the converted tensor's,
 * exactly what the kernel reads (a lazy negative bit already resolved into a copy);
 * every converted tensor is dense, so its numel elements are one block. A value
 * outside the range hands the call to the slow path, whose footprint check words
 * the refusal (etops/ops/footprints.py). Integer tensors of other dtypes than
 * int64 / int32 are torch's checks' to refuse (once per signature).
 */
#include "kernel_internal.h"

/* min and max of n integers of `dtype` (int64 or int32) at `data`; 0 when another dtype. */
static int scan_range(const void* data, int8_t dtype, int64_t n, int64_t* low, int64_t* high) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  if (dtype == ETB_DTYPE_LONG) {
    const int64_t* v = (const int64_t*)data;
    for (int64_t i = 0; i < n; i++) {
      lo = v[i] < lo ? v[i] : lo;
      hi = v[i] > hi ? v[i] : hi;
    }
  } else if (dtype == ETB_DTYPE_INT) {
    const int32_t* v = (const int32_t*)data;
    for (int64_t i = 0; i < n; i++) {
      lo = v[i] < lo ? v[i] : lo;
      hi = v[i] > hi ? v[i] : hi;
    }
  } else {
    return 0;
  }
  *low = lo;
  *high = hi;
  return 1;
}

int index_ranges_broken(const KernelObject* k, const etb_value* vals) {
  for (int r = 0; r < k->nranges; r++) {
    const IndexRange* range = &k->ranges[r];
    const etb_value *iv = &vals[range->index], *sv = &vals[range->source];
    if (iv->tag != ETB_TENSOR || sv->tag != ETB_TENSOR) continue;
    const etb_tensor *index = iv->u.t, *source = sv->u.t;
    int64_t dim = range->fixed_dim;
    if (range->dim_arg < 0 && source->ndim <= dim) continue; /* a weight of too few dims: the kernel's own check */
    if (range->dim_arg >= 0) {
      if (vals[range->dim_arg].tag != ETB_INT) continue;
      dim = vals[range->dim_arg].u.i;
    }
    const int64_t ndim = source->ndim > 0 ? source->ndim : 1;
    if (dim < -ndim || dim >= ndim) continue; /* torch's checks of the signature name the dim */
    if (dim < 0) dim += ndim;
    const int64_t size = source->ndim > 0 ? source->sizes[dim] : 1;
    int64_t n = 1;
    for (int d = 0; d < index->ndim; d++) n *= index->sizes[d];
    int64_t low, high;
    if (n == 0 || index->data == NULL || !scan_range(index->data, index->dtype, n, &low, &high)) continue;
    if (low < 0 || high >= size) return r;
  }
  return -1;
}
