"""etops: ExecuTorch's kernels as Python callables.

    import torch, etops
    reg = etops.registry()                # or executorch.runtime.Runtime.get().operator_registry
    c = torch.empty(2, 2)
    reg.aten.add.out(torch.ones(2, 2), torch.ones(2, 2), out=c)

Importing etops loads the core only: the executorch wheel's runtime and kernel
libraries (not executorch.exir), the registry object model, kernel objects and
their call path, and extends executorch.runtime's OperatorRegistry. The core
modules of this folder (errors, dtypes, schemas, plan, kernel, out_shapes, resize,
slow_path, registry, hooks, _native, ...) import each other and never an extension.

The extensions are subpackages (custom, delegate, edge, bench, conformance, fuzz,
cli, ...). They may import the core and each other's public names; they reach the
core through ``hooks``. Their top-level names here (``etops.custom_op``,
``etops.delegate``, ``etops.bench``, ...) load their module on first use
(``_LAZY`` below), so ``import etops`` stays cheap.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

import torch

from . import _native
from . import _logs, _runtime_patch, handler_chain
from .errors import (
    BuildError,
    DelegateError,
    DuplicateKernelError,
    EtopsError,
    ForkBlocked,
    GuardRefusal,
    GuardTimeout,
    KernelAborted,
    KernelCrashed,
    KernelError,
    KernelNotFoundError,
    NoMatchingKernelError,
    RegistrationError,
    RegistryFullError,
    SchemaError,
    TaintedError,
    UnrepresentableError,
    UnsupportedNodeError,
)
from .taint import Taint, clear_taint, kernel_faulted, taint
from .crash_site import MemoryMayBeCorruptWarning
from .kernel import KernelInfo, KernelOrigin, RegisteredKernel, UncallableKernel
from .layouts import layout
from .tensors import from_dlpack
from .torch_checks import check_bounds
from .registry import Namespace, OpPacket, Registry, as_program, get_kernel, registry
from .schemas import set_schema

__version__ = "0.1.0"

Kernel = _native.Kernel


def _densify(obj: Any, op: str = "etops", argument: str = "tensor") -> torch.Tensor:
    """A contiguous copy of a non-dense tensor-like (torch or DLPack producer), its
    lazy conjugate and negative bits resolved (DLPack carries neither), once its
    view is known to stay within its memory (check_bounds, naming `argument` of
    operator `op`: the C call path asks on every call that copies a tensor)."""
    check_bounds(op, argument, obj)
    if not isinstance(obj, torch.Tensor):
        obj = from_dlpack(obj)  # a numpy array with negative strides: a copy
    return obj.resolve_conj().resolve_neg().contiguous()


def _copy_back(user_tensor: Any, computed: torch.Tensor) -> None:
    """Writes a computed contiguous out into the user's (permuted) out tensor,
    taking the size the kernel gave it."""
    if type(user_tensor).__module__ == "numpy" and any(s < 0 for s in getattr(user_tensor, "strides", ())):
        import numpy  # torch cannot view negative strides: numpy writes its own array

        numpy.copyto(user_tensor, computed.numpy().reshape(user_tensor.shape))
        return
    if not isinstance(user_tensor, torch.Tensor):
        user_tensor = torch.from_dlpack(user_tensor)
    if user_tensor.shape != computed.shape:
        user_tensor.resize_(computed.shape)
    user_tensor.copy_(computed)


_native.configure(tensor_type=torch.Tensor, densify=_densify, copy_back=_copy_back, flush_logs=_logs.flush,
                  empty_strided=torch.empty_strided)
_native.install_pal()
_native.trap_faults()  # a fault in a kernel on the calling thread raises KernelCrashed
handler_chain.keep_on_top()  # ... and stays trapped whatever faulthandler and signal.signal install later


def _calibrate_grad_probe() -> bool:
    """Turns on the C call path's cheap "has no autograd state" test of a tensor
    (_native/kernel_checks.c) from tensors torch says lack and have autograd state:
    fresh tensors of several dtypes and ranks, and leaves requiring grad, results with
    a grad_fn and views of them."""
    with torch.enable_grad():
        plain = [torch.ones(3), torch.empty(2, 2), torch.zeros(()), torch.arange(4), torch.ones(1, dtype=torch.float64)]
        leaf = torch.ones(3, requires_grad=True)
        grad = [leaf, leaf * 2, leaf[1:], torch.zeros(2, 2, requires_grad=True), torch.ones(2, dtype=torch.float64, requires_grad=True).exp()]
        return bool(_native.calibrate_grad_probe(plain, grad))


def _calibrate_tensor_fields() -> bool:
    """Turns on the C call path's reading of what DLPack does not carry (a tensor's
    lazy negative and conjugate bits, inference-ness, version counter;
    _native/tensor_fields.c) from tensors whose answers torch gives: plain tensors
    of each kind, their negative and conjugate views, views sharing a version
    counter, inference tensors, and others to check every answer against torch's."""
    with torch.inference_mode(False), torch.no_grad():
        plain = [torch.ones(3), torch.zeros(2, 2, dtype=torch.float64), torch.arange(4), torch.ones((), dtype=torch.bool),
                 torch.ones(2, dtype=torch.complex64), torch.ones(1, 3, dtype=torch.float16)]
        for n, t in enumerate(plain):
            for _ in range(n):
                t.copy_(t)  # distinct versions
        complex_ = [torch.ones(2, dtype=torch.complex64), torch.ones(3, 1, dtype=torch.complex128)]
        with torch.inference_mode():
            inference = [torch.ones(3), torch.arange(2), torch.ones(2, dtype=torch.complex64), torch.ones((), dtype=torch.bool)]
        leaf = torch.ones(3, requires_grad=True)
        check = [leaf, leaf[1:], torch.nn.Parameter(torch.ones(2)), torch.ones(2, 3).t(), complex_[0].conj().imag,
                 torch._neg_view(torch.arange(3)), torch.ones(1, 2, 2, 2).to(memory_format=torch.channels_last)]
        with torch.enable_grad():
            check.append(leaf * 2)
        return bool(_native.calibrate_tensor_fields({
            "plain": plain,
            "neg": [(t, torch._neg_view(t)) for t in plain if t.dtype != torch.bool],
            "conj": [(c, c.conj()) for c in complex_],
            "views": [(t, t.view(-1)[:1]) for t in plain],
            "inference": inference,
            "check": check,
            "fresh": torch.zeros(2),
            "increment_version": torch.autograd.graph.increment_version,
            "is_inference_mode_enabled": torch.is_inference_mode_enabled,
        }))


