"""OpInfo conformance: ExecuTorch's registered aten kernels against ATen on
PyTorch's OpInfo samples.

Every OpInfo sample runs under a torch dispatch mode that sees each ATen call; a
call whose out variant (or view-copy twin) is a registered ExecuTorch kernel is
also sent to that kernel, on a copy of the same inputs, and the two results are
compared with OpInfo's tolerance for the dtype. Each such call is a case with one
status: pass, mismatch, unsupported, guarded, error or crash (see ``STATUSES``);
findings are grouped by root cause in ``clusters`` (etops.conformance.clusters).

    from etops import conformance
    report = conformance.run(["aten::add.out"], dtypes=["float32"])
    print(conformance.terminal(report))

``python -m etops check`` is the command line (``etops.conformance.cli.main``);
``pytest --pyargs etops.conformance`` runs the cases as pytest items.

Importing this package does not import executorch.exir or OpInfo's database;
``run`` does.

May import: the core (registry, kernel, compare, out_shapes), etops.guard,
etops.checkout (its load, for --load) and torch's OpInfo database; imported by
etops.testing, etops.dev, etops.upstream and the CLI.
"""

from __future__ import annotations

from .mapping import KernelMap
from .case import STATUSES, CaseInfo, CaseResult, TaskResult
from .opinfos import tolerance
from .runner import TaskRunner
from .sweep import Report, discover, plan_tasks, run


def terminal(report, clusters=None, axis=None) -> str:
    from .report import terminal as _terminal

    return _terminal(report, clusters=clusters, axis=axis)


def to_json(report, clusters=None, axis=None) -> dict:
    from .report import to_json as _to_json

    return _to_json(report, clusters=clusters, axis=axis)


def markdown(report, clusters=None, axis=None) -> str:
    from .report import markdown as _markdown

    return _markdown(report, clusters=clusters, axis=axis)


__all__ = ["STATUSES", "CaseInfo", "CaseResult", "KernelMap", "Report", "TaskResult", "TaskRunner", "discover", "markdown",
           "plan_tasks", "run", "terminal", "to_json", "tolerance"]
