"""Python functions as ExecuTorch kernels (prototyping).

An ExecuTorch kernel is a bare function pointer with no user data, so etops compiles
(once, then from the cache) a small library of ``SLOTS`` trampolines. Trampoline i
describes its EValue stack as flat C records and calls one ctypes callback (which
takes the GIL) with i; Python finds the function registered in slot i, hands it torch
tensors that view the EValue tensors' memory (zero-copy), copies what it returns into
the outs (resizing those ExecuTorch allows to be resized), writes a scalar result into
the return slot, and turns an exception into a kernel failure (Error::Internal, the
exception logged as the kernel's message).
"""

from __future__ import annotations

import ctypes
import threading
import traceback

import torch

from .. import dtypes
from ..errors import SchemaError

SLOTS = 64
MAX_DIM = 16

TRAMPOLINES = r"""
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <cstring>
#include <vector>

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

enum Tag { T_NONE = 0, T_TENSOR = 1, T_INT = 2, T_DOUBLE = 3, T_BOOL = 4, T_STRING = 5, T_INT_LIST = 6,
           T_DOUBLE_LIST = 7, T_BOOL_LIST = 8, T_TENSOR_LIST = 9, T_OTHER = 10 };

struct Value {
  int32_t tag;
  int32_t n;          // ndim, list or string length
  int64_t i;
  double d;
  void* data;         // tensor data / list or string data / Value* for tensor lists
  void* impl;         // the Tensor, for resizing
  int32_t dtype;
  int32_t elem_size;
  int64_t sizes[16];
  int64_t strides[16];
};

using Dispatch = int (*)(int slot, int n, Value* values, char* err, int errlen);
Dispatch g_dispatch = nullptr;

void describe_tensor(const Tensor& t, Value& v) {
  v.tag = T_TENSOR;
  v.n = (int32_t)t.dim();
  v.data = t.mutable_data_ptr();
  v.impl = (void*)&t;
  v.dtype = (int32_t)t.scalar_type();
  v.elem_size = (int32_t)t.element_size();
  for (int k = 0; k < t.dim() && k < 16; k++) {
    v.sizes[k] = t.size(k);
    v.strides[k] = t.strides()[k];
  }
}

// One body for every slot (not one per slot: 64 copies took seconds to compile).
__attribute__((noinline)) void run_slot(int slot, KernelRuntimeContext& ctx, Span<EValue*> stack) {
  size_t n = stack.size();
  std::vector<Value> values(n);
  std::vector<std::vector<Value>> lists;
  lists.reserve(n);
  for (size_t k = 0; k < n; k++) {
    EValue& e = *stack[k];
    Value& v = values[k];
    std::memset(&v, 0, sizeof v);
    if (e.isNone()) v.tag = T_NONE;
    else if (e.isTensor()) describe_tensor(e.toTensor(), v);
    else if (e.isInt()) { v.tag = T_INT; v.i = e.toInt(); }
    else if (e.isDouble()) { v.tag = T_DOUBLE; v.d = e.toDouble(); }
    else if (e.isBool()) { v.tag = T_BOOL; v.i = e.toBool(); }
    else if (e.isString()) { auto s = e.toString(); v.tag = T_STRING; v.data = (void*)s.data(); v.n = (int32_t)s.size(); }
    else if (e.isIntList()) { auto l = e.toIntList(); v.tag = T_INT_LIST; v.data = (void*)l.data(); v.n = (int32_t)l.size(); }
    else if (e.isDoubleList()) { auto l = e.toDoubleList(); v.tag = T_DOUBLE_LIST; v.data = (void*)l.data(); v.n = (int32_t)l.size(); }
    else if (e.isBoolList()) { auto l = e.toBoolList(); v.tag = T_BOOL_LIST; v.data = (void*)l.data(); v.n = (int32_t)l.size(); }
    else if (e.isTensorList()) {
      auto l = e.toTensorList();
      lists.emplace_back(l.size());
      for (size_t j = 0; j < l.size(); j++) { std::memset(&lists.back()[j], 0, sizeof(Value)); describe_tensor(l[j], lists.back()[j]); }
      v.tag = T_TENSOR_LIST; v.data = lists.back().data(); v.n = (int32_t)l.size();
    } else v.tag = T_OTHER;
  }
  char err[2048];
  err[0] = 0;
  if (g_dispatch == nullptr) {
    ET_LOG(Error, "etops: no Python dispatcher for Python kernels");
    ctx.fail(Error::Internal);
    return;
  }
  int rc = g_dispatch(slot, (int)n, values.data(), err, (int)sizeof err);
  if (rc != 0) {
    ET_LOG(Error, "%s", err);
    ctx.fail(rc == 2 ? Error::InvalidArgument : Error::Internal);
    return;
  }
  if (n > 0 && stack[n - 1]->isNone()) {  // a fresh scalar result
    Value& r = values[n - 1];
    if (r.tag == T_INT) *stack[n - 1] = EValue((int64_t)r.i);
    else if (r.tag == T_DOUBLE) *stack[n - 1] = EValue(r.d);
    else if (r.tag == T_BOOL) *stack[n - 1] = EValue((bool)r.i);
  }
}

template <int I>
void trampoline(KernelRuntimeContext& ctx, Span<EValue*> stack) { run_slot(I, ctx, stack); }

template <int... Is>
struct Table { static constexpr executorch::runtime::OpFunction fns[] = {&trampoline<Is>...}; };

template <int N, int... Is>
struct Make : Make<N - 1, N - 1, Is...> {};
template <int... Is>
struct Make<0, Is...> { using type = Table<Is...>; };

using AllSlots = Make<ETOPS_SLOTS>::type;

}  // namespace

EXPORT void etops_py_set_dispatch(Dispatch d) { g_dispatch = d; }
EXPORT void* etops_py_trampoline(int i) { return i >= 0 && i < ETOPS_SLOTS ? (void*)AllSlots::fns[i] : nullptr; }
EXPORT int etops_py_resize(void* tensor, int ndim, const int64_t* sizes) {
  Tensor& t = *(Tensor*)tensor;
  executorch::aten::SizesType s[16];
  for (int k = 0; k < ndim && k < 16; k++) s[k] = (executorch::aten::SizesType)sizes[k];
  return (int)executorch::runtime::resize_tensor(t, {s, (size_t)ndim});
}
""".replace("ETOPS_SLOTS", str(SLOTS))

