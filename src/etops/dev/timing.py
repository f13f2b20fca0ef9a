"""Timing of the edit against the base: for each operator, at three sizes (small,
medium, large), the two kernels timed interleaved, round-robin, on one thread
unless asked (``etops.bench.ab.time_ab``), each loop read on the thread's CPU
clock at one thread (time spent waiting for a core, on a loaded machine, left
out), on the wall clock otherwise.

The verdict per size comes from the per-round ratios edit / base (each round
times both sides, so its ratio is paired) through the sign test's interval of
their median (``bench.core.median_interval``, at least 90% confident: a round
far off moves it by one rank only): "slower" or "faster" only when the whole
interval lies beyond 1 ± ``MIN_EFFECT``; "no difference" only when it lies
within 1 ± ``NO_DIFFERENCE``; otherwise "too noisy" (the rounds cannot tell:
never "slower" or "faster", never a finding); a "slower" / "faster" interval
wider than ``TELLS_SIZE`` reads as telling the side, not the size. ``max_slowdown``
R makes a slowdown whose whole interval lies beyond R a finding.

The rounds stop early (``decided``) once at least ``MIN_ROUNDS`` of them put the
interval within 1 ± NO_DIFFERENCE / 2 or beyond 1 ± 2 MIN_EFFECT; otherwise all
``repeats`` run, and while the verdict is "too noisy" more follow, up to
``MAX_ROUNDS`` and ``ROUNDS_SECONDS`` of rounds per size (``more_rounds``)."""

from __future__ import annotations

import time

from ..errors import KernelCrashed

#: (label, elements of the largest input)
SIZES = (("small", "1k"), ("medium", "64k"), ("large", "1M"))
#: "slower" / "faster" only when the whole interval of the ratio lies beyond 1 ± this
#: (two builds of one source differ by code placement alone)
MIN_EFFECT = 0.08
#: "no difference" only when the whole interval of the ratio lies within 1 ± this;
#: an interval reaching past it, not beyond 1 ± MIN_EFFECT, is "too noisy"
NO_DIFFERENCE = 0.15
#: an interval whose high end is beyond this times its low end tells which side is
#: slower, not by how much: its verdict's text says so (``verdict_text``)
TELLS_SIZE = 1.5
#: the verdicts of a timed size with a base (and "not timed" without a ratio)
VERDICTS = ("slower", "faster", "no difference", "too noisy")


def interval(ratio: dict) -> tuple[float, float, float]:
    """(low, high, confidence): the interval of the median ratio of a ratio summary
    (bench.core.ratio_summary), taken from its per-round ``samples`` when it does
    not carry one."""
    if "low" in ratio:
        return ratio["low"], ratio["high"], ratio["confidence"]
    from ..bench.core import median_interval

    return median_interval(ratio["samples"])


def verdict(ratio: dict | None) -> str:
    """One of VERDICTS for an edit / base ratio summary ("not timed" for None),
    from the interval of its median alone: beyond 1 ± MIN_EFFECT "slower" /
    "faster", within 1 ± NO_DIFFERENCE "no difference", else (or with too few
    rounds for the interval's confidence) "too noisy"."""
    from ..bench.core import CONFIDENCE

    if ratio is None:
        return "not timed"
    low, high, confidence = interval(ratio)
    if confidence < CONFIDENCE:
        return "too noisy"
    if low > 1.0 + MIN_EFFECT:
        return "slower"
    if high < 1.0 - MIN_EFFECT:
        return "faster"
    if low >= 1.0 - NO_DIFFERENCE and high <= 1.0 + NO_DIFFERENCE:
        return "no difference"
    return "too noisy"


def slowdown_finding(ratio: dict | None, max_slowdown: float | None) -> bool:
    """Whether the ratio is a finding under --max-slowdown: "slower" and the whole
    interval beyond `max_slowdown` (never when "too noisy")."""
    if max_slowdown is None or ratio is None or verdict(ratio) != "slower":
        return False
    return interval(ratio)[0] > max_slowdown


#: kept rounds before the timing may stop early (``decided``): the fewest whose
#: interval reaches 90%
MIN_ROUNDS = 5
#: rounds per size at most while the verdict is "too noisy" (``more_rounds``)
MAX_ROUNDS = 41
#: seconds of rounds per size past which a "too noisy" size takes no more rounds
ROUNDS_SECONDS = 4.0


def decided(ratio: dict | None) -> bool:
    """Whether the rounds whose edit / base ratio summary is `ratio` decide the
    verdict beyond doubt: at least MIN_ROUNDS, and the median's interval within
    1 ± NO_DIFFERENCE / 2 or beyond 1 ± 2 MIN_EFFECT on one side."""
    if ratio is None or len(ratio["samples"]) < MIN_ROUNDS:
        return False
    low, high, _ = interval(ratio)
    if 1.0 - NO_DIFFERENCE / 2 <= low and high <= 1.0 + NO_DIFFERENCE / 2:
        return True
    return low > 1.0 + 2 * MIN_EFFECT or high < 1.0 - 2 * MIN_EFFECT


