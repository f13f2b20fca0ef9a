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

May import: the core, etops.delegate, etops.compare and executorch.exir; imported by etops.bench and the CLI.
"""

from __future__ import annotations

from ._call import call, is_on_executorch, kernel_for, kernel_name, on_executorch, resolve
from ._compare import CompareReport, NodeResult, OutputDiff, compare
from ._run import ExecuTorchExecutor, UnsupportedNodeError, interpret, placeholder_values, resolve_program, run, user_outputs

__all__ = [
    "CompareReport",
    "ExecuTorchExecutor",
    "NodeResult",
    "OutputDiff",
    "UnsupportedNodeError",
    "call",
    "compare",
    "interpret",
    "is_on_executorch",
    "kernel_for",
    "kernel_name",
    "on_executorch",
    "placeholder_values",
    "resolve",
    "resolve_program",
    "run",
    "user_outputs",
]