(T_NONE, T_TENSOR, T_INT, T_DOUBLE, T_BOOL, T_STRING, T_INT_LIST, T_DOUBLE_LIST, T_BOOL_LIST, T_TENSOR_LIST, T_OTHER) = range(11)


class _Value(ctypes.Structure):
    _fields_ = [
        ("tag", ctypes.c_int32),
        ("n", ctypes.c_int32),
        ("i", ctypes.c_int64),
        ("d", ctypes.c_double),
        ("data", ctypes.c_void_p),
        ("impl", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("elem_size", ctypes.c_int32),
        ("sizes", ctypes.c_int64 * MAX_DIM),
        ("strides", ctypes.c_int64 * MAX_DIM),
    ]


_DISPATCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Value), ctypes.c_void_p, ctypes.c_int)
_TORCH_DTYPE = {number: dtype for dtype, number in dtypes.ET_SCALAR_TYPE.items()}

_lock = threading.Lock()
_lib = None
_dispatch_ref = None
#: slot -> (name, fn, schema, outs: tuple of argument indices, scalar return)
_slots: dict[int, tuple] = {}


def _library():
    global _lib, _dispatch_ref
    if _lib is not None:
        return _lib
    from .build import Source, build

    built = build([Source("<etops python trampolines>", TRAMPOLINES)], [])
    lib = ctypes.CDLL(built.library_path)
    lib.etops_py_trampoline.restype = ctypes.c_void_p
    lib.etops_py_trampoline.argtypes = [ctypes.c_int]
    lib.etops_py_resize.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
    _dispatch_ref = _DISPATCH(_dispatch)
    # the trampolines call Python through a C function that disarms the fault trap
    # first (a fault in Python must never jump out of the interpreter's frames)
    from .. import _native

    lib.etops_py_set_dispatch.argtypes = [ctypes.c_void_p]
    lib.etops_py_set_dispatch(_native._core.unarmed_dispatch(ctypes.cast(_dispatch_ref, ctypes.c_void_p).value))
    _lib = lib
    return lib


def _tensor(v: _Value) -> torch.Tensor:
    dtype = _TORCH_DTYPE[v.dtype]
    sizes = list(v.sizes[: v.n])
    strides = list(v.strides[: v.n])
    numel = 1
    for s in sizes:
        numel *= s
    if numel == 0 or not v.data:
        return torch.empty(sizes, dtype=dtype)
    extent = 1 + sum((s - 1) * st for s, st in zip(sizes, strides))
    buf = (ctypes.c_byte * (extent * v.elem_size)).from_address(v.data)
    flat = torch.frombuffer(buf, dtype=torch.uint8).view(dtype)
    return flat.as_strided(sizes, strides)


def _python_value(v: _Value, type_str: str):
    t = v.tag
    if t == T_NONE:
        return None
    if t == T_TENSOR:
        return _tensor(v)
    if t == T_INT:
        if "ScalarType" in type_str:
            return _TORCH_DTYPE.get(v.i, v.i)
        return int(v.i)
    if t == T_DOUBLE:
        return float(v.d)
    if t == T_BOOL:
        return bool(v.i)
    if t == T_STRING:
        return ctypes.string_at(v.data, v.n).decode()
    if t == T_INT_LIST:
        return list((ctypes.c_int64 * v.n).from_address(v.data)) if v.n else []
    if t == T_DOUBLE_LIST:
        return list((ctypes.c_double * v.n).from_address(v.data)) if v.n else []
    if t == T_BOOL_LIST:
        return [bool(b) for b in (ctypes.c_bool * v.n).from_address(v.data)] if v.n else []
    if t == T_TENSOR_LIST:
        items = (_Value * v.n).from_address(v.data) if v.n else []
        return [_tensor(x) for x in items]
    raise TypeError(f"etops cannot pass a {type_str} to a Python kernel")


