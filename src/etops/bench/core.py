"""The timing harness: one kernel on one input, the ExecuTorch kernel (through etops)
against the ATen out variant of the same op, interleaved.

Per measurement: both sides are called once (ExecuTorch allocating its outs, ATen
writing into outs of the same shapes), their results compared, and a zero-element
version of the input found that both accept. Then four loops (etops, ATen, and
their zero-size calls) are timed round-robin, the order rotated every round:
``warmup`` rounds thrown away, ``repeats`` rounds kept. Each loop makes enough
calls to last ``target`` seconds. Reported per side: min and median seconds per
call; the zero-size call's median is the per-call overhead and
``median(call - zero-size call)`` the kernel time. Ratios are ExecuTorch / ATen,
taken within each round (neighbouring loops share the machine's state) and
summarised by their median and interquartile range (the noise), and by the
sign test's confidence interval of their median (``median_interval``).

The clock is the wall clock unless a caller asks for ``clock="cpu"``: the
calling thread's CPU time, which leaves out the time the thread waits for a core
(another process running on it); only one thread's work counts, so it suits
one-thread timings only.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import statistics
import time
import warnings
from typing import Any, Callable

import torch

from .. import _logs
from ..compare import BENCH, diff

from . import inputs as _inputs
from . import threads as _threads


def _summary(samples: list[float]) -> dict:
    s = sorted(samples)
    if len(s) >= 4:
        q = statistics.quantiles(s, n=4)
        q1, q3 = q[0], q[2]
    else:
        q1, q3 = s[0], s[-1]
    return {"min": s[0], "median": statistics.median(s), "q1": q1, "q3": q3, "samples": samples}


#: the clocks a timing may read (nanoseconds): the wall clock, or the calling
#: thread's CPU time (time spent waiting for a core left out)
CLOCKS = {"wall": time.perf_counter_ns, "cpu": time.thread_time_ns}


def clock_of(name: str):
    """The nanosecond clock called `name` in CLOCKS; ValueError naming `clock` otherwise."""
    try:
        return CLOCKS[name]
    except (KeyError, TypeError):
        raise ValueError(f"clock must be one of {', '.join(CLOCKS)}, got {name!r}") from None


def _loop(fn, args, kwargs, n: int, clock=time.perf_counter_ns) -> float:
    repeat = itertools.repeat(None, n)
    t0 = clock()
    for _ in repeat:
        fn(*args, **kwargs)
    return (clock() - t0) / 1e9 / n


def _loop_in_turn(calls: list, n: int, clock=time.perf_counter_ns) -> float:
    """Seconds per call of `n` calls, `calls` ((fn, args, kwargs) each) in turn."""
    turns = itertools.islice(itertools.cycle(calls), n)
    t0 = clock()
    for fn, args, kwargs in turns:
        fn(*args, **kwargs)
    return (clock() - t0) / 1e9 / n


def _outs_of(kernel, result) -> dict:
    names = kernel.out_names()
    if len(names) == 1:
        return {names[0]: result}
    return dict(zip(names, result))


def _empty_like(value):
    if isinstance(value, torch.Tensor):
        return torch.empty_like(value)
    if isinstance(value, (list, tuple)):
        return [_empty_like(v) for v in value]
    return value


def _agree(a, b) -> bool:
    """True when `a` matches `b` by etops.compare's loose ``bench`` policy."""
    return diff(a, b, BENCH).ok


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _draining(fn, name: str):
    """`fn` (torch's implementation of operator `name` outside ATen, which may be a
    wrapper running ExecuTorch's kernel outside etops, as the LLM library's are)
    followed by taking what ExecuTorch logged meanwhile as its own (``_logs.drain_as``:
    DEBUG, never counted), so it is never logged as the next ExecuTorch call's error."""
    source = f"torch's {name}"

    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        finally:
            _logs.drain_as(source)

    return call


