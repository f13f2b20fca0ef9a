"""The sweep: which OpInfos reach which kernels (discovery, cached), the tasks
(OpInfo x dtype) that follow, running them in-process or in workers, and the
aggregate (``Report``)."""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..cache_files import cache_root, read_json, write_json
from .case import STATUSES, CaseResult, Tally, TaskResult
from .opinfos import opinfo_dtypes, opinfos, tolerance
from .runner import TaskRunner, capture
from .values import dtype_name, values_compared
from .mapping import KernelMap
from .values import clip

DISCOVERY_VERSION = 1


# ---- discovery -----------------------------------------------------------------------


def _discovery_dtypes(op) -> list[torch.dtype]:
    """One floating, one integral and bool: the paths a decomposition may take."""
    dtypes = opinfo_dtypes(op)
    chosen = []
    for prefer, kind in ((torch.float32, lambda d: d.is_floating_point), (torch.int64, lambda d: not d.is_floating_point and not d.is_complex and d != torch.bool), (torch.bool, lambda d: d == torch.bool)):
        if prefer in dtypes:
            chosen.append(prefer)
        else:
            found = [d for d in dtypes if kind(d)]
            if found:
                chosen.append(found[0])
    if not chosen and dtypes:
        chosen.append(dtypes[0])
    return chosen


def discovery_key(kmap: KernelMap) -> str:
    import etops

    try:
        from importlib.metadata import version

        et_version = version("executorch")
    except Exception:  # noqa: BLE001
        et_version = "?"
    text = json.dumps([DISCOVERY_VERSION, torch.__version__, et_version, etops.__version__, kmap.registered, sorted(opinfos())])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def discovery_path(kmap: KernelMap) -> Path:
    """The file discover() keeps its answer for `kmap` in (it exists once discovery ran)."""
    return cache_root() / f"conformance-discovery-{discovery_key(kmap)}.json"


def discover(kmap: KernelMap, *, refresh: bool = False, progress=None) -> dict[str, dict]:
    """OpInfo id -> {"kernels": kernels its samples reach, "seconds": time}: every
    OpInfo's samples run at a floating, an integral and the bool dtype under the
    dispatch mode, calling no kernel. Cached on disk (ETOPS_CACHE_DIR, default
    ~/.cache/etops) per torch / executorch / etops version and registry (discovery_path)."""
    path = discovery_path(kmap)
    cached = None if refresh else read_json(path)
    if cached is not None:
        return cached
    found: dict[str, dict] = {}
    ops = opinfos()
    bar = _bar(len(ops), "discovering", progress)
    for oid, op in ops.items():
        runner = TaskRunner(kmap, None, mode="discover")
        start = time.perf_counter()
        for dtype in _discovery_dtypes(op):
            runner.run(oid, dtype)
        found[oid] = {"kernels": sorted(runner.reached), "seconds": round(time.perf_counter() - start, 4)}
        bar.update(1)
    bar.close()
    write_json(path, found)
    return found


# ---- progress ------------------------------------------------------------------------


class _NoBar:
    def update(self, n=1):
        pass

    def set_postfix_str(self, s):
        pass

    def close(self):
        pass


class _CountBar(_NoBar):
    """Progress handed to a function: `report(done, total)` after each update."""

    def __init__(self, total: int, report):
        self.total, self.done, self.report = total, 0, report

    def update(self, n=1):
        self.done += n
        self.report(self.done, self.total)


def _bar(total: int, desc: str, progress):
    """A tqdm bar on stderr (progress None: only on a terminal; False: none; a
    function: called with (done, total) instead)."""
    if progress is False:
        return _NoBar()
    if callable(progress):
        return _CountBar(total, progress)
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit="task", file=sys.stderr, disable=None if progress is None else not progress,
                dynamic_ncols=True, leave=False)


# ---- the sweep -----------------------------------------------------------------------


