"""Will this program run here? A ``.pte``'s needs against this process's registry.

    result = etops.needs("model.pte")        # or bytes, an ExecutorchProgramManager, an edge program
    result.ok                                # every kernel and delegate call resolves here
    print(result)                            # per call: operator, tensors, exact key / fallback / MISSING
    result.write_selected_operators("selected_operators.yaml")

Owns reading a program's call sites (program_file, call_sites), resolving each one
as ExecuTorch's loader does (selection), the report (report) and the selective-build
YAML (selected_ops). May import the core (registry, kernel, dtypes, schemas,
errors, _native), ``etops.delegate``'s public names, and executorch.exir's
deserializer (imported when a program is read). ``etops.needs`` is this module,
callable as ``etops.needs(program)``.
"""

from __future__ import annotations

import sys
import types

from .call_sites import Argument, DelegateCallSite, KernelCallSite, call_sites
from ..errors import ProgramFileError
from .program_file import read_program
from .report import Needs
from .selection import DelegateNeed, KernelNeed, delegate_needs, kernel_need


def needs(program) -> Needs:
    """What `program` (a ``.pte`` path, its bytes, an ExecutorchProgramManager, an
    edge program or an ExportedProgram, lowered as ``to_executorch()`` does) needs,
    call by call, and what this process's registry and backends give it. Raises
    ProgramFileError for a file that is not a readable ExecuTorch program."""
    label, parsed = read_program(program)
    kernel_sites, delegate_sites = call_sites(label, parsed)
    return Needs(
        source=label,
        methods=tuple(plan.name for plan in parsed.execution_plan),
        kernels=tuple(kernel_need(site) for site in kernel_sites),
        delegates=tuple(delegate_needs(delegate_sites)),
    )


class _CallableModule(types.ModuleType):
    def __call__(self, program) -> Needs:
        return needs(program)


sys.modules[__name__].__class__ = _CallableModule

__all__ = [
    "Argument",
    "DelegateCallSite",
    "DelegateNeed",
    "KernelCallSite",
    "KernelNeed",
    "Needs",
    "ProgramFileError",
    "needs",
]
