/*
 * tensor_alloc.c - a contiguous torch.Tensor allocated in C, without a Python call:
 * the outs of a call without out= that matched the call memo (kernel_memo.c).
 *
 * torch's DLPack exchange API allocates (`managed_tensor_allocator`: at::empty with
 * torch's CPU allocator, contiguous strides), but its way back to Python
 * (`managed_tensor_to_py_object_no_sync`) wraps the memory as a foreign blob whose
 * storage cannot be resized: not the tensor torch.empty_strided gives. So the tensor
 * the allocator made is handed to torch's own Python wrapper instead,
 * THPVariable_Wrap(const at::TensorBase&) of libtorch_python (looked up by its
 * exported name at configure(), never linked; an at::TensorBase is one TensorImpl
 * pointer), which the DLManagedTensorVersioned's manager context holds first (torch's
 * ATen DLPack record: the tensor, then the DLPack struct). The result is an ordinary
 * tensor: resizable storage, version 0, no grad, torch.Tensor's own type.
 *
 * Nothing of that is public, so configure() checks it on a tensor made this way
 * (its type, data, sizes, strides, a resizable storage) and every allocation checks
 * that the DLPack shape lies inside the tensor it takes from the manager context;
 * anything else turns the route off (etops_state.tensor_wrap NULL) and the caller
 * allocates through torch.empty_strided, as before.
 */
#include "etops_native.h"

#include <dlfcn.h>

/* Where the DLPack sizes of a tensor torch's allocator made may lie after its
 * TensorImpl's start (its inline sizes: 64 bytes in torch 2.13). */
#define SIZES_WITHIN_IMPL 1024

static void set_allocation_error(void* ctx, const char* kind, const char* message) {
  (void)ctx;
  PyErr_Format(PyExc_RuntimeError, "%s: %s", kind, message);
}

int etops_alloc_contiguous(etops_state* st, DLDataType dtype, int ndim, const int64_t* shape, PyObject** out,
                           void** data) {
  if (st->tensor_wrap == NULL) return 0;
  DLTensor proto = {0};
  proto.device.device_type = kDLCPU;
  proto.ndim = ndim;
  proto.dtype = dtype;
  proto.shape = (int64_t*)shape;
  DLManagedTensorVersioned* mt = NULL;
  if (st->torch_api->managed_tensor_allocator(&proto, &mt, NULL, set_allocation_error) != 0) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "torch's DLPack allocator failed");
    return -1;
  }
  void* impl = mt->manager_ctx != NULL ? *(void* const*)mt->manager_ctx : NULL;
  if (impl == NULL || (uintptr_t)mt->dl_tensor.shape - (uintptr_t)impl >= SIZES_WITHIN_IMPL) {
    st->tensor_wrap = NULL; /* not the record configure() checked: torch.empty_strided from now on */
    if (mt->deleter != NULL) mt->deleter(mt);
    return 0;
  }
  *data = (char*)mt->dl_tensor.data + mt->dl_tensor.byte_offset;
  PyObject* obj = st->tensor_wrap(&impl); /* a reference of its own */
  if (mt->deleter != NULL) mt->deleter(mt); /* drops the allocator's */
  if (obj == NULL) return -1;
  *out = obj;
  return 1;
}

/* Whether `obj` is a contiguous 2x3 float32 torch.Tensor over `data` with a
 * resizable storage: what configure()'s sample must be. 0 (no exception) otherwise. */
static int is_plain_sample(etops_state* st, PyObject* obj, const void* data) {
  if (Py_TYPE(obj) != (PyTypeObject*)st->torch_tensor_type) return 0;
  DLTensor dl;
  if (st->torch_api->dltensor_from_py_object_no_sync(obj, &dl) != 0) return 0;
  if ((char*)dl.data + dl.byte_offset != data || dl.ndim != 2 || dl.shape[0] != 2 || dl.shape[1] != 3 ||
      dl.dtype.code != kDLFloat || dl.dtype.bits != 32 || dl.dtype.lanes != 1 ||
      (dl.strides != NULL && (dl.strides[0] != 3 || dl.strides[1] != 1)))
    return 0;
  PyObject* storage = PyObject_CallMethod(obj, "untyped_storage", NULL);
  PyObject* resizable = storage != NULL ? PyObject_CallMethod(storage, "resizable", NULL) : NULL;
  Py_XDECREF(storage);
  int ok = resizable == Py_True;
  Py_XDECREF(resizable);
  return ok;
}

void etops_find_tensor_wrap(etops_state* st) {
  st->tensor_wrap = NULL;
  void* lib = dlopen("libtorch_python.so", RTLD_LAZY | RTLD_NOLOAD);
  if (lib == NULL) return;
  void* wrap = dlsym(lib, "_Z16THPVariable_WrapRKN2at10TensorBaseE");
  dlclose(lib); /* torch keeps it loaded */
  if (wrap == NULL || st->torch_api == NULL || st->torch_api->managed_tensor_allocator == NULL) return;
  st->tensor_wrap = (PyObject * (*)(void* const*)) wrap;
  const int64_t shape[2] = {2, 3};
  DLDataType f32 = {.code = kDLFloat, .bits = 32, .lanes = 1};
  PyObject* sample = NULL;
  void* data = NULL;
  int got = etops_alloc_contiguous(st, f32, 2, shape, &sample, &data);
  if (got == 1 && !is_plain_sample(st, sample, data)) got = 0;
  Py_XDECREF(sample);
  if (got != 1) {
    PyErr_Clear();
    st->tensor_wrap = NULL;
  }
}
