"""A conformance case and how its kernel is called: the records the runner, the
reference tasks (etops.conformance.references), the reproducers, the pool and the
reports share (CaseInfo, CaseResult, Tally, TaskResult), and the call of one case
(the ATen call's arguments bound by the kernel's schema: ``plan_call``,
``call_kernel``).

May import: torch, the core (out_shapes) and etops.conformance.values.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch

from ..out_shapes import is_data_dependent, poisoned
from .effective import merged, note
from .outcome import Outcome
from .values import clip, describe

#: guarded: etops' own pre-call guard refused the call (the kernel is known to
#: corrupt memory on such inputs: only the rules table's ``memory`` rules guard the
#: kernel as a program calls it); CaseResult.rule names the guard. abort: ExecuTorch
#: aborted inside the kernel (an ET_CHECK; etops unwound it), as it would abort a
#: program; crash: the kernel killed its worker or guard process; hang: the kernel did
#: not return within the case's time limit (etops.conformance.case_clock: its process
#: was killed, CaseResult.limit_seconds the limit it exceeded)
STATUSES = ("pass", "mismatch", "unsupported", "guarded", "error", "crash", "abort", "hang")


@dataclass
class CaseInfo:
    """Where a case comes from (what hooks receive)."""

    kernel: str
    aten_op: str
    opinfo: str
    dtype: str
    sample: int
    call: int

    @property
    def id(self) -> str:
        return f"{self.kernel}|{self.opinfo}|{self.dtype}|s{self.sample}c{self.call}"


@dataclass
class CaseResult(CaseInfo):
    """A case's outcome: where it comes from (CaseInfo), then what happened."""

    status: str = ""
    message: str = ""
    inputs: str = ""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    atol: float | None = None
    rtol: float | None = None
    reproducer: str | None = None
    rule: str | None = None  #: guarded: the guard that refused (etops.conformance.guarded); abort: what etops' direct calls do about it
    #: mismatch: "within ATen's error", "precision loss" or "wrong" (values.precision_verdict)
    verdict: str | None = None
    #: mismatch: ExecuTorch's and ATen's max abs error against the higher-precision reference
    reference_error: float | None = None
    aten_reference_error: float | None = None
    #: floating results: the worst error in ulps of the dtype at the output's scale, ExecuTorch's and ATen's,
    #: the reference they were measured against, and why a wrong result is wrong (etops.conformance.effective)
    ulps: float | None = None
    aten_ulps: float | None = None
    reference: str | None = None
    reason: str | None = None
    #: a precision regression (etops dev): the base's error on the case, in ulps (as ``ulps``)
    base_ulps: float | None = None
    #: what happened, as a structured value (etops.conformance.outcome): what verdicts are decided from
    outcome: Outcome | None = None
    #: hang: the time limit (seconds) the kernel's call exceeded (etops.conformance.case_clock.limit)
    limit_seconds: float | None = None
    #: what the kernel logged at Error level during a call that returned (etops._logs), or None
    logged: str | None = None

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["outcome"] = self.outcome.to_json() if self.outcome is not None else None
        return d

    @classmethod
    def from_json(cls, d: dict) -> "CaseResult":
        d = dict(d)
        outcome = d.pop("outcome", None)
        return cls(**d, outcome=Outcome.from_json(outcome) if outcome else None)


@dataclass
class Tally:
    """Counts for one (kernel, dtype)."""

    counts: dict = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    opinfos: set = field(default_factory=set)
    ulps: dict | None = None  #: effective precision (etops.conformance.effective.note)

    def add(self, status: str, opinfo: str, abs_err=None, rel_err=None, n: int = 1) -> None:
        self.counts[status] = self.counts.get(status, 0) + n
        self.opinfos.add(opinfo)
        if abs_err is not None and math.isfinite(abs_err):
            self.max_abs_error = max(self.max_abs_error or 0.0, abs_err)
        if rel_err is not None and math.isfinite(rel_err):
            self.max_rel_error = max(self.max_rel_error or 0.0, rel_err)

    def merge(self, other: "Tally") -> None:
        for k, v in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + v
        self.opinfos |= other.opinfos
        self.ulps = merged(self.ulps, other.ulps)
        for attr in ("max_abs_error", "max_rel_error"):
            theirs = getattr(other, attr)
            if theirs is not None:
                setattr(self, attr, max(getattr(self, attr) or 0.0, theirs))

    def to_json(self) -> dict:
        return {"counts": self.counts, "max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error, "opinfos": sorted(self.opinfos),
                **({"ulps": self.ulps} if self.ulps else {})}

    @classmethod
    def from_json(cls, d: dict) -> "Tally":
        return cls(dict(d["counts"]), d.get("max_abs_error"), d.get("max_rel_error"), set(d.get("opinfos", ())), d.get("ulps"))


