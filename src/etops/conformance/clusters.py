"""Findings grouped by root cause: the non-pass cases of a sweep clustered by
kernel, kind and signature (for a mismatch what differs and its verdict against a
higher-precision reference: wrong, precision loss, within ATen's error; the guard
that refused; or the message with numbers and dtype names taken out), and
layout. The dtypes a root cause shows up in are an attribute of its finding,
not part of its key. Each cluster is shrunk to its smallest failing input, given
one standalone reproducer and a one-line summary fit for an upstream bug report
(its figures those of the input it shows).

``group(cases)`` only groups (cheap, no kernel runs); ``build(report, ...)``
groups, finds each cluster's inputs again (the case with the fewest elements,
rerun without kernels), shrinks them (in a forked child: see shrink.py) and
writes the reproducers. ``headline(report, clusters)``: "N kernels checked, M
distinct findings (a wrong results, b precision losses, ...)". Imports the
conformance runner, shrink and reproducer.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .gating import AGAINST_ATEN, CATEGORIES, KINDS, MEMORY, classify
from .outcome import CORRUPTED, EXITED, HUNG, Outcome, death_in_words, outcome_of
from .values import WRONG, clip

#: KINDS (the kinds of finding, case statuses) and CATEGORIES (what reports count and
#: list findings by) are etops.conformance.gating's
#: how the headline words a count of one category: (one, several)
_WORDS = {"wrong": ("wrong result", "wrong results"), "precision loss": ("precision loss", "precision losses"),
          "precision regression": ("precision regression", "precision regressions")}

_DTYPE_CLASSES = {
    "bool": "bool",
    "float16": "half", "bfloat16": "half",
    "float32": "float", "float64": "float",
    "complex32": "complex", "complex64": "complex", "complex128": "complex",
}
_DTYPE_WORDS = re.compile(r"\b(?:torch\.)?(?:b?float\d+|u?int\d+|complex\d+|bool|Half|BFloat16|Float|Double|Long|Int|Short|Char|Byte|Bool|"
                          r"ComplexFloat|ComplexDouble|ComplexHalf|UInt\d+)\b")
_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_WHERE = re.compile(r" \[[\w.]+\.py:\d+\]$")


def dtype_class(dtype: str) -> str:
    """bool, half (float16, bfloat16), float (float32, float64), complex or int."""
    return _DTYPE_CLASSES.get(dtype, "int" if "int" in dtype else dtype)


def normalized_message(text: str) -> str:
    """A message with what varies between cases of one cause taken out: numbers
    (sizes, indices, values, error codes) become N, dtype names DTYPE, the
    etops source line it came from goes."""
    text = _WHERE.sub("", (text or "").strip())
    text = _DTYPE_WORDS.sub("DTYPE", text)
    text = _NUMBERS.sub("N", text)
    return " ".join(text.split())[:240]


#: a mismatch's structural difference (Outcome.what), in a signature's words
_STRUCTURE = {"count": "another number of outputs", "shape": "another shape", "dtype": "another dtype",
              "type": "not a tensor"}


def _mismatch_signature(outcome: Outcome) -> str:
    """What differs (count, shape, dtype, type, non-finite values) or, for values,
    the verdict against the higher-precision reference (and why a wrong result is
    wrong), the differing output first when there are several."""
    where = f"output {outcome.output}: " if outcome.output is not None else ""
    if outcome.what in _STRUCTURE:
        return where + _STRUCTURE[outcome.what]
    if outcome.abs_error == float("inf"):
        return f"{where}values differ: non-finite where ATen's are finite"
    return f"{where}values differ: {classify(outcome)}" + (f" ({outcome.reason})" if outcome.reason else "")


def _structural(outcome: Outcome) -> bool:
    """Whether a mismatch differs in structure or in finiteness (no verdict on its values)."""
    return outcome.what in _STRUCTURE or outcome.abs_error == float("inf")


def verdict_of(case) -> str:
    """A mismatch's verdict (values.VERDICTS; a record without one is wrong): classify's."""
    return classify(dataclasses.replace(outcome_of(case), status="mismatch"))


def _crash_cause(outcome: Outcome) -> tuple:
    """The signal that ended the call (etops' canaries for a write they caught), else
    how its process ended (hung, an exit status, a corruption by an earlier call)."""
    if outcome.ended == CORRUPTED:  # a cause of its own, whatever then ended its process
        return (CORRUPTED, outcome.signal or outcome.error)
    return (outcome.signal or outcome.ended, outcome.error if outcome.ended == EXITED else None)


_ABORT_PREFIX = re.compile(r"^ExecuTorch kernel \S+ aborted: ")


def cause(case) -> tuple:
    """What one cause's cases share beyond kernel, kind and dtype class, from their
    Outcomes alone: a mismatch's difference and verdict, a crash's signal, an abort's
    or a refusal's error, check site and the inner check that failed first (two
    causes an outer check reports at one line are two), a guard's rule, an error's exception type and
    where it was raised."""
    outcome = outcome_of(case)
    if case.status == "mismatch":
        return (_mismatch_signature(outcome),)
    if case.status == "crash":
        return _crash_cause(outcome)
    if case.status == "hang":  # one cause: the kernel does not return (the limits of its cases differ)
        return ()
    if case.status == "guarded" and outcome.rule:
        return (outcome.rule,)
    return (outcome.error, outcome.site, outcome.origin, outcome.argument, outcome.reason)


def signature(case) -> str:
    """A cause in words (what reports show): a mismatch's difference, a crash's
    signal, a guard's rule; an abort's check and a refusal's or an error's message
    with numbers and dtype names taken out (for people: ``cause`` groups them)."""
    outcome = outcome_of(case)
    if case.status == "mismatch":
        return _mismatch_signature(outcome)
    if case.status == "crash" and outcome.ended == CORRUPTED:
        return f"{CORRUPTED}: {death_in_words(outcome)}"
    if case.status == "crash" and outcome.signal and outcome.signal != "canary":
        return outcome.signal
    if case.status == "crash" and outcome.ended == HUNG:
        return "hung"
    if case.status == "crash":
        return normalized_message(case.message)[:80]
    if case.status == "abort":
        return normalized_message(_ABORT_PREFIX.sub("", case.message or ""))
    if case.status == "hang":
        return "does not return"
    if case.status == "guarded" and outcome.rule:
        return outcome.rule
    return normalized_message(case.message)


def cluster_key(case, layout: str | None = None) -> tuple:
    """(kernel, kind, cause, layout): cases sharing it are one finding, one root
    cause, whatever their dtypes and messages."""
    return (case.kernel, case.status, cause(case), layout)


_INPUT_DTYPE = re.compile(r"Tensor\[[\d, ]*\]:(\w+)|tensor\((?:\([^()]*\)|[^,()]*), (\w+)\)")


def input_dtypes(case) -> list:
    """The dtypes of the tensors among a case's inputs (its description), the
    case's task dtype when it shows none."""
    found = {a or b for a, b in _INPUT_DTYPE.findall(getattr(case, "inputs", "") or "")}
    return sorted(found) or [case.dtype]


