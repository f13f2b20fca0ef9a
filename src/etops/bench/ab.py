"""A/B timing: "is mine faster?" A kernel swapped in (an override) against the kernel
it replaced and against ATen, on the same inputs.

The three calls (each writing into outs of its own, sized once) are timed
round-robin, the order rotated every round (``core.time_calls``), one thread unless
asked otherwise. Each ratio (new / built-in, new / ATen) is taken within each round
and summarised by its median and interquartile range: the noise. The verdict is
"faster" or "slower" only when the whole interquartile range lies on one side of 1;
otherwise "no difference beyond the noise".
"""

from __future__ import annotations

from typing import Any

from . import core


def verdict(ratio: dict | None) -> str:
    """'faster', 'slower' or 'within noise' for a paired ratio summary (new / other)."""
    if ratio is None:
        return "not timed"
    if ratio["q3"] < 1.0:
        return "faster"
    if ratio["q1"] > 1.0:
        return "slower"
    return "within noise"


def _outs_like(kernel, outs: dict) -> dict:
    return {k: core._empty_like(v) for k, v in outs.items()} if outs else {}


def time_ab(kernel, previous, sample, *, repeats: int = 11, warmup: int = 2, target: float = 0.005,
            threads: int | None = 1, aten: bool = True, same_count: bool = False, enough=None,
            clock: str = "wall") -> dict:
    """Times `kernel` (the operator's kernel object, the new kernel installed),
    `previous` (a callable kernel: the one it replaced; None for a new operator) and
    ATen on `sample`. Returns the row: seconds per call of each side, the paired
    ratios with their quartiles, whether the results agree, the verdicts, and the
    thread count used. ``aten=False``: ATen is not timed (its result still checked);
    ``same_count``: every side looped as many times; ``enough(samples)``: the
    rounds so far decide it, no more are run (core.time_calls); ``clock``: "wall"
    or "cpu", the clock the loops read (core.CLOCKS), named in the row."""
    core.clock_of(clock)
    row: dict[str, Any] = {"kernel": kernel.name, "size": sample.size, "shapes": sample.shapes(),
                           "dtype": str(sample.dtype).replace("torch.", "") if sample.dtype is not None else "-",
                           "input": sample.source, "threads": threads, "clock": clock, "error": None}
    with core.thread_counts(threads) as used:
        row["threads"] = used["torch"]
        try:
            pair = core.Pair(kernel, sample)
        except Exception as exc:  # noqa: BLE001 - recorded, not raised
            row["error"] = str(exc)
            return row
        calls: dict[str, Any] = {"new": pair.et_call, "aten": pair.aten_call} if aten else {"new": pair.et_call}
        row["agree_aten"] = pair.agree
        if previous is not None:
            outs = _outs_like(kernel, pair.et_outs)
            call = (previous, sample.args, {**sample.kwargs, **outs})
            try:
                previous(*call[1], **call[2])
                row["agree_builtin"] = all(core._agree(pair.et_outs[k], outs[k]) for k in outs)
                if outs:
                    # the two kernels trade their outs call by call: where an out lies
                    # (a 4k alias with an input) weighs on both alike, never on one
                    # (an unchanged copy kernel read 0.91x and 1.07x by placement alone)
                    traded = (kernel, sample.args, {**sample.kwargs, **outs})
                    calls["new"] = [pair.et_call, traded]
                    calls["builtin"] = [call, (previous, sample.args, {**sample.kwargs, **pair.et_outs})]
                else:
                    calls["builtin"] = call
            except Exception as exc:  # noqa: BLE001
                row["builtin_error"] = core._one_line(exc)
        samples, counts = core.time_calls(calls, repeats=repeats, warmup=warmup, target=target, same_count=same_count,
                                          enough=enough, clock=clock)
    for name, values in samples.items():
        row[name] = core._summary(values)
    row["calls_per_loop"] = counts
    if "aten" in samples:
        row["vs_aten"] = core.paired_ratio(samples["new"], samples["aten"])
        row["verdict_aten"] = verdict(row["vs_aten"])
    if "builtin" in samples:
        row["vs_builtin"] = core.paired_ratio(samples["new"], samples["builtin"])
        row["verdict_builtin"] = verdict(row["vs_builtin"])
    row["repeats"], row["warmup"] = len(samples["new"]), warmup
    return row


def describe_ratio(ratio: dict | None, verdict_text: str, other: str) -> str:
    """'0.82x (0.79-0.85) of built-in: faster' - the median ratio, its quartiles."""
    if ratio is None:
        return f"vs {other}: not timed"
    return f"{ratio['median']:.2f}x {other}'s time (IQR {ratio['q1']:.2f}-{ratio['q3']:.2f}): {verdict_text}"


def ab_sample(kernel, size: str | int | None = "64k", dtype="float32", raising: tuple = ()):
    """An input for A/B timing: OpInfo's sample for the operator at `dtype`, scaled
    to about `size` elements (None when no sample works; the kernel's exceptions
    of the classes in `raising` are raised: sampling.sized)."""
    from . import inputs
    from .sampling import base_sample, parse_dtype, sized

    base = base_sample(kernel, parse_dtype(dtype) if dtype is not None else None)
    if base is None:
        return None
    n = inputs.parse_size(str(size)) if isinstance(size, str) else size
    return sized(kernel, base, n, raising=raising)
