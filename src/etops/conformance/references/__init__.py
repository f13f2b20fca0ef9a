"""References: for every registered kernel no OpInfo sample reaches, the callable
it must agree with and the inputs to call both on - the sweep's second source of
cases beside OpInfo (``etops check`` runs them as tasks ``ref:<kernel>``).

One module per namespace: prim.py (``executorch_prim::*`` against Python's
scalar semantics), dim_order.py (``dim_order_ops::*``, ``et_copy::*`` against
exir's ATen-side ops), quantized.py (``quantized_decomposed::*`` against torch's
reference ops, inputs in quantization ranges), aten.py (the aten kernels no
OpInfo sample reaches, against ATen, with the input constraints of
etops.ops.inputs), llm.py (``llama::*`` / ``preprocess::*`` against the ATen
implementations their library registers, when it is loaded). spec.py has the
record types (Reference, Sample), run.py runs one reference task.

May import: torch, the core (etops.ops, errors, registry) and the conformance
case, values and opinfos modules, never the runner (run.py is one of its task
sources: the runner imports it); imported by the sweep and etops.testing. Importing this package does
not import executorch.exir (the modules are imported when first asked for).
"""

from __future__ import annotations

import functools
import importlib

from .spec import TASK_PREFIX, Reference, ReferenceOp, Sample, invalid

#: the modules holding references, one per namespace (or family)
MODULES = ("prim", "dim_order", "quantized", "aten", "llm")

_USER: dict = {}


@functools.lru_cache(maxsize=None)
def _builtin() -> dict:
    found = {}
    for name in MODULES:
        for ref in importlib.import_module(f"{__name__}.{name}").REFERENCES:
            if ref.kernel in found:
                raise ValueError(f"two references for {ref.kernel}")
            found[ref.kernel] = ref
    return found


def references() -> dict:
    """kernel name -> Reference: the built-in ones and those given with ``add``."""
    return {**_builtin(), **_USER}


def add(reference: Reference) -> Reference:
    """Makes `reference` the one of its kernel in this process (``etops.testing``
    uses it for kernels a user loads)."""
    if not isinstance(reference, Reference):
        raise TypeError(f"add: argument 'reference' must be a Reference, got {type(reference).__name__}")
    _USER[reference.kernel] = reference
    return reference


def find(kernel: str) -> Reference:
    """The Reference of `kernel`; KeyError naming it when there is none."""
    found = references().get(kernel)
    if found is None:
        raise KeyError(f"no reference for kernel {kernel!r}")
    return found


def library_kernels() -> dict:
    """library module -> the kernels whose references need it loaded (LLM ops)."""
    out: dict = {}
    for ref in references().values():
        if ref.library:
            out.setdefault(ref.library, []).append(ref.kernel)
    return out


__all__ = ["MODULES", "TASK_PREFIX", "Reference", "ReferenceOp", "Sample", "add", "find", "invalid", "library_kernels", "references"]