def _write_out(lib, v: _Value, out: torch.Tensor, result, name: str):
    if not isinstance(result, torch.Tensor):
        result = torch.as_tensor(result, dtype=out.dtype)
    if result is out or (result.data_ptr() == out.data_ptr() and result.shape == out.shape and result.stride() == out.stride()):
        return
    if tuple(result.shape) != tuple(out.shape):
        sizes = (ctypes.c_int64 * max(1, result.dim()))(*result.shape)
        if lib.etops_py_resize(v.impl, result.dim(), sizes) != 0:
            raise ValueError(f"{name}: the result has shape {tuple(result.shape)} and the out {tuple(out.shape)} cannot be resized to it")
        for k in range(result.dim()):
            v.sizes[k] = result.shape[k]
        # strides of a resized contiguous out
        stride = 1
        for k in reversed(range(result.dim())):
            v.strides[k] = stride
            stride *= result.shape[k]
        v.n = result.dim()
        out = _tensor(v)
    out.copy_(result)


def _dispatch(slot, n, values, err, errlen):
    try:
        entry = _slots.get(slot)
        if entry is None:
            raise RuntimeError(f"no Python kernel in slot {slot}")
        name, fn, schema, outs, scalar_ret = entry
        args = schema.arguments
        if n != len(args) + 1:
            message = f"{name}: expected {len(args) + 1} stack values, got {n}"
            ctypes.memmove(err, message.encode()[: errlen - 1] + b"\0", min(len(message) + 1, errlen))
            return 2
        py_args = [_python_value(values[k], str(a.real_type)) for k, a in enumerate(args)]
        positional = [v for v, a in zip(py_args, args) if not a.kwarg_only]
        keywords = {a.name: v for v, a in zip(py_args, args) if a.kwarg_only}
        result = fn(*positional, **keywords)
        if outs:
            results = result if isinstance(result, (tuple, list)) and len(outs) > 1 else [result]
            if result is not None:
                for k, r in zip(outs, results):
                    _write_out(_lib, values[k], py_args[k], r, name)
        elif scalar_ret is not None:
            r = values[n - 1]
            if isinstance(result, torch.Tensor):
                result = result.item()
            if isinstance(result, bool):
                r.tag, r.i = T_BOOL, int(result)
            elif isinstance(result, int):
                r.tag, r.i = T_INT, result
            elif isinstance(result, float):
                r.tag, r.d = T_DOUBLE, result
            else:
                raise TypeError(f"{name}: the Python kernel returned {type(result).__name__}, the schema says {scalar_ret}")
        return 0
    except BaseException as exc:  # noqa: BLE001 - becomes the kernel's failure
        lines = traceback.format_exception_only(type(exc), exc)
        message = f"Python kernel raised {''.join(lines).strip()}"
        data = message.encode("utf-8", "replace")[: errlen - 1] + b"\0"
        ctypes.memmove(err, data, len(data))
        return 1


def python_kernel_function(name: str, fn, schema) -> tuple[int, dict]:
    """(trampoline address, origin) for a Python function implementing `schema`."""
    outs = tuple(i for i, a in enumerate(schema.arguments) if a.is_out)
    fresh = [r for r in schema.returns if not (r.alias_info is not None and r.alias_info.is_write)]
    scalar_ret = None
    if fresh:
        t = str(getattr(fresh[0], "real_type", fresh[0].type))
        if t not in ("int", "float", "bool", "SymInt") or len(schema.returns) != 1:
            raise SchemaError(f"{name}: a kernel returns tensors through out arguments (register the .out variant)")
        scalar_ret = t
    lib = _library()
    with _lock:
        # A .pte Method loaded earlier may still call a released slot's trampoline:
        # never-used slots go first, then the one released longest ago.
        free = next((i for i in range(SLOTS) if i not in _slots and i not in _released), None)
        if free is None and _released:
            free = _released.pop(0)
        if free is None:
            raise RuntimeError(f"all {SLOTS} Python kernel slots are in use; deregister some Python kernels")
        _slots[free] = (name, fn, schema, outs, scalar_ret)
    address = lib.etops_py_trampoline(free)
    return address, {"kind": "python", "function": getattr(fn, "__qualname__", repr(fn)), "slot": free, "library": "<python>"}


#: released slots, oldest first
_released: list[int] = []


def release_slot(slot: int) -> None:
    with _lock:
        if _slots.pop(slot, None) is not None:
            _released.append(slot)
