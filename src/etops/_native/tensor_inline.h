/*
 * tensor_inline.h - the common case of tensor.c's borrowing, inline in the call path
 * (kernel_convert.c): a torch.Tensor that is a contiguous CPU tensor of a dtype
 * ExecuTorch knows, placed in one pass. Everything else goes to tensor.c.
 */
#ifndef ETOPS_TENSOR_INLINE_H
#define ETOPS_TENSOR_INLINE_H

#include "etops_native.h"
#include "tensor_fields.h"

#if defined(__GNUC__) || defined(__clang__)
#define ETOPS_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ETOPS_ALWAYS_INLINE inline
#endif

/* ExecuTorch's dtype of the plain DLPack codes (kDLInt .. kDLBool) by bits 8, 16,
 * 32, 64, 128; -1: none. */
static const int8_t ETOPS_DTYPE_BY_CODE_BITS[kDLBool + 1][5] = {
    [kDLInt] = {ETB_DTYPE_CHAR, ETB_DTYPE_SHORT, ETB_DTYPE_INT, ETB_DTYPE_LONG, -1},
    [kDLUInt] = {ETB_DTYPE_BYTE, ETB_DTYPE_UINT16, ETB_DTYPE_UINT32, ETB_DTYPE_UINT64, -1},
    [kDLFloat] = {-1, ETB_DTYPE_HALF, ETB_DTYPE_FLOAT, ETB_DTYPE_DOUBLE, -1},
    [kDLOpaqueHandle] = {-1, -1, -1, -1, -1},
    [kDLBfloat] = {-1, ETB_DTYPE_BFLOAT16, -1, -1, -1},
    [kDLComplex] = {-1, -1, ETB_DTYPE_COMPLEX_HALF, ETB_DTYPE_COMPLEX_FLOAT, ETB_DTYPE_COMPLEX_DOUBLE},
    [kDLBool] = {ETB_DTYPE_BOOL, -1, -1, -1, -1},
};

/* DLPack dtype -> ExecuTorch ScalarType number (etb_dtype), or -1. */
static inline int etops_et_dtype(DLDataType t) {
  if (t.lanes != 1) return -1;
  unsigned bits = t.bits;
  if (t.code <= kDLBool) {
    if (bits < 8 || bits > 128 || (bits & (bits - 1)) != 0) return -1;
    return ETOPS_DTYPE_BY_CODE_BITS[t.code][__builtin_ctz(bits) - 3];
  }
  switch (t.code) {
    case kDLFloat8_e5m2: return bits == 8 ? ETB_DTYPE_FLOAT8_E5M2 : -1;
    case kDLFloat8_e4m3fn: return bits == 8 ? ETB_DTYPE_FLOAT8_E4M3FN : -1;
    case kDLFloat8_e5m2fnuz: return bits == 8 ? ETB_DTYPE_FLOAT8_E5M2FNUZ : -1;
    case kDLFloat8_e4m3fnuz: return bits == 8 ? ETB_DTYPE_FLOAT8_E4M3FNUZ : -1;
    default: return -1;
  }
}

/* The common layout in one pass: when `dl` is contiguous (size-1 dims may have any
 * stride) with non-zero sizes and strides that fit int32, fills out's sizes,
 * strides and dim order and returns its element count (>= 1); otherwise returns 0
 * (those fields then unspecified) for the general path to decide. */
static inline int64_t etops_fill_contiguous(const DLTensor* dl, etb_tensor* out) {
  const int64_t* shape = dl->shape;
  const int64_t* strides = dl->strides != NULL ? dl->strides : dl->shape; /* NULL: contiguous, not compared */
  int compare = dl->strides != NULL;
  int64_t expected = 1; /* the contiguous stride of dim d */
  for (int d = dl->ndim - 1; d >= 0; d--) {
    int64_t size = shape[d];
    /* size in [1, INT32_MAX], the stride so far fits int32, the stride is it (or the dim is 1 long) */
    if ((uint64_t)(size - 1) >= (uint64_t)INT32_MAX || expected > INT32_MAX) return 0;
    if ((strides[d] != expected) & compare & (size != 1)) return 0;
    out->sizes[d] = (int32_t)size;
    out->strides[d] = (int32_t)expected;
    out->dim_order[d] = (uint8_t)d;
    expected *= size;
  }
  return expected;
}

/* tensor.c: what etops_borrow_tensor does with a DLTensor torch's exchange API
 * filled for `obj` (the checks that raise, the other layouts); and the error of a
 * failed exchange (-1, a ValueError naming the argument). */
int etops_borrow_torch_rest(PyObject* obj, const DLTensor* dl, etb_tensor* out, const char* op, const char* what,
                            int writable, etops_span* span);
int etops_borrow_failed(const char* op, const char* what);

/* etops_borrow_tensor for an object of exactly torch.Tensor's type (the caller checks
 * it, and that st->torch_api is set): a contiguous CPU tensor of a non-complex dtype
 * ExecuTorch knows, with data and at least one element and no lazy bit, whose sizes and strides fit int32, returns
 * LAYOUT_CONTIGUOUS (`out` filled in contiguous order, *numel its element count,
 * *span its bytes); anything else returns what etops_borrow_tensor returns for it.
 * `pre`: the DLTensor torch's exchange API already gave for `obj` in this call (a
 * call memo's miss, kernel_memo.c), or NULL: asked here. */
static ETOPS_ALWAYS_INLINE int etops_borrow_torch(etops_state* st, PyObject* obj, etb_tensor* out, const char* op,
                                                  const char* what, int writable, int64_t* numel, etops_span* span,
                                                  const DLTensor* pre) {
  DLTensor own;
  const DLTensor* dl = pre;
  if (dl == NULL) {
    if (st->torch_api->dltensor_from_py_object_no_sync(obj, &own) != 0) return etops_borrow_failed(op, what);
    dl = &own;
  }
  int dtype;
  if (dl->device.device_type == kDLCPU && (uint32_t)dl->ndim <= ETB_MAX_DIM && dl->dtype.code != kDLComplex &&
      (dtype = etops_et_dtype(dl->dtype)) >= 0 && dl->data != NULL) {
    out->data = (char*)dl->data + dl->byte_offset;
    out->dtype = (int8_t)dtype;
    out->ndim = (uint8_t)dl->ndim;
    out->dynamism = ETB_STATIC;
    out->resized = 0;
    /* a lazily negated tensor (torch._neg_view, `c.conj().imag`, one element or 0-dim
     * as well) is contiguous too: its bit read here from torch's key set
     * (tensor_fields.h), tensor.c resolves it */
    if ((*numel = etops_fill_contiguous(dl, out)) > 0 && !etops_tensor_maybe_lazy(obj)) {
      span->first = (uintptr_t)out->data;
      span->end = span->first + (uintptr_t)*numel * (uintptr_t)((dl->dtype.bits * dl->dtype.lanes + 7) / 8);
      return LAYOUT_CONTIGUOUS;
    }
  }
  return etops_borrow_torch_rest(obj, dl, out, op, what, writable, span);
}

#endif /* ETOPS_TENSOR_INLINE_H */