def _elements(inputs: str) -> int:
    """Elements of the tensors a case's input description lists (its size)."""
    total = 0
    for dims in re.findall(r"Tensor\[([\d, ]*)\]", inputs or ""):
        n = 1
        for d in dims.split(","):
            if d.strip():
                n *= int(d)
        total += n
    return total + (inputs or "").count("tensor(")


@dataclass
class Cluster:
    """One distinct finding (one root cause): its key's parts, the recorded cases
    that share it (the representative first: the one with the fewest elements),
    and once built the smallest input found, the figures of that input (message,
    errors, verdict), the reproducer and the summary."""

    kernel: str
    kind: str
    signature: str
    layout: str | None = None
    cases: list = field(default_factory=list)
    inputs: str = ""  #: the smallest failing input found (described)
    shrink: str = "not tried"  #: shrunk / unchanged / search died / inputs not found / not tried
    reproducer: str | None = None
    summary: str = ""
    #: the representative's result on `inputs` (its case until built: rechecked then)
    example: Any = None
    #: what the cases share (``cause``); None: a cluster read back from a report (its signature stands for it)
    cause: tuple | None = None

    @property
    def key(self) -> tuple:
        return (self.kernel, self.kind, self.signature if self.cause is None else self.cause, self.layout)

    @property
    def category(self) -> str:
        """The kind, a mismatch's verdict in its place (CATEGORIES): classify's."""
        return self.kind_against(AGAINST_ATEN)

    def kind_against(self, comparison: str) -> str:
        """classify() of the cluster judged against `comparison` (gating.COMPARISONS):
        its representative's kind; against a base, MEMORY when any case's crash is
        placed in an argument's memory."""
        if self.kind == "crash" and any(classify(outcome_of(c), comparison) == MEMORY
                                        for c in [self.example, *self.cases] if c is not None):
            return MEMORY
        case = self.example or (self.cases[0] if self.cases else None)
        if case is None:
            return self.kind
        return classify(dataclasses.replace(outcome_of(case), status=self.kind), comparison)

    @property
    def dtypes(self) -> list:
        """The dtypes of the inputs the cases saw (not the OpInfo variant's)."""
        return sorted({d for c in self.cases for d in input_dtypes(c)})

    @property
    def dtype_classes(self) -> list:
        return sorted({dtype_class(d) for d in self.dtypes})

    @property
    def opinfos(self) -> list:
        return sorted({c.opinfo for c in self.cases})

    def to_json(self) -> dict:
        ex = self.example
        return {"kernel": self.kernel, "kind": self.kind, "category": self.category, "signature": self.signature,
                "layout": self.layout, "summary": self.summary, "cases": len(self.cases), "dtypes": self.dtypes,
                "dtype_classes": self.dtype_classes, "opinfos": self.opinfos, "inputs": self.inputs, "shrink": self.shrink,
                "reproducer": self.reproducer, "message": getattr(ex, "message", None),
                "max_abs_error": getattr(ex, "max_abs_error", None), "max_rel_error": getattr(ex, "max_rel_error", None),
                "verdict": getattr(ex, "verdict", None), "reference_error": getattr(ex, "reference_error", None),
                "aten_reference_error": getattr(ex, "aten_reference_error", None),
                "limit_seconds": getattr(ex, "limit_seconds", None),
                "example": self.cases[0].id if self.cases else None}