_calibrate_grad_probe()
_calibrate_tensor_fields()
_runtime_patch.install()

#: public name -> (module, attribute or None for the module itself): the extensions'
#: names, imported on first use by __getattr__ below.
_LAZY = {
    # custom kernels at run time: compile, register, override, deregister
    "custom": (".custom", None),
    "CustomOp": (".custom", "CustomOp"),
    "KernelHandle": (".custom", "KernelHandle"),
    "Override": (".custom", "Override"),
    "custom_op": (".custom", "custom_op"),
    "deregister": (".custom", "deregister"),
    "kernel_key": (".custom", "kernel_key"),
    "load_library": (".custom", "load_library"),
    "override": (".custom", "override"),
    "register_kernel": (".custom", "register_kernel"),
    "register_python_kernel": (".custom", "register_python_kernel"),
    # delegates: backends and lowered modules (no executorch.exir import)
    "delegate": (".delegate", None),
    "DelegateInfo": (".delegate", "DelegateInfo"),
    "backends": (".delegate", "backends"),
    # edge programs on ExecuTorch kernels (imports executorch.exir: seconds)
    "edge": (".edge", None),
    "needs": (".needs", None),  # etops.needs(program): a program's kernel and delegate needs (callable module)
    # the kernel-development loop: build a checkout's kernel file, swap it in, check and time it
    "dev": (".dev", None),  # etops.dev(paths) (callable module)
    # upstream's kernel gtests against this process's kernels
    "gtest": (".gtest", None),  # etops.gtest(paths) (callable module)
    # guarded calls: one call in a forked child, tensors against guard pages
    "guard": (".guard", None),
    # the benchmark harness
    "bench": (".bench", "bench"),
    "bench_all": (".bench", "bench_all"),
    "bench_delegate": (".bench", "bench_delegate"),
    "get_num_threads": (".bench", "get_num_threads"),
    "set_num_threads": (".bench", "set_num_threads"),
}


def __getattr__(name: str) -> Any:
    entry = _LAZY.get(name)
    if entry is None:
        raise AttributeError(f"module 'etops' has no attribute {name!r}")
    module = importlib.import_module(entry[0], __name__)
    value = module if entry[1] is None else getattr(module, entry[1])
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


class _Package(types.ModuleType):
    """``etops.bench`` is the benchmark function, though a subpackage has that name
    too: importing ``etops.bench.<module>`` binds the subpackage on its parent, which
    this property ignores."""

    @property
    def bench(self) -> Any:
        return __getattr__("bench")

    @bench.setter
    def bench(self, value: Any) -> None:
        if not isinstance(value, types.ModuleType):
            globals()["bench"] = value


sys.modules[__name__].__class__ = _Package


__all__ = [
    "BuildError",
    "DelegateError",
    "DuplicateKernelError",
    "EtopsError",
    "ForkBlocked",
    "GuardRefusal",
    "GuardTimeout",
    "Kernel",
    "KernelAborted",
    "KernelCrashed",
    "MemoryMayBeCorruptWarning",
    "KernelError",
    "KernelInfo",
    "KernelNotFoundError",
    "KernelOrigin",
    "Namespace",
    "NoMatchingKernelError",
    "OpPacket",
    "RegisteredKernel",
    "Registry",
    "RegistrationError",
    "RegistryFullError",
    "SchemaError",
    "Taint",
    "TaintedError",
    "UncallableKernel",
    "UnrepresentableError",
    "UnsupportedNodeError",
    "as_program",
    "clear_taint",
    "get_kernel",
    "kernel_faulted",
    "registry",
    "set_schema",
    "taint",
    *(name for name in _LAZY if name not in ("custom", "edge")),
]
