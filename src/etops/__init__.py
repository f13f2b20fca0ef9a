"""etops: ExecuTorch's kernels as Python callables.

    import torch, etops
    reg = etops.registry()                # or executorch.runtime.Runtime.get().operator_registry
    c = torch.empty(2, 2)
    reg.aten.add.out(torch.ones(2, 2), torch.ones(2, 2), out=c)

Importing etops loads the executorch wheel's runtime and kernel libraries (not
executorch.exir) and extends executorch.runtime's OperatorRegistry.
"""

from __future__ import annotations

import torch

from . import _native
from . import _logs, _runtime_patch
from .errors import (
    DelegateError,
    EtopsError,
    KernelError,
    KernelNotFoundError,
    NoMatchingKernelError,
    SchemaError,
)
from .kernel import KernelInfo, RegisteredKernel, UncallableKernel
from .registry import Namespace, OpPacket, Registry, get_kernel, registry
from .schemas import set_schema

__version__ = "0.1.0"

Kernel = _native.Kernel


def _densify(obj):
    """A contiguous copy of a non-dense tensor-like (torch or DLPack producer)."""
    if not isinstance(obj, torch.Tensor):
        obj = torch.from_dlpack(obj)
    return obj.contiguous()


_native.configure(tensor_type=torch.Tensor, densify=_densify, flush_logs=_logs.flush)
_native.install_pal()
_runtime_patch.install()

# Custom kernels at run time (etops.custom): compile, register, override, deregister.
from .custom import (  # noqa: E402
    BuildError,
    CustomOp,
    DuplicateKernelError,
    KernelHandle,
    Override,
    RegistrationError,
    RegistryFullError,
    custom_op,
    deregister,
    kernel_key,
    load_library,
    override,
    register_kernel,
    register_python_kernel,
)

__all__ = [
    "BuildError",
    "CustomOp",
    "DuplicateKernelError",
    "KernelHandle",
    "Override",
    "RegistrationError",
    "RegistryFullError",
    "custom_op",
    "deregister",
    "kernel_key",
    "load_library",
    "override",
    "register_kernel",
    "register_python_kernel",
    "DelegateError",
    "DelegateInfo",
    "EtopsError",
    "Kernel",
    "KernelError",
    "KernelInfo",
    "KernelNotFoundError",
    "Namespace",
    "NoMatchingKernelError",
    "OpPacket",
    "RegisteredKernel",
    "Registry",
    "SchemaError",
    "UncallableKernel",
    "backends",
    "delegate",
    "get_kernel",
    "registry",
    "set_schema",
]


def __getattr__(name):
    # etops.edge imports executorch.exir (seconds): loaded on first use only.
    if name in ("edge", "needs"):  # etops.needs: executorch.exir when it reads a program
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'etops' has no attribute {name!r}")

from .bench import bench, bench_all, bench_delegate, get_num_threads, set_num_threads  # noqa: E402  (the benchmark harness, imported lazily inside)
from . import delegate  # noqa: E402  (backends and lowered modules; no executorch.exir import)
from .delegate import DelegateInfo, backends  # noqa: E402