def group(cases, layout: str | None = None) -> list[Cluster]:
    """The non-pass cases grouped by ``cluster_key``; clusters worst category
    first, then by kernel; every cluster gets its summary from its representative."""
    clusters: dict = {}
    for case in cases:
        if case.status not in KINDS:
            continue
        key = cluster_key(case, layout)
        cluster = clusters.get(key)
        if cluster is None:
            cluster = clusters[key] = Cluster(case.kernel, case.status, "", layout, cause=key[2])
        cluster.cases.append(case)
    for cluster in clusters.values():
        cluster.cases.sort(key=lambda c: (_elements(c.inputs), c.opinfo, c.dtype, c.sample, c.call))
        cluster.signature = signature(cluster.cases[0])
        cluster.example = cluster.cases[0]
        cluster.inputs = cluster.cases[0].inputs
        cluster.summary = summary(cluster)
    return sorted(clusters.values(), key=lambda c: (CATEGORIES.index(c.category), c.kernel, c.signature))


def _short(kernel: str) -> str:
    return kernel.split("::", 1)[-1]


def _message(case) -> str:
    return clip(" ".join(_WHERE.sub("", (case.message if case is not None else "").strip()).split()), 400)


def _dtypes_phrase(cluster: Cluster) -> str:
    return "/".join(cluster.dtypes) if len(cluster.dtypes) <= 4 else "/".join(cluster.dtype_classes)


