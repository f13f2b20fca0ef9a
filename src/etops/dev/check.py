"""Conformance of a swapped-in kernel against ATen and against the kernel it replaced.

Each case of etops.conformance (OpInfo samples, or the operator's reference) runs the
new kernel twice on copies of the same inputs: once compared with ATen's result (the
sweep's ordinary check), once with what the replaced kernel (``Override.previous``)
computes on its own copy. A case the replaced kernel refuses is left out of the
second comparison (the new kernel may accept more).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from ..conformance.case import TaskResult, call_kernel, plan_call
from ..conformance.opinfos import dtype_from_name, opinfo_dtypes, opinfos
from ..conformance.runner import AGAINST_ATEN, NO_REFERENCE, TaskRunner, default_kmap
from ..conformance.values import exact_clone
from ..errors import KernelError, NoMatchingKernelError
from ..registry import as_program
from ..schemas import split_name

#: Detailed cases kept per operator and comparison (the counts are complete).
MAX_DETAILS = 5
#: Case statuses that are findings: wrong results, errors, crashes, aborts (an
#: ExecuTorch check failing where a program would die).
FINDINGS = ("mismatch", "error", "crash", "abort")


class AgainstReplaced:
    """The new kernel's result against what the kernel it replaced computes on its
    own copy of the inputs (``previous``: operator -> that kernel, judged as a
    program calls it: etops' workarounds never reach the verdict). A case the
    replaced kernel refuses (or aborts on) is left out: the new kernel may accept
    more; so is an operator with no replaced kernel (a new one)."""

    name = "builtin"

    def __init__(self, previous: dict) -> None:
        self.previous = {name: as_program(kernel) for name, kernel in previous.items()}

    def reference(self, runner, case, func, args, kwargs, expected):
        previous = self.previous.get(case.kernel)
        if previous is None:
            return NO_REFERENCE
        try:
            p_args, p_kwargs = exact_clone(args), exact_clone(kwargs)
            return call_kernel(previous, plan_call(previous, func, p_args, p_kwargs), expected)
        except (KernelError, NoMatchingKernelError):  # KernelAborted too
            return NO_REFERENCE


def opinfo_ids(name: str) -> list[str]:
    """OpInfos whose samples may reach aten operator `name`: by its base name (a
    view op's ``_copy`` out variant by the view's, ``nn.functional.<base>`` too);
    when none has its name, those the last OpInfo discovery of ``etops check``
    found reaching it (an OpInfo of another op whose decomposition calls it)."""
    ns, op, _ = split_name(name)
    if ns != "aten":
        return []
    bases = {op, op.removesuffix("_copy"), op.lstrip("_"), op.removesuffix("_with_indices")}
    bases |= {f"nn.functional.{b}" for b in set(bases)}
    found = {oid for oid, info in opinfos().items() if getattr(info, "name", None) in bases or getattr(info, "aten_name", None) in bases}
    if not found:
        found = {oid for oid in discovered(name) if oid in opinfos()}
    return sorted(found)


def discovered(name: str) -> list[str]:
    """The OpInfos the newest cached discovery (``etops check``) found reaching
    `name` (none when no sweep ran here)."""
    import json

    from ..conformance.sweep import cache_dir

    files = sorted(cache_dir().glob("conformance-discovery-*.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        return []
    try:
        data = json.loads(files[-1].read_text())
    except (OSError, ValueError):
        return []
    return [oid for oid, info in data.items() if name in info.get("kernels", ())]


@dataclass
class Conformance:
    """One operator's cases: ``vs_aten`` and ``vs_builtin`` each map status ->
    count; ``details`` the non-passing cases of each comparison."""

    name: str
    vs_aten: dict = field(default_factory=dict)
    vs_builtin: dict = field(default_factory=dict)
    details_aten: list = field(default_factory=list)
    details_builtin: list = field(default_factory=list)
    sources: list = field(default_factory=list)  #: OpInfo ids / reference tasks run
    left_out: int = 0  #: cases not run: the budget was spent
    note: str = ""

    @staticmethod
    def _findings(counts: dict) -> int:
        return sum(counts.get(s, 0) for s in FINDINGS)

    @property
    def findings(self) -> int:
        """Cases where the kernel disagrees with ATen or with the built-in, or fails."""
        return self._findings(self.vs_aten) + self._findings(self.vs_builtin)

    def to_dict(self) -> dict:
        return {"name": self.name, "vs_aten": self.vs_aten, "vs_builtin": self.vs_builtin, "sources": self.sources,
                "left_out": self.left_out, "note": self.note, "details_aten": [d.to_json() for d in self.details_aten],
                "details_builtin": [d.to_json() for d in self.details_builtin]}


def _first(dtype: torch.dtype) -> tuple:
    """Task order: float32, then the other floating dtypes, then the rest."""
    return (dtype != torch.float32, not dtype.is_floating_point, str(dtype))


def _tasks(name: str, dtypes) -> list[tuple[str, torch.dtype]]:
    from ..conformance.sweep import reference_tasks

    wanted = None if dtypes is None else [d if isinstance(d, torch.dtype) else dtype_from_name(str(d)) for d in dtypes]
    tasks = []
    for oid in opinfo_ids(name):
        for dtype in opinfo_dtypes(opinfos()[oid]):
            if wanted is None or dtype in wanted:
                tasks.append((oid, dtype))
    if not tasks:  # an operator no OpInfo reaches: its reference (etops.conformance.references), if any
        for t in reference_tasks([name], wanted):
            tasks.append((t["opinfo"], dtype_from_name(t["dtype"])))
    return sorted(tasks, key=lambda t: _first(t[1]))


def _add(counts: dict, result: TaskResult, name: str) -> None:
    for (kernel, _), tally in result.tallies.items():
        if kernel == name:
            for status, n in tally.counts.items():
                counts[status] = counts.get(status, 0) + n


def check(names: list[str], previous: dict, dtypes=None, budget: float | None = None) -> list[Conformance]:
    """Conformance of each operator of `names` (its kernel swapped in) against ATen
    and against ``previous[name]`` (the kernel it replaced; none for a new
    operator). ``budget``: seconds for all of them (float32 tasks first); cases
    past it are left out and counted (``Conformance.left_out``)."""
    kmap = default_kmap()
    deadline = None if budget is None else time.monotonic() + budget
    out = []
    for name in names:
        conf = Conformance(name)
        against_replaced = AgainstReplaced({name: previous[name]} if name in previous else {})
        runner = TaskRunner(kmap, [name], max_details=MAX_DETAILS, comparisons=(AGAINST_ATEN, against_replaced), deadline=deadline)
        for task, dtype in _tasks(name, dtypes):
            if deadline is not None and time.monotonic() > deadline:
                conf.left_out += 1  # a task not started: counted as one
                continue
            result = runner.run(task, dtype)
            _add(conf.vs_aten, result, name)
            vs_previous = runner.results[against_replaced.name]
            _add(conf.vs_builtin, vs_previous, name)
            conf.details_aten += [d for d in result.details if d.kernel == name][: MAX_DETAILS - len(conf.details_aten)]
            conf.details_builtin += [d for d in vs_previous.details if d.kernel == name][: MAX_DETAILS - len(conf.details_builtin)]
            if task not in conf.sources:
                conf.sources.append(task)
        conf.left_out += runner.left_out
        if not sum(conf.vs_aten.values()):
            conf.note = ("no OpInfo sample or reference reaches it" if not conf.sources else
                         f"the samples of {', '.join(conf.sources)} never reach it")
        if conf.left_out:
            conf.note = (conf.note + "; " if conf.note else "") + f"the check's budget ran out: {conf.left_out} cases / tasks left out"
        out.append(conf)
    return out
