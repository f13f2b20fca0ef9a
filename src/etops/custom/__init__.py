"""Custom ExecuTorch kernels at run time: compile from source, register, override,
deregister, Python kernels, torch custom ops and user libraries.

    op = etops.register_kernel("mylib::double.out", src, schema="double.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    with etops.override("aten::add.out", instrumented_src):
        ...                                   # etops calls and .pte programs loaded here run it
    op.deregister()

May import: the core only (registry, kernel, schemas, errors, hooks); it registers its origin provider with etops.hooks when imported.
"""

from __future__ import annotations

from ..errors import BuildError, DuplicateKernelError, RegistrationError, RegistryFullError
from ..hooks import set_origin_provider
from ..kernel import KernelOrigin
from .codegen import signature
from .toolchain import cache_dir, set_cache_dir, toolchain
from .library import load_library
from .python_kernel import SLOTS as PYTHON_KERNEL_SLOTS
from .registration import (
    KernelHandle,
    Override,
    deregister,
    kernel_key,
    origins,
    override,
    register_kernel,
)
from .torch_op import CustomOp, custom_op


def register_python_kernel(name, fn, schema=None, kernel_key=None):
    """Registers Python function `fn` as the ExecuTorch kernel `name` (prototyping):
    it gets torch tensors viewing the kernel's tensors (zero-copy), its result is
    copied into the outs (or written to the scalar return slot), an exception makes
    the kernel fail. A .pte run through executorch.runtime calls back into Python."""
    return register_kernel(name, fn, kernel_key, schema=schema)


# Kernel objects answer ``.origins`` from this extension's records from now on:
# which of their kernels are built-in, custom (source hash, build directory),
# Python, from a library, overridden.
set_origin_provider(origins)

__all__ = [
    "BuildError",
    "CustomOp",
    "DuplicateKernelError",
    "KernelHandle",
    "KernelOrigin",
    "Override",
    "PYTHON_KERNEL_SLOTS",
    "RegistrationError",
    "RegistryFullError",
    "cache_dir",
    "custom_op",
    "deregister",
    "kernel_key",
    "load_library",
    "origins",
    "override",
    "register_kernel",
    "register_python_kernel",
    "set_cache_dir",
    "signature",
    "toolchain",
]
