"""Delegates from Python: ExecuTorch's backends, and lowered modules run directly.

    etops.backends()                          # registered backends, with is_available()
    lowered = etops.delegate.lowered_modules(edge_program)
    run = etops.delegate.load(lowered[0])     # backend init, once
    out = run(x)                              # the backend's execute, on torch tensors

``etops.edge.run`` and ``etops.edge.compare`` run a program's delegate calls the
same way. Importing this package does not import executorch.exir.

May import: the core only (kernel, plan, slow_path, out_shapes, resize, layouts, errors); imported by etops.edge and etops.bench.
"""

from __future__ import annotations

from .backend_registry import Backend, backend_libraries, backends, load_backend_libraries
from .load import DelegateInfo, ValueSpec, load, loaded
from .lowered import delegate_calls, graph_module_of, is_delegate_call, lowered_modules, reference_module

__all__ = [
    "Backend",
    "DelegateInfo",
    "ValueSpec",
    "backend_libraries",
    "backends",
    "delegate_calls",
    "graph_module_of",
    "is_delegate_call",
    "load",
    "load_backend_libraries",
    "loaded",
    "lowered_modules",
    "reference_module",
]