def summary(cluster: Cluster) -> str:
    """One line fit for an upstream report: what the kernel does wrong, on which
    inputs (the dtypes the cause shows up in), and the smallest input found, with
    the figures of that input."""
    op, dts = _short(cluster.kernel), _dtypes_phrase(cluster)
    where = f" with {cluster.layout} inputs" if cluster.layout else ""
    if cluster.layout and cluster.layout.startswith("numerics:"):
        where = f" transformed by the numerics axis ({cluster.layout.split(':', 1)[1]})"
    example = cluster.example if cluster.example is not None else (cluster.cases[0] if cluster.cases else None)
    if cluster.kind == "mismatch":
        errs = ""
        if example is not None and example.max_abs_error is not None:
            errs = f" (max abs err {example.max_abs_error:.3g}, rel {example.max_rel_error:.3g}"
            if getattr(example, "ulps", None) is not None:
                against = "a longdouble reference" if example.reference == "longdouble" else "ATen's float64 result"
                errs += (f"; against {against} ExecuTorch's error {example.ulps:.3g} ulps, "
                         f"ATen's {example.aten_ulps:.3g}")
            elif getattr(example, "reference_error", None) is not None:
                errs += (f"; against a float64 reference ExecuTorch's error {example.reference_error:.3g}, "
                         f"ATen's {example.aten_reference_error:.3g}")
            errs += ")"
        what = {WRONG: "computes wrong values", "precision loss": "loses precision (within the dtype's tolerance)",
                "precision regression": "is less precise than the base and ATen",
                "within ATen's error": "differs from ATen within ATen's own error"}
        doing = what.get(cluster.category, "disagrees with ATen")
        reason = getattr(example, "reason", None)
        if cluster.category == WRONG and reason:
            doing = f"is wrong ({reason})"
        elif cluster.category == WRONG and example is not None and _structural(outcome_of(example)):
            doing = "disagrees with ATen"
        text = f"{op} {doing} on {dts} inputs{where}: {cluster.signature}{errs}"
    elif cluster.kind == "crash":
        text = f"{op} crashes ({cluster.signature}) on {dts} inputs{where}"
    elif cluster.kind == "hang":
        seconds = getattr(example, "limit_seconds", None)
        text = f"{op} does not return" + (f" within {seconds:.3g} s" if seconds is not None else "") + f" on {dts} inputs{where}"
    elif cluster.kind == "abort":
        check = _ABORT_PREFIX.sub("", _message(example))
        text = f"{op} aborts (ET_CHECK) on {dts} inputs{where}: {check}"
        workaround = example.rule if example is not None else None
        if workaround:
            text += f" ({workaround.split(' (', 1)[0]})"
    elif cluster.kind == "guarded":  # what was seen: the guard refused these inputs (not every input of these dtypes)
        guard, _, finding = cluster.signature.partition("; finding: ")
        said = re.sub(r"^\w+Error: \S+: ", "", _message(example))  # the guard's own words: the condition it refused
        text = f"etops refuses {op} on {dts} inputs{where} (guard {guard.split('(', 1)[0]}): {said}" + (f" (known: {finding})" if finding else "")
    elif cluster.kind == "unsupported":
        text = f"{op} refuses {dts} inputs{where} that ATen accepts: {_message(example)}"
    else:
        text = f"etops cannot call {op} on {dts} inputs{where}: {_message(example)}"
    return f"{text}; smallest input: {cluster.inputs}" if cluster.inputs else text


def counts_by_category(clusters) -> dict:
    """category -> number of findings, every category of CATEGORIES."""
    return {k: sum(1 for c in clusters if c.category == k) for k in CATEGORIES}


def findings_in_words(clusters) -> str:
    """'a crash, b wrong results, c precision losses, ...' of `clusters` (by
    category, the empty ones left out); '' for none."""
    counts = counts_by_category(clusters)
    return ", ".join(f"{n} {_WORDS.get(k, (k, k))[n > 1]}" for k, n in counts.items() if n)


def headline(report, clusters) -> str:
    """'N kernels checked, M distinct findings (a crash, b wrong results, c
    precision losses, ...)': one finding per root cause; then how many passing
    cases' kernels logged an error, when any did."""
    reached = report.coverage()["reached"]
    by_kind = findings_in_words(clusters)
    logged = len(getattr(report, "logged", ()))
    return (f"{reached} kernels checked, {len(clusters)} distinct findings" + (f" ({by_kind})" if by_kind else "")
            + (f"; {logged} passing case{'s' if logged > 1 else ''} whose kernel logged an error" if logged else ""))


