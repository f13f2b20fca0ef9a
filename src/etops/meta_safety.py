"""Whether torch can run an operator overload on meta tensors, which carry shapes and
no data: etops sizes outs and asks torch's checks that way. A library's native
composite kernel (an ExecuTorch ATen wrapper such as ``preprocess::tile_crop``,
registered for CompositeExplicitAutograd in C++) also serves the Meta key, runs the
kernel on the meta tensors' absent data and kills the process. Core module: imports
torch only."""

from __future__ import annotations

import torch


def runs_on_meta(overload) -> bool:
    """True when calling `overload` (a torch OpOverload) with meta tensors runs shape
    logic only: it has a Meta kernel, it decomposes (CompositeImplicitAutograd), it
    is ATen's (whose composite kernels are written in tensor ops), or its
    CompositeExplicitAutograd kernel is Python (``torch.library``). False for a
    native composite kernel of another namespace, which would read null data."""
    schema = overload._schema
    full = f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    try:
        if has(full, "Meta") or has(full, "CompositeImplicitAutograd"):
            return True
    except RuntimeError:  # not an operator of torch's dispatcher: no kernel of its runs
        return True
    namespace, _, name = full.partition("::")
    if namespace == "aten" or not has(full, "CompositeExplicitAutograd"):
        return True  # no composite kernel: meta dispatch fails cleanly (NotImplementedError)
    from torch import library

    return f"{namespace}/{name}/CompositeExplicitAutograd" in getattr(library, "_impls", ())