@dataclass
class TaskResult:
    """What one (OpInfo, dtype) task found."""

    opinfo: str
    dtype: str
    tallies: dict = field(default_factory=dict)  # (kernel, dtype) -> Tally
    details: list = field(default_factory=list)  # CaseResult for non-pass cases (capped)
    failing: dict = field(default_factory=dict)  # case id -> (status, verdict), every non-pass case (uncapped)
    #: case id -> CaseResult of every case, passing ones too (a runner made with keep_cases: etops dev, whose
    #: judge matches the edit's cases with the base's one by one)
    every_case: dict = field(default_factory=dict)
    samples: int = 0
    samples_failed: int = 0
    sample_error: str = ""
    seconds: float = 0.0
    #: case id -> seconds its kernel call took (etops dev keeps the base's: part of the edit's case limits)
    case_seconds: dict = field(default_factory=dict)
    #: case id -> CaseResult of every passing case whose kernel logged an error (no silent pass)
    logged: dict = field(default_factory=dict)
    #: case id -> why it was skipped for size (its process passed its memory limit in it:
    #: etops.conformance.case_clock.OverMemory): not a case run, never a pass
    too_large: dict = field(default_factory=dict)

    def record(self, result: CaseResult, keep: bool, every: bool = False) -> None:
        """Counts `result`; keeps it in ``details`` when `keep`, in ``every_case`` when `every`,
        in ``logged`` when it passed but its kernel logged an error."""
        tally = self.tallies.setdefault((result.kernel, result.dtype), Tally())
        tally.add(result.status, result.opinfo, result.max_abs_error, result.max_rel_error)
        tally.ulps = note(tally.ulps, result)
        if result.status == "pass" and result.logged:
            self.logged[result.id] = result
        if result.status != "pass":
            self.failing[result.id] = (result.status, result.verdict)
        if keep:
            self.details.append(result)
        if every:
            self.every_case[result.id] = result

    def to_json(self) -> dict:
        return {
            "opinfo": self.opinfo,
            "dtype": self.dtype,
            "tallies": [[k, d, t.to_json()] for (k, d), t in self.tallies.items()],
            "details": [r.to_json() for r in self.details],
            "failing": self.failing,
            "every_case": [r.to_json() for r in self.every_case.values()],
            "logged": [r.to_json() for r in self.logged.values()],
            "too_large": self.too_large,
            "samples": self.samples,
            "samples_failed": self.samples_failed,
            "sample_error": self.sample_error,
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, d: dict) -> "TaskResult":
        r = cls(d["opinfo"], d["dtype"])
        r.tallies = {(k, dt): Tally.from_json(t) for k, dt, t in d["tallies"]}
        r.details = [CaseResult.from_json(c) for c in d["details"]]
        r.every_case = {c.id: c for c in (CaseResult.from_json(x) for x in d.get("every_case", ()))}
        r.failing = {case: tuple(outcome) for case, outcome in d.get("failing", {}).items()}
        r.logged = {c.id: c for c in (CaseResult.from_json(x) for x in d.get("logged", ()))}
        r.too_large = dict(d.get("too_large", {}))
        r.samples, r.samples_failed = d["samples"], d["samples_failed"]
        r.sample_error, r.seconds = d.get("sample_error", ""), d.get("seconds", 0.0)
        return r


def bind(func, args, kwargs) -> dict:
    schema = func._schema
    bound = {}
    positional = [a for a in schema.arguments if not a.kwarg_only]
    for arg, value in zip(positional, args):
        bound[arg.name] = value
    bound.update(kwargs)
    return bound


@dataclass
class KernelCall:
    """How to call a kernel for one ATen call: positional and keyword arguments
    (by the kernel's schema) and whether outs must be given (factory ops whose
    TensorOptions the out variant does not take)."""

    args: list
    kwargs: dict
    outs_from_aten: bool


def plan_call(kernel, func, args, kwargs) -> KernelCall:
    info = kernel._info
    schema = info._schema
    bound = bind(func, args, kwargs)
    k_args, k_kwargs = [], {}  # type: ignore[var-annotated]
    names = set()
    for arg in schema.arguments:
        if arg.is_out:
            continue
        names.add(arg.name)
        if arg.name not in bound:
            continue
        if arg.kwarg_only or len(k_args) != _positional_index(schema, arg.name):
            k_kwargs[arg.name] = bound[arg.name]
        else:
            k_args.append(bound[arg.name])
    dropped = [n for n in bound if n not in names]
    outs_from_aten = bool(info.out_names()) and (bool(dropped) or _no_shape_inference(info))
    return KernelCall(k_args, k_kwargs, outs_from_aten)


def _positional_index(schema, name: str) -> int:
    i = 0
    for arg in schema.arguments:
        if arg.kwarg_only:
            break
        if arg.name == name:
            return i
        i += 1
    return -1


def _no_shape_inference(info) -> bool:
    return not is_data_dependent(info) and info.functional_overload() is None


def _empty_like(value):
    """A fresh out shaped as ATen's result `value`, poisoned (out_shapes.poisoned: an
    element the kernel leaves unwritten is the same wrong value on every run)."""
    if isinstance(value, torch.Tensor):
        dense = value.is_contiguous() or value.is_contiguous(memory_format=torch.channels_last)
        return poisoned(torch.empty_like(value) if dense else torch.empty(value.shape, dtype=value.dtype))
    if isinstance(value, (list, tuple)):
        return [_empty_like(v) for v in value]
    return value


def call_kernel(kernel, plan: KernelCall, expected, invoke=None):
    """The kernel's result for one case (`invoke(kernel, args, kwargs)` makes the
    call when given: the hooks' invoke, e.g. a guarded call)."""
    kwargs = dict(plan.kwargs)
    if plan.outs_from_aten:
        names = kernel._info.out_names()
        results = [expected] if len(names) == 1 else list(expected)
        for name, value in zip(names, results):
            kwargs[name] = _empty_like(value)
    if invoke is not None:
        return invoke(kernel, plan.args, kwargs)
    return kernel(*plan.args, **kwargs)


def describe_call(args, kwargs) -> str:
    parts = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in kwargs.items()]
    return clip(", ".join(parts), 400)