# ---- building: inputs found again, shrunk, reproduced ---------------------------


def _selected_for_capture(report, kmap):
    return None if len(report.selected) == len(kmap.registered) else report.selected


def build(report, *, report_dir=None, hooks=None, layout: str | None = None, preserve: bool = False,
          shrink: bool = True, cases=None, first: int = 0, sources=None) -> list[Cluster]:
    """The clusters of `report` (or of `cases`), each with its inputs found again
    (the representative case rerun without kernels), shrunk while the same key
    still fails (under `hooks`, the sweep's, e.g. a dim-order layout) and its
    literal reproducer written to REPORT_DIR/findings/ (`preserve`: the kernel
    call runs under etops.layout("preserve"); `first`: the number of the first
    reproducer's file name, for a second build into the same folder; `sources`: the
    task sources the cases came from, the runner's SOURCES when None)."""
    from .runner import default_kmap

    clusters = group(report.details if cases is None else cases, layout)
    if report_dir is None:
        return clusters
    kmap = default_kmap()
    selected = _selected_for_capture(report, kmap)
    directory = Path(report_dir) / "findings"
    for index, cluster in enumerate(clusters):
        case = cluster.cases[0]
        found = smallest_call(cluster, kmap=kmap, selected=selected, hooks=hooks, shrink=shrink, sources=sources)
        if found is None:
            continue
        func, args, kwargs = found
        try:
            _reproduce(cluster, case, func, args, kwargs, hooks, preserve, directory, first + index)
        except Exception as exc:  # noqa: BLE001 - one cluster's failure does not end the report
            cluster.summary += f" (no reproducer: {type(exc).__name__}: {clip(str(exc), 120)})"
    return clusters


def smallest_call(cluster, *, kmap=None, selected=None, hooks=None, shrink: bool = True, sources=None):
    """(ATen overload, args, kwargs) of `cluster`'s representative case: its task
    rerun without kernels to find its inputs again, then (`shrink`) shrunk while
    the cluster's key still fails under `hooks`; None when the inputs are not
    found. Sets ``cluster.shrink`` to how it went and, for a mismatch, its
    example to the representative checked again on these inputs (its figures). `selected`: the kernels the
    sweep selected (None: every registered one)."""
    from .opinfos import dtype_from_name
    from .runner import capture, default_kmap

    case = cluster.cases[0]
    try:
        found = capture(kmap or default_kmap(), selected, case.opinfo, dtype_from_name(case.dtype), case.sample, case.call,
                        **({} if sources is None else {"sources": sources}))
    except Exception as exc:  # noqa: BLE001
        found, cluster.shrink = None, f"inputs not found ({type(exc).__name__})"
    if found is None:
        cluster.shrink = "inputs not found" if cluster.shrink == "not tried" else cluster.shrink
        return None
    func, _target, args, kwargs = found
    if shrink and cluster.kind != "hang":  # a hang's inputs are never called here: the call would not return
        try:
            args, kwargs, cluster.shrink = _shrunk(cluster, case, func, args, kwargs, hooks)
        except Exception as exc:  # noqa: BLE001 - the cluster keeps its recorded inputs
            cluster.shrink = f"not shrunk ({type(exc).__name__}: {clip(str(exc), 80)})"
    if cluster.kind == "hang":
        cluster.shrink = "not tried (the call does not return)"
    if cluster.kind == "mismatch":  # the figures reported are those of the input shown
        _refigure(cluster, case, func, args, kwargs, hooks)
    return func, args, kwargs


def _checker(case, hooks):
    """A TaskRunner able to check one case again (its tolerance, the sweep's hooks;
    crash clusters call the kernel guarded, so a crash is an answer, not an end)."""
    from .hooks import with_guard
    from .runner import TaskRunner, default_kmap

    runner = TaskRunner(default_kmap(), None, hooks=with_guard(hooks) if case.status == "crash" else hooks)
    runner.atol, runner.rtol = case.atol, case.rtol
    return runner