@dataclass
class Report:
    """Everything a sweep found."""

    selected: list  # kernels checked (the denominator of coverage)
    dtypes: list | None
    isolated: bool
    jobs: int
    tallies: dict = field(default_factory=dict)  # (kernel, dtype) -> Tally
    details: list = field(default_factory=list)  # CaseResult, non-pass (capped per kernel, OpInfo, dtype, status)
    failing: dict = field(default_factory=dict)  # case id -> (status, verdict), every non-pass case (uncapped)
    every_case: dict = field(default_factory=dict)  # case id -> CaseResult, every case (runners made with keep_cases)
    logged: dict = field(default_factory=dict)  # case id -> CaseResult, every passing case whose kernel logged an error
    tasks: int = 0
    samples: int = 0
    samples_failed: int = 0
    task_errors: list = field(default_factory=list)
    seconds: float = 0.0
    discovery_seconds: float = 0.0
    report_dir: str | None = None
    #: the generated cases' pairwise coverage (etops.conformance.generated.coverage_summary), when they ran
    generated: dict | None = None

    def add(self, result: TaskResult, crashes=()) -> None:
        self.tasks += 1
        self.samples += result.samples
        self.samples_failed += result.samples_failed
        if result.sample_error:
            self.task_errors.append({"opinfo": result.opinfo, "dtype": result.dtype, "error": result.sample_error})
        for key, tally in result.tallies.items():
            self.tallies.setdefault(key, Tally()).merge(tally)
        self.details.extend(result.details)
        self.failing.update(result.failing)
        self.every_case.update(result.every_case)
        self.logged.update(result.logged)
        for crash in crashes:
            self.tallies.setdefault((crash.kernel, crash.dtype), Tally()).add(crash.status, crash.opinfo)  # a crash or a hang
            self.details.append(crash)
            self.failing[crash.id] = (crash.status, getattr(crash, "verdict", None))

    # -- views --

    def kernel_rows(self) -> list[dict]:
        rows: dict[str, dict] = {}
        for (kernel, dtype), tally in sorted(self.tallies.items()):
            row = rows.setdefault(kernel, {"kernel": kernel, "cases": 0, **dict.fromkeys(STATUSES, 0), "dtypes": [], "dtypes_passing": [],
                                           "opinfos": set(), "max_abs_error": None, "max_rel_error": None, "by_dtype": {}})
            n = sum(tally.counts.values())
            row["cases"] += n
            for s in STATUSES:
                row[s] += tally.counts.get(s, 0)
            row["dtypes"].append(dtype)
            if tally.counts.get("pass", 0) == n:
                row["dtypes_passing"].append(dtype)
            row["opinfos"] |= tally.opinfos
            for attr in ("max_abs_error", "max_rel_error"):
                v = getattr(tally, attr)
                if v is not None:
                    row[attr] = max(row[attr] or 0.0, v)
            row["by_dtype"][dtype] = tally.to_json()
        out = []
        for row in rows.values():
            row["opinfos"] = sorted(row["opinfos"])
            out.append(row)
        return out

    def totals(self) -> dict:
        t = {"cases": 0, **dict.fromkeys(STATUSES, 0)}
        for tally in self.tallies.values():
            for s, n in tally.counts.items():
                t[s] = t.get(s, 0) + n
                t["cases"] += n
        return t

    def reached(self) -> list[str]:
        return sorted({k for k, _ in self.tallies})

    def coverage(self) -> dict:
        reached = [k for k in self.reached() if k in set(self.selected)]
        unreached = sorted(set(self.selected) - set(reached))
        return {"registered": len(self.selected), "reached": len(reached), "fraction": (len(reached) / len(self.selected)) if self.selected else 0.0,
                "unreached": unreached}

    def namespaces(self) -> list[dict]:
        """Coverage per namespace (see ``by_namespace``)."""
        return by_namespace(self)

    def cases(self, status: str | None = None) -> list[CaseResult]:
        return [c for c in self.details if status is None or c.status == status]


def plan_tasks(kmap: KernelMap, selected, dtypes=None, discovered=None, opinfo_filter=None) -> list[dict]:
    """(OpInfo, dtype) tasks whose OpInfo reaches a selected kernel, longest first."""
    tasks = []
    ops = opinfos()
    wanted = set(selected)
    for oid, info in discovered.items():
        if oid not in ops or not wanted & set(info["kernels"]):
            continue
        if opinfo_filter is not None and oid not in opinfo_filter:
            continue
        for dtype in opinfo_dtypes(ops[oid]):
            if dtypes is not None and dtype not in dtypes:
                continue
            tasks.append({"opinfo": oid, "dtype": dtype_name(dtype), "cost": info.get("seconds", 0.0)})
    tasks.sort(key=lambda t: -t["cost"])
    return tasks


