/* floor_et.h - the C face of floor_et.cpp (ExecuTorch's C++ types stay there). */
#ifndef FLOOR_ET_H
#define FLOOR_ET_H
#include <ATen/dlpack.h>
#ifdef __cplusplus
extern "C" {
#endif
/* ExecuTorch's own kernel selection for aten::add.out on three contiguous
 * float32 tensors of rank `ndim`; NULL if none. */
void* floor_lookup_add_out(int ndim);
/* One boxed call of `fn` on (a, b, alpha=1, out, return=out). No checks at all:
 * contiguous float32 CPU tensors of rank <= 16 are assumed. Returns the Error. */
int floor_add(void* fn, const DLTensor* a, const DLTensor* b, const DLTensor* out);
/* The same call `iters` times in a loop (EValues built once); returns seconds. */
double floor_add_loop(void* fn, const DLTensor* a, const DLTensor* b, const DLTensor* out,
                      long iters, int* error);
#ifdef __cplusplus
}
#endif
#endif
