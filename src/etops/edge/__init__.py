"""Edge programs on ExecuTorch's kernels.

    import etops.edge
    y = etops.edge.call(exir_ops.edge.aten.add.Tensor, a, b)   # aten::add.out, out allocated
    with etops.edge.on_executorch():                             # EdgeOpOverload calls run their kernels
        ...
    outs = etops.edge.run(edge_program_manager, example_inputs)  # node by node, as the .pte would
                                                                 # (delegate calls on their backends)
    report = etops.edge.compare(edge_program_manager, example_inputs)
    print(report); report.first_divergence.reproducer

Importing this module imports executorch.exir (seconds); ``import etops`` does not.
"""

from __future__ import annotations

from ._call import call, is_on_executorch, kernel_for, kernel_name, on_executorch, resolve
from ._compare import CompareReport, NodeResult, OutputDiff, compare
from ._run import UnsupportedNodeError, resolve_program, run

__all__ = [
    "CompareReport",
    "NodeResult",
    "OutputDiff",
    "UnsupportedNodeError",
    "call",
    "compare",
    "is_on_executorch",
    "kernel_for",
    "kernel_name",
    "on_executorch",
    "resolve",
    "resolve_program",
    "run",
]
