"""Timing of the edit against the base: for each operator, at three sizes (small,
medium, large), the two kernels (and ATen) timed interleaved, round-robin, on one
thread unless asked (``etops.bench.ab.time_ab``). The verdict per size: the
paired ratio edit / base, its interquartile range the noise; "no difference"
unless the whole range and the ratio of the two fastest rounds (``of_mins``, the
figure the machine's load disturbs least) lie beyond 1 ± ``MIN_EFFECT``;
``max_slowdown`` R makes a slowdown beyond R (and beyond the noise) a finding.

The rounds stop early (``decided``) once at least ``MIN_ROUNDS`` of them put the
whole range and the ratio of the fastest rounds clearly inside 1 ± MIN_EFFECT / 2
(no difference) or clearly beyond 1 ± 2 MIN_EFFECT (a difference): more rounds
would narrow a range that decides nothing more. Otherwise all ``repeats`` run."""

from __future__ import annotations

from ..errors import KernelCrashed

#: (label, elements of the largest input)
SIZES = (("small", "1k"), ("medium", "64k"), ("large", "1M"))
#: a ratio within 1 ± this reads "no difference" whatever its range (two builds of
#: one source differ by code placement alone)
MIN_EFFECT = 0.08


def verdict(ratio: dict | None) -> str:
    """'faster', 'slower' or 'no difference' for an edit / base ratio summary."""
    if ratio is None:
        return "not timed"
    best = ratio.get("of_mins") or ratio["median"]
    if ratio["q3"] < 1.0 - MIN_EFFECT and best < 1.0 - MIN_EFFECT:
        return "faster"
    if ratio["q1"] > 1.0 + MIN_EFFECT and best > 1.0 + MIN_EFFECT:
        return "slower"
    return "no difference"


#: kept rounds before the timing may stop early (``decided``)
MIN_ROUNDS = 5


def decided(ratio: dict | None, rounds: int) -> bool:
    """Whether `rounds` rounds whose edit / base ratio summary is `ratio` decide the
    verdict beyond doubt: at least MIN_ROUNDS, and the interquartile range and the
    ratio of the fastest rounds all within 1 ± MIN_EFFECT / 2, or all beyond
    1 ± 2 MIN_EFFECT on one side."""
    if ratio is None or rounds < MIN_ROUNDS:
        return False
    figures = (ratio["q1"], ratio["q3"], ratio.get("of_mins") or ratio["median"])
    if all(abs(f - 1.0) <= MIN_EFFECT / 2 for f in figures):
        return True
    return all(f > 1.0 + 2 * MIN_EFFECT for f in figures) or all(f < 1.0 - 2 * MIN_EFFECT for f in figures)


#: seconds each timed loop lasts (the timing has a core of its own: alongside.py). The
#: "slower" sizes unchanged files read in a sweep with these loops came from where
#: each side's out lay, which the sides now trade every round (bench.ab), not from
#: the loops' length; 10 ms loops made the round 0.3 s longer
TARGET = 0.005


#: what a kernel raises on a timing input that is a finding rather than a sample to
#: skip: a fault the call path trapped (the edit's kernel on an input larger than
#: the judge's cases)
FAULTS = (KernelCrashed,)

#: dtypes the timing falls back to, in order, for an operator with no sample at the
#: asked dtype (the bitwise operators have no float32 one); the row names the dtype
FALLBACK_DTYPES = ("int32", "int64", "bool")


def timing_sample(kernel, size: str, dtype: str, tasks=None):
    """An input of about `size` elements for the timing: at `dtype`, else at the
    first of FALLBACK_DTYPES that has one; OpInfo's sample scaled
    (etops.bench.ab.ab_sample), else one of the judge's recorded cases of the
    operator (the largest that scales: an overload only calls inside other
    OpInfos reach, such as add.Scalar_out), else the largest valid sample of the
    kernel's etops reference (etops.conformance.references: the dim-order and
    device-copy kernels, which no OpInfo reaches) scaled the same way; None when
    none works. `tasks`: the judge's task sources for the operator, when known:
    with no OpInfo among them (references and derived tasks only) OpInfo's
    database is not searched."""
    from ..conformance.references.spec import TASK_PREFIX
    from .derived import DERIVED_PREFIX

    search = tasks is None or any(not t.startswith((TASK_PREFIX, DERIVED_PREFIX)) for t in tasks)
    for candidate in (dtype, *(d for d in FALLBACK_DTYPES if d != dtype)):
        sample = _sample_at(kernel, size, candidate, search)
        if sample is not None:
            return sample
    return None