class Pair:
    """The ExecuTorch and ATen calls of one kernel on one input, ready to time."""

    def __init__(self, kernel, sample: _inputs.Sample) -> None:
        from ..schemas import torch_overload

        self.kernel = kernel
        self.sample = sample
        self.aten = torch_overload(kernel.name)
        if self.aten is None:
            raise LookupError(f"torch has no {kernel.name} to compare with")
        if not kernel.name.startswith("aten::"):
            self.aten = _draining(self.aten, kernel.name)
        args, kwargs = sample.args, dict(sample.kwargs)
        try:
            result = kernel(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            raise RuntimeError(f"ExecuTorch: {_one_line(exc)}") from exc
        if not kernel.out_names():  # no outs (aten::_local_scalar_dense): compare what they return
            self.et_outs, self.aten_outs = {}, {}
            try:
                expected = self.aten(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001
                raise RuntimeError(f"ATen: {_one_line(exc)}") from exc
            self.agree = _agree(result, expected)
        else:
            self.et_outs = _outs_of(kernel, result)
            self.aten_outs = {k: _empty_like(v) for k, v in self.et_outs.items()}
            try:
                self.aten(*args, **kwargs, **self.aten_outs)
            except Exception as exc:  # noqa: BLE001
                raise RuntimeError(f"ATen: {_one_line(exc)}") from exc
            self.agree = all(_agree(self.et_outs[k], self.aten_outs[k]) for k in self.et_outs)
        self.et_call = (kernel, args, {**kwargs, **self.et_outs})
        self.aten_call = (self.aten, args, {**kwargs, **self.aten_outs})

    @classmethod
    def try_make(cls, kernel, sample, raising: tuple = ()):
        """The Pair, or None when either side refuses the sample; the kernel's
        exceptions of the classes in `raising` (etops.KernelCrashed for ``etops
        dev``'s timing: a fault is a finding, not a sample to skip) are raised."""
        try:
            return cls(kernel, sample)
        except Exception as exc:  # noqa: BLE001
            if raising and isinstance(exc.__cause__, raising):
                raise exc.__cause__ from None
            return None


def zero_pair(kernel, sample: _inputs.Sample) -> Pair | None:
    for candidate in _inputs.zero_size(sample):
        if any(t.numel() for t in candidate.tensors() if t.dim() > 0) or not any(t.dim() > 0 for t in candidate.tensors()):
            continue
        pair = Pair.try_make(kernel, candidate)
        if pair is not None:
            return pair
    return None


#: The thread count of both sides unless a benchmark is told otherwise: one.
#: ExecuTorch's kernels mostly ignore its threadpool while ATen's spread over its
#: intra-op threads, which on a shared machine thrash or win by turns: with more
#: than one thread a verdict can flip from run to run.
DEFAULT_THREADS = 1


@contextlib.contextmanager
def thread_counts(n: int | None):
    """torch's intra-op threads and ExecuTorch's pool both set to `n` (default:
    DEFAULT_THREADS, one) for the duration; yields {"torch": .., "executorch": ..}."""
    torch_before = torch.get_num_threads()
    et_before = _threads.get_num_threads()
    n = DEFAULT_THREADS if n is None else int(n)
    if n != torch_before:
        torch.set_num_threads(n)
    if n != et_before:
        _threads.set_num_threads(n)
    try:
        yield {"torch": torch.get_num_threads(), "executorch": _threads.get_num_threads()}
    finally:
        if torch.get_num_threads() != torch_before:
            torch.set_num_threads(torch_before)
        if _threads.get_num_threads() != et_before:
            _threads.set_num_threads(et_before)


def _calibrate(call, target: float, clock=time.perf_counter_ns) -> int:
    fn, args, kwargs = call
    fn(*args, **kwargs)
    t = _loop(fn, args, kwargs, 1, clock)
    if t < target / 10:
        t = _loop(fn, args, kwargs, max(1, int(target / 10 / max(t, 1e-9))), clock)
    return max(1, min(1_000_000, int(target / max(t, 1e-9))))


def time_calls(calls: dict, repeats: int = 11, warmup: int = 2, target: float = 0.005,
               same_count: bool = False, enough: Callable[[dict], bool] | None = None,
               clock: str = "wall") -> tuple[dict, dict]:
    """Times named calls ``{name: (fn, args, kwargs)}`` round-robin, the order
    rotated every round: ``warmup`` rounds thrown away, then ``repeats`` kept, each
    loop calibrated to last about ``target`` seconds (``same_count``: every call
    looped as many times as the slowest's calibration allows, so that two versions
    of one kernel run loops of one length: a machine that throttles long bursts, a
    CPU quota, then slows both alike). A name may give a list of calls instead: its
    loop runs them in turn, call by call (two kernels trading their outs, so that
    where each out lies in memory weighs on both alike within every round). ``enough(samples)``, asked
    after each kept round, ends the timing early when it says the rounds so far
    decide it. ``clock``: "wall" or "cpu" (CLOCKS; the loops and their calibration
    read it). Returns ({name: [seconds per call, one per kept round]}, {name: calls
    per loop})."""
    read = clock_of(clock)
    variants = {k: list(c) if isinstance(c, list) else [c] for k, c in calls.items()}
    samples: dict[str, list[float]] = {k: [] for k in calls}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, vs in variants.items():
            for v in vs[1:]:  # each variant called once before the timed loops
                v[0](*v[1], **v[2])
        counts = {k: _calibrate(vs[0], target, read) for k, vs in variants.items()}
        if same_count:  # each side's fastest of three calibrations (a busy moment would shorten the loops)
            best = {k: max(counts[k], *(_calibrate(vs[0], target, read) for _ in range(2))) for k, vs in variants.items()}
            counts = dict.fromkeys(counts, min(best.values()))
        names = list(calls)
        for r in range(warmup + repeats):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                vs = variants[name]
                if len(vs) == 1:
                    fn, args, kwargs = vs[0]
                    t = _loop(fn, args, kwargs, counts[name], read)
                else:
                    t = _loop_in_turn(vs, counts[name], read)
                if r >= warmup:
                    samples[name].append(t)
            if r >= warmup and enough is not None and enough(samples):
                break
    return samples, counts


#: the least confidence of ``median_interval``'s interval
CONFIDENCE = 0.90


def median_interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(low, high, achieved): the sign test's confidence interval of the median of
    `values`, which assumes nothing of their distribution but that they are
    independent: the k-th smallest and k-th largest value, k the largest for which
    the chance that the median lies outside, 2 P(Binomial(n, 1/2) < k), is at most
    1 - `confidence`; `achieved` is the interval's own confidence, at least
    `confidence`. Too few values for that (fewer than 5 at 90%): the whole range,
    `achieved` below `confidence`. A value beyond either end moves it by one rank
    only, however far out it lies."""
    if not values:
        raise ValueError("values: no values to take an interval of")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie between 0 and 1, got {confidence!r}")
    s, n = sorted(values), len(values)
    below = 0.0  # P(Binomial(n, 1/2) < k), k = 1, 2, ...
    k = 0
    while k < (n + 1) // 2:
        nxt = below + math.comb(n, k) / 2 ** n
        if 2 * nxt > 1 - confidence:
            break
        below, k = nxt, k + 1
    if k == 0:
        return s[0], s[-1], 1 - 2 / 2 ** n
    return s[k - 1], s[n - k], 1 - 2 * below


def ratio_summary(ratios: list[float]) -> dict:
    """Per-round ratios summarised: ``_summary``'s figures (median, quartiles, the
    ratios as ``samples``) and the median's interval (median_interval: ``low``,
    ``high``, ``confidence``)."""
    out = _summary(ratios)
    out["low"], out["high"], out["confidence"] = median_interval(ratios)
    return out


def paired_ratio(top: list[float], bottom: list[float]) -> dict | None:
    """The ratio top / bottom within each round (samples of the same round share the
    machine's state), summarised (ratio_summary: median, quartiles, the median's
    interval), plus the ratio of the mins."""
    ratios = [t / b for t, b in zip(top, bottom) if b > 0]
    if not ratios:
        return None
    out = ratio_summary(ratios)
    out["of_mins"] = min(top) / min(bottom) if min(bottom) > 0 else None
    return out


def measure(pair: Pair, zero: Pair | None, repeats: int = 11, warmup: int = 2, target: float = 0.005) -> dict:
    """Times one pair; returns the figures as a dict (seconds per call)."""
    calls = {"etops": pair.et_call, "aten": pair.aten_call}
    if zero is not None:
        calls["etops_zero"] = zero.et_call
        calls["aten_zero"] = zero.aten_call
    samples, counts = time_calls(calls, repeats=repeats, warmup=warmup, target=target)
    out: dict[str, Any] = {k: _summary(v) for k, v in samples.items()}
    out["ratio"] = paired_ratio(samples["etops"], samples["aten"])
    out["calls_per_loop"] = counts
    if zero is not None:
        et_k = [e - z for e, z in zip(samples["etops"], samples["etops_zero"])]
        at_k = [a - z for a, z in zip(samples["aten"], samples["aten_zero"])]
        out["etops_kernel"] = statistics.median(et_k)
        out["aten_kernel"] = statistics.median(at_k)
        pairs = [e / a for e, a in zip(et_k, at_k) if a > 0 and e > 0]
        # Only meaningful when both kernels take clearly longer than their call.
        ok = out["etops_kernel"] > 0.2 * out["etops_zero"]["median"] and out["aten_kernel"] > 0.2 * out["aten_zero"]["median"]
        out["kernel_ratio"] = _summary(pairs) if pairs and len(pairs) >= max(1, len(et_k) // 2) and ok else None
    else:
        out["etops_kernel"] = out["aten_kernel"] = None
        out["kernel_ratio"] = None
    return out


def run_one(kernel, sample: _inputs.Sample, size_label: str | None = None, repeats: int = 11, warmup: int = 2,
            target: float = 0.005, pair: Pair | None = None, budget: float | None = None) -> dict:
    """A result row for one kernel on one sample (errors recorded, not raised)."""
    row = {
        "kernel": kernel.name,
        "dtype": str(sample.dtype).replace("torch.", "") if sample.dtype is not None else "-",
        "size": sample.size,
        "size_label": size_label or _inputs.format_size(sample.size),
        "shapes": sample.shapes(),
        "input": "; ".join([sample.source] + sample.notes),
        "error": None,
    }
    try:
        pair = pair or Pair(kernel, sample)
    except Exception as exc:  # noqa: BLE001
        row["error"] = str(exc) if isinstance(exc, (RuntimeError, LookupError)) else _one_line(exc)
        return row
    row["agree"] = pair.agree
    zero = zero_pair(kernel, sample)
    if budget is not None:
        # Fit the rounds into `budget` seconds: four loops a round, each at least one call.
        fn, args, kwargs = pair.et_call
        t_et = _loop(fn, args, kwargs, 1)
        fn, args, kwargs = pair.aten_call
        t_aten = _loop(fn, args, kwargs, 1)
        per_round = max(t_et, target) + max(t_aten, target) + (2 * target if zero is not None else 0)
        fit = int(budget / (per_round * 1.3)) - warmup
        repeats = max(3, min(repeats, fit))
    row.update(measure(pair, zero, repeats=repeats, warmup=warmup, target=target))
    row["repeats"] = repeats
    row["warmup"] = warmup
    return row