def registered_kernels() -> list[str]:
    """Every registered kernel, all namespaces (the denominator of coverage)."""
    import etops

    return sorted(etops.registry().operator_names)


def reference_tasks(selected, dtypes=None) -> list[dict]:
    """(reference, dtype) tasks of the selected kernels that have a reference
    (etops.conformance.references); `dtypes` narrows them when given."""
    from . import references

    refs = references.references()
    wanted = None if dtypes is None else {dtype_name(d) for d in dtypes}
    tasks = []
    for kernel in selected:
        ref = refs.get(kernel)
        if ref is None:
            continue
        for dtype in ref.dtypes:
            if wanted is None or dtype in wanted:
                tasks.append({"opinfo": ref.task_id, "dtype": dtype, "cost": 0.0})
    return tasks


def by_namespace(report: "Report") -> list[dict]:
    """Per namespace: kernels registered (selected), reached (any case) and passing
    (every case passed), in namespace order."""
    rows: dict = {}
    reached, passing = set(report.reached()), {r["kernel"] for r in report.kernel_rows() if r["cases"] and r["pass"] == r["cases"]}
    for kernel in report.selected:
        ns = kernel.split("::", 1)[0]
        row = rows.setdefault(ns, {"namespace": ns, "registered": 0, "reached": 0, "passing": 0, "unreached": []})
        row["registered"] += 1
        row["reached"] += kernel in reached
        row["passing"] += kernel in passing
        if kernel not in reached:
            row["unreached"].append(kernel)
    return [rows[ns] for ns in sorted(rows)]


def resolve_kernels(names, kmap: KernelMap) -> list[str]:
    """Kernel names as registered (``aten::add.out``); ``aten::add`` selects every
    registered overload of the op; None: every registered kernel, all namespaces."""
    registered = registered_kernels()
    if not names:
        return list(registered)
    from ..schemas import split_name

    out = []
    for name in names:
        if "::" not in name:
            name = "aten::" + name
        if name in registered:
            out.append(name)
            continue
        ns, op, overload = split_name(name)
        same = [r for r in registered if split_name(r)[:2] == (ns, op) and ("." not in name.split("::", 1)[1] or split_name(r)[2] == overload)]
        if not same:
            import etops

            etops.registry().get_kernel(name)  # raises KernelNotFoundError with suggestions
            raise ValueError(f"{name} is registered but has neither OpInfo samples nor a reference")
        out.extend(same)
    return sorted(set(out))