def more_rounds(ratio: dict | None, rounds: int, repeats: int, seconds: float) -> bool:
    """Whether the timing of a size takes another round after `rounds` rounds that
    lasted `seconds`: until `repeats` unless ``decided``; beyond them while the
    verdict is "too noisy", up to MAX_ROUNDS and ROUNDS_SECONDS."""
    if decided(ratio):
        return False
    if rounds < repeats:
        return True
    if ratio is None or verdict(ratio) != "too noisy":
        return False
    return rounds < MAX_ROUNDS and seconds < ROUNDS_SECONDS


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
    with no OpInfo among them (references, derived and generated tasks only)
    OpInfo's database is not searched."""
    from ..conformance.generated import TASK_PREFIX as GENERATED_PREFIX
    from ..conformance.references.spec import TASK_PREFIX
    from .derived import DERIVED_PREFIX

    search = tasks is None or any(not t.startswith((TASK_PREFIX, DERIVED_PREFIX, GENERATED_PREFIX)) for t in tasks)
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


def _enough(repeats: int):
    """time_calls' ``enough`` for one size: the rounds so far take no more
    (more_rounds), their seconds counted from the first kept round."""
    from ..bench.core import paired_ratio

    started = time.perf_counter()

    def enough(samples: dict) -> bool:
        ratio = paired_ratio(samples["new"], samples["builtin"]) if "builtin" in samples else None
        return not more_rounds(ratio, len(samples["new"]), repeats, time.perf_counter() - started)

    return enough


def time_edit(kernel, base, *, dtype="float32", sizes=SIZES, repeats: int = 11, threads: int = 1,
              max_slowdown: float | None = None, tasks=None) -> list[dict]:
    """One row per size (for the LLM attention and KV-cache kernels, per model step:
    decode, prefill 128 and 512, llm_timing.model_samples, ``shape`` in the row):
    bench.ab's row (edit as ``new``, the base as ``builtin``) with ``label``, ``verdict`` (edit vs base), ``slowdown_finding`` (a slowdown
    beyond `max_slowdown` and the noise) and ``error`` when no sample works. At
    least `repeats` rounds unless decided sooner, more while too noisy
    (``more_rounds``); the CPU clock at one thread."""
    from ..bench.ab import time_ab

    from .llm_timing import model_samples

    clock = "cpu" if threads == 1 else "wall"
    rows = []
    shaped = model_samples(kernel.name, dtype)  # a model's decode and prefill steps, for the LLM kernels
    steps = [(label, str(sample.size), shape, sample) for label, shape, sample in shaped] if shaped else \
        [(label, size, None, None) for label, size in sizes]
    for label, size, shape, sample in steps:
        try:
            sample = sample if sample is not None else timing_sample(kernel, size, dtype, tasks)
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
        row = time_ab(kernel, base, sample, repeats=max(repeats, MAX_ROUNDS), threads=threads, target=TARGET,
                      aten=False, same_count=True, enough=_enough(repeats), clock=clock)
        row["label"] = label
        if shape is not None:
            row["shape"] = shape
        ratio = row.get("vs_builtin")
        row["verdict"] = verdict(ratio) if base is not None else "no base"
        row["slowdown_finding"] = slowdown_finding(ratio, max_slowdown) if base is not None else False
        rows.append(row)
    return rows


def verdict_text(row: dict) -> str:
    """The verdict of a timed row as it reads: "too noisy" with the ratio's
    interval ('too noisy: ratio 0.80-14.00x'); "slower" or "faster" with it too
    when it spans more than TELLS_SIZE ('slower: ratio 1.11-15.83x, too noisy to
    tell how much'); else the verdict."""
    ratio, said = row.get("vs_builtin"), row.get("verdict", "not timed")
    if ratio is None or said not in VERDICTS:
        return said
    low, high, _ = interval(ratio)
    if said == "too noisy":
        return f"too noisy: ratio {low:.2f}-{high:.2f}x"
    if said in ("slower", "faster") and high > TELLS_SIZE * low:
        return f"{said}: ratio {low:.2f}-{high:.2f}x, too noisy to tell how much"
    return said


def describe(row: dict) -> str:
    """'medium (float32, 65536 elements): edit ... 1.02x the base's time (93% interval
    0.98-1.05, fastest rounds 1.01x, 11 rounds): no difference'."""
    if row.get("error"):
        return f"{row['label']}: {row['error']}"
    head = f"{row['label']} ({row['dtype']}, {row['size']} elements)"
    if row.get("shape"):  # a model's step (llm_timing)
        s = row["shape"]
        head = (f"{row['label']} ({row['dtype']}, batch {s['batch']}, seq {s['seq']} from {s['start_pos']} of a {s['cache']} cache, "
                f"{s['heads']} heads over {s['kv_heads']}, dim {s['dim']})")
    edit_us = row["new"]["median"] * 1e6
    if "vs_builtin" not in row:
        why = row.get("builtin_error") or "no base kernel"
        return f"{head}: edit {edit_us:.2f} us; base not timed ({why})"
    r = row["vs_builtin"]
    low, high, confidence = interval(r)
    text = (f"{head}: edit {edit_us:.2f} us, base {row['builtin']['median'] * 1e6:.2f} us: {r['median']:.2f}x the base's time "
            f"({confidence:.0%} interval {low:.2f}-{high:.2f}, fastest rounds {r.get('of_mins') or 0:.2f}x, "
            f"{row['repeats']} rounds): {verdict_text(row)}")
    if row.get("agree_builtin") is False:
        text += "; results differ from the base's on this input"
    return text