def _recheck(runner, case, func, args, kwargs):
    from .case import CaseInfo
    from .values import exact_clone

    info = CaseInfo(case.kernel, case.aten_op, case.opinfo, case.dtype, case.sample, case.call)
    if hasattr(runner.hooks, "transform"):  # the numerics axis: the same transform as the sweep's
        args, kwargs, expected = runner.hooks.transform(info, func, args, kwargs)
        return runner.check(info, func, case.kernel, exact_clone(args), exact_clone(kwargs), expected)
    expected = func(*exact_clone(args), **exact_clone(kwargs))
    return runner.check(info, func, case.kernel, exact_clone(args), exact_clone(kwargs), expected)


def _refigure(cluster, case, func, args, kwargs, hooks) -> None:
    """The cluster's example becomes its representative checked again on these
    inputs (its message, errors and verdict), when that still fails the same way."""
    try:
        result = _recheck(_checker(case, hooks), case, func, args, kwargs)
    except Exception:  # noqa: BLE001 - the recorded case's figures stay
        return
    if cluster_key(result, cluster.layout) == cluster.key:
        cluster.example = result


def _shrunk(cluster, case, func, args, kwargs, hooks):
    from .shrink import shrink_isolated

    runner = _checker(case, hooks)
    key = cluster.key

    def still_fails(a, k) -> bool:
        try:
            result = _recheck(runner, case, func, a, k)
        except Exception:  # noqa: BLE001
            return False
        if key[1] == "crash" and result.status == "crash":
            return True  # a guarded crash words the signal as the worker's death does not always
        return cluster_key(result, cluster.layout) == key

    args, kwargs, _tries, how = shrink_isolated(func, args, kwargs, still_fails)
    return args, kwargs, how


def _reproduce(cluster, case, func, args, kwargs, hooks, preserve, directory, index) -> None:
    from .hooks import load_hooks
    from .reproducer import write_literal_reproducer
    from .case import CaseInfo, describe_call
    from .values import exact_clone, values_compared

    loaded = load_hooks(hooks)
    shown_args, shown_kwargs = list(args), dict(kwargs)
    if loaded is not None and hasattr(loaded, "inputs"):  # the reproducer shows the tensors as the kernel got them
        info = CaseInfo(case.kernel, case.aten_op, case.opinfo, case.dtype, case.sample, case.call)
        shown_args, shown_kwargs = loaded.inputs(info, shown_args, shown_kwargs)
    if loaded is not None and hasattr(loaded, "values"):  # the numerics axis: ATen and the kernel on the new values
        shown_args, shown_kwargs = args, kwargs = loaded.values(shown_args, shown_kwargs)
    cluster.inputs = describe_call(shown_args, shown_kwargs)
    cluster.summary = summary(cluster)
    reference = None
    if loaded is not None and hasattr(loaded, "reference"):  # a test hook's reference, as the sweep compared with
        info = CaseInfo(case.kernel, case.aten_op, case.opinfo, case.dtype, case.sample, case.call)
        expected = func(*exact_clone(args), **exact_clone(kwargs))
        replaced = loaded.reference(info, expected)
        reference = replaced if replaced is not expected else None
    slug = re.sub(r"[^a-z]+", "_", cluster.category.lower())
    name = f"{index:03d}_{slug}__{cluster.kernel.split('::', 1)[-1]}" + (f"__{cluster.layout}" if cluster.layout else "")
    try:
        cluster.reproducer = write_literal_reproducer(directory, name, case, func, shown_args, shown_kwargs, summary=cluster.summary,
                                                      values=values_compared(func), preserve=preserve, reference=reference,
                                                      guarded=cluster.kind == "crash",
                                                      base_ulps=getattr(case, "base_ulps", None),
                                                      limit_seconds=case.limit_seconds if case.status == "hang" else None)
    except Exception as exc:  # noqa: BLE001
        cluster.summary += f" (no reproducer: {type(exc).__name__}: {clip(str(exc), 120)})"