def run(kernels=None, *, dtypes=None, isolated: bool = False, jobs: int = 1, report_dir=None, hooks=None,
        progress=None, max_details: int = 3, refresh_discovery: bool = False, opinfo_filter=None, timeout: float | None = None,
        verbose: bool = False, log=None, generated: bool | str = False) -> Report:
    """Runs the sweep. `kernels`: names (None: every registered aten kernel);
    `dtypes`: torch dtypes or names (None: every dtype OpInfo lists for CPU);
    `isolated`/`jobs`: worker processes (a crash becomes a case, the sweep goes on);
    `report_dir`: where reproducers go; `hooks`: a module (name or .py path) with
    ``before_call(case)`` / ``reference(case, expected)`` (tests); `generated`: the
    selected kernels' generated cases too (etops.conformance.generated); "only":
    those alone."""
    start = time.perf_counter()
    from .runner import default_kmap

    kmap = default_kmap()
    selected = resolve_kernels(kernels, kmap)
    if dtypes is not None:
        from .opinfos import dtype_from_name

        dtypes = [d if isinstance(d, torch.dtype) else dtype_from_name(d) for d in dtypes]
    report = Report(selected, [dtype_name(d) for d in dtypes] if dtypes else None, isolated, jobs,
                    report_dir=str(report_dir) if report_dir else None)
    t0 = time.perf_counter()
    if generated == "only":  # the generated cases alone: no discovery, no OpInfo or reference task
        discovered, opinfo_filter = {}, set()
    elif opinfo_filter is not None and not refresh_discovery:
        # named OpInfos: run them all, whatever they reach (no discovery needed)
        discovered = {oid: {"kernels": selected, "seconds": 0.0} for oid in opinfo_filter}
    else:
        discovered = discover(kmap, refresh=refresh_discovery, progress=progress)
    report.discovery_seconds = time.perf_counter() - t0
    tasks = plan_tasks(kmap, selected, dtypes, discovered, opinfo_filter)
    if opinfo_filter is None:
        tasks += reference_tasks(selected, dtypes)  # kernels with a reference: their own cases
    if generated:
        from .generated import generated_tasks

        tasks += generated_tasks(selected, dtypes)  # cases from each kernel's schema and the constraint table
        from .generated import coverage_summary

        report.generated = coverage_summary(selected)
    all_selected = None if set(kmap.registered) <= set(selected) else selected
    if report_dir is not None:
        Path(report_dir).mkdir(parents=True, exist_ok=True)
    bar = _bar(len(tasks), "checking", progress)

    def on_result(task, result: TaskResult, crashes) -> None:
        report.add(result, crashes)
        for crash in crashes:
            if report_dir is not None:
                _crash_reproducer(kmap, all_selected, crash, report_dir)
        if verbose and log is not None:
            counts = {}  # type: ignore[var-annotated]
            for t in result.tallies.values():
                for s, n in t.counts.items():
                    counts[s] = counts.get(s, 0) + n
            if crashes:
                counts["crash"] = counts.get("crash", 0) + len(crashes)
            summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
            bar_write(bar, f"{result.opinfo} [{result.dtype}]: {summary or 'no cases'} ({result.seconds:.2f}s)", log)
            for c in list(result.details) + list(crashes):
                bar_write(bar, f"    {c.status}: {c.kernel} via {c.aten_op} s{c.sample}c{c.call}: {clip(c.message, 160)}", log)
        bar.set_postfix_str(f"{result.opinfo} {result.dtype}"[:40])
        bar.update(1)

    if isolated or jobs > 1:
        from .pool import DEFAULT_TIMEOUT, run_pool

        config = {"selected": all_selected, "hooks": hooks, "report_dir": str(report_dir) if report_dir else None,
                  "max_details": max_details}
        run_pool(tasks, kmap, config, max(1, jobs), on_result, timeout=timeout or DEFAULT_TIMEOUT)
    else:
        kernels_cache: dict = {}
        for task in tasks:
            runner = TaskRunner(kmap, all_selected, hooks=hooks, report_dir=report_dir, max_details=max_details, kernels=kernels_cache)
            result = runner.run(task["opinfo"], torch.__dict__[task["dtype"]])
            on_result(task, result, [])
    bar.close()
    report.details.sort(key=lambda c: (c.kernel, c.status, c.opinfo, c.dtype, c.sample, c.call))
    report.seconds = time.perf_counter() - start
    return report


def bar_write(bar, text: str, log) -> None:
    if hasattr(bar, "write"):
        bar.write(text, file=log)
    else:
        print(text, file=log)


def _crash_reproducer(kmap, selected, crash: CaseResult, report_dir) -> None:
    """Finds the crashed case's inputs again (running the task without kernels) and
    writes its reproducer."""
    from .reproducer import write_reproducer

    try:
        found = capture(kmap, selected, crash.opinfo, torch.__dict__[crash.dtype], crash.sample, crash.call)
        if found is None:
            crash.message += " (inputs not found again: no reproducer)"
            return
        func, _target, args, kwargs = found
        from .case import describe_call

        crash.inputs = describe_call(args, kwargs)
        crash.atol, crash.rtol = tolerance(opinfos()[crash.opinfo], torch.__dict__[crash.dtype])
        crash.reproducer = write_reproducer(report_dir, crash, func, args, kwargs, None, values_compared(func))
    except Exception as exc:  # noqa: BLE001
        crash.message += f" (no reproducer: {type(exc).__name__}: {exc})"