def _sample_at(kernel, size: str, dtype: str, search_opinfos: bool):
    from ..bench import inputs
    from ..bench.ab import ab_sample
    from ..bench.sampling import parse_dtype, sized
    from ..conformance.references import find

    sample = ab_sample(kernel, size, dtype, raising=FAULTS) if search_opinfos else None
    if sample is not None:
        return sample
    for case in recorded_samples(kernel, parse_dtype(dtype)):
        sample = sized(kernel, case, inputs.parse_size(size), raising=FAULTS)
        if sample is not None:
            return sample
    try:
        reference = find(kernel.name)
    except KeyError:
        return None
    if dtype not in reference.dtypes:
        return None
    found = [s for s in reference.samples(parse_dtype(dtype)) if s.valid]
    made = [inputs.Sample(kernel.name, tuple(s.args), dict(s.kwargs), f"etops reference sample of {kernel.name}, {dtype}")
            for s in found]
    made = [m for m in made if m.size > 0]
    if not made:
        return None
    return sized(kernel, max(made, key=lambda m: m.size), inputs.parse_size(size), raising=FAULTS)


#: the judge's recorded cases tried for a timing input, largest first, at most
RECORDED_TRIES = 5


def recorded_samples(kernel, dtype) -> list:
    """The judge's recorded cases of `kernel` at `dtype` (etops.dev.judge.RECORDER:
    the OpInfo calls that reached it this process) as timing Samples, copies of
    their inputs, largest first (at most RECORDED_TRIES; none with empty tensors or
    whose outs only ATen's result can size)."""
    from ..bench import inputs
    from ..conformance.case import plan_call
    from ..conformance.values import dtype_name, exact_clone
    from .judge import RECORDER

    found = []
    for (task_id, task_dtype, _kernels), recording in list(RECORDER.recordings.items()):
        if task_dtype != dtype:
            continue
        for c in recording.calls:
            if c.target != kernel.name:
                continue
            plan = plan_call(kernel, c.func, c.args, c.kwargs)
            if plan.outs_from_aten:
                continue
            sample = inputs.Sample(kernel.name, tuple(plan.args), dict(plan.kwargs),
                                   f"etops dev's case of OpInfo '{task_id}' sample {c.sample}, {dtype_name(dtype)}")
            if sample.size > 0:
                found.append(sample)
    found.sort(key=lambda s: -s.size)
    return [inputs.Sample(s.kernel, exact_clone(s.args), exact_clone(s.kwargs), s.source) for s in found[:RECORDED_TRIES]]


def time_edit(kernel, base, *, dtype="float32", sizes=SIZES, repeats: int = 11, threads: int = 1,
              max_slowdown: float | None = None, tasks=None) -> list[dict]:
    """One row per size: bench.ab's row (edit as ``new``, the base as ``builtin``)
    with ``label``, ``verdict`` (edit vs base), ``slowdown_finding`` (a slowdown
    beyond `max_slowdown` and the noise) and ``error`` when no sample works."""
    from ..bench.ab import time_ab
    from ..bench.core import paired_ratio

    def enough(samples: dict) -> bool:
        return "builtin" in samples and decided(paired_ratio(samples["new"], samples["builtin"]), len(samples["new"]))

    rows = []
    for label, size in sizes:
        try:
            sample = timing_sample(kernel, size, dtype, tasks)
        except FAULTS as exc:
            rows.append({"kernel": kernel.name, "label": label, "size": size, "crashed": True,
                         "error": f"the edit's kernel faulted on the timing input of about {size} elements: "
                                  f"{str(exc).splitlines()[0][:300]}"})
            continue
        if sample is None:
            rows.append({"kernel": kernel.name, "label": label, "size": size,
                         "error": f"no OpInfo or reference sample of about {size} elements at {dtype} "
                                  f"or {', '.join(FALLBACK_DTYPES)}"})
            continue
        row = time_ab(kernel, base, sample, repeats=repeats, threads=threads, target=TARGET, aten=False, same_count=True,
                      enough=enough)
        row["label"] = label
        ratio = row.get("vs_builtin")
        row["verdict"] = verdict(ratio) if base is not None else "no base"
        row["slowdown_finding"] = bool(max_slowdown is not None and ratio is not None and row["verdict"] == "slower"
                                       and ratio["median"] > max_slowdown and (ratio.get("of_mins") or 0) > max_slowdown)
        rows.append(row)
    return rows


def describe(row: dict) -> str:
    """'medium (float32, 65536 elements): edit ... 1.02x the base's time (IQR 0.98-1.05, fastest
    rounds 1.01x, 5 rounds): no difference'."""
    if row.get("error"):
        return f"{row['label']}: {row['error']}"
    head = f"{row['label']} ({row['dtype']}, {row['size']} elements)"
    edit_us = row["new"]["median"] * 1e6
    if "vs_builtin" not in row:
        why = row.get("builtin_error") or "no base kernel"
        return f"{head}: edit {edit_us:.2f} us; base not timed ({why})"
    r = row["vs_builtin"]
    text = (f"{head}: edit {edit_us:.2f} us, base {row['builtin']['median'] * 1e6:.2f} us: {r['median']:.2f}x the base's time "
            f"(IQR {r['q1']:.2f}-{r['q3']:.2f}, fastest rounds {r.get('of_mins') or 0:.2f}x, {row['repeats']} rounds): "
            f"{row['verdict']}")
    if row.get("agree_builtin") is False:
        text += "; results differ from the base's on this input"
    return text
