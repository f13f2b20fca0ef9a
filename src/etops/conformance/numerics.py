"""The numerics axis of a sweep (``etops check --numerics-axis``): every case with a
floating input again, its floating tensors transformed to expose numerics, ATen
and the kernel both on the new values. OpInfo's samples are small values near
zero, on which a one-pass variance, a float32 accumulator or an unscaled square
all look right. The transforms (``TRANSFORMS``), each one sweep:

- ``offset``: a large offset added (mean >> spread): 1024 x (1 + max |x|), at most
  max(dtype) / 256: ``E[x^2] - E[x]^2`` cancels catastrophically;
- ``cancel``: mixed magnitudes that cancel: +B, -B added to neighbouring
  elements along the last dim (B = 2^12 x (1 + max |x|)): a sum is what it was,
  its partial sums are not;
- ``huge``: scaled so max |x| is sqrt(max(dtype)) x 4: squares overflow to inf in
  an intermediate that the result does not need;
- ``tiny``: scaled so max |x| is 16 x the smallest normal: denormals;
- ``long``: the last dim repeated to at least 2048 elements (long reductions);
  only the tensors of rank 2 or more when the call has any.

Integer tensors are left as they are (an index, a count), unless the hooks are
made ``Transform(name, integers=True)`` (``etops dev``'s numerics pass, whose tasks
run at every dtype) and the call has no floating tensor: then ``offset`` adds
max(dtype) // 8 (at most what keeps every element in range) and ``huge`` scales so
max |x| is about max(dtype) / 4, so that a sum of a few elements overflows an
accumulator of the input's own type where ATen's, of int64, does not; ``long``
lengthens them as it does floating tensors; ``cancel`` and ``tiny`` leave them.
``etops check --numerics-axis`` transforms floating tensors only (its sweeps are
of DTYPES).

A transform is deterministic (a function of the inputs), so a finding's inputs
are found again, shrunk and reproduced as the other findings are (the
reproducer shows the transformed values). A case ATen refuses after the
transform, or with no floating input, is left out. A **finding** is a case that
fails transformed (a wrong result or a precision loss against the
higher-precision reference, a crash, an abort, an error) and does not fail the
same way in the sweep of the samples as they are; findings are keyed as root
causes (layout ``numerics:<transform>``).

Imports torch and the conformance sweep (clusters, sweep) when it runs.
"""

from __future__ import annotations

import math

import torch

from .values import AS_PRECISE, exact_clone, on_meta

#: the dtypes the axis transforms (half precision has too few digits to say more)
DTYPES = ("float32", "float64")
LONG = 2048


def _floating(value) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() >= 2


def _integer(value) -> bool:
    """An integer tensor of 2 elements or more (not bool)."""
    return (isinstance(value, torch.Tensor) and not value.is_floating_point() and not value.is_complex()
            and value.dtype != torch.bool and value.numel() >= 2)


def _tensors(values, moved=_floating):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _tensors(v, moved)
        elif moved(v):
            yield v


def _map(value, fn, moved=_floating):
    if isinstance(value, (list, tuple)):
        return type(value)(_map(v, fn, moved) for v in value)
    return fn(value) if moved(value) else value


def _biggest(t: torch.Tensor) -> float:
    if not t.is_floating_point():
        return float(t.to(torch.int64).abs().max()) if t.numel() else 0.0
    finite = t[torch.isfinite(t)]
    return float(finite.abs().max()) if finite.numel() else 0.0


def offset(t: torch.Tensor) -> torch.Tensor:
    if not t.is_floating_point():  # an integer tensor: max(dtype) // 8, every element kept in range
        step = min(torch.iinfo(t.dtype).max // 8, torch.iinfo(t.dtype).max - int(t.max()))
        return t + step if step > 0 else t
    c = min(1024.0 * (1.0 + _biggest(t)), torch.finfo(t.dtype).max / 256)
    return t + c


def cancel(t: torch.Tensor) -> torch.Tensor:
    if t.dim() == 0 or t.shape[-1] < 2 or not t.is_floating_point():
        return t
    big = 4096.0 * (1.0 + _biggest(t))
    signs = torch.zeros(t.shape[-1], dtype=t.dtype)
    pairs = t.shape[-1] // 2 * 2
    signs[:pairs:2], signs[1:pairs:2] = 1.0, -1.0
    return t + big * signs


def huge(t: torch.Tensor) -> torch.Tensor:
    top = _biggest(t)
    if not t.is_floating_point():  # an integer tensor: max |x| about max(dtype) / 4
        factor = int(torch.iinfo(t.dtype).max // 4 // top) if top > 0 else 0
        return t * factor if factor > 1 else t
    return t * (4.0 * math.sqrt(torch.finfo(t.dtype).max) / top) if top > 0 else t


def tiny(t: torch.Tensor) -> torch.Tensor:
    top = _biggest(t)
    if not t.is_floating_point():
        return t
    return t * (16.0 * torch.finfo(t.dtype).tiny / top) if top > 0 else t


def long(t: torch.Tensor) -> torch.Tensor:
    if t.dim() == 0 or t.shape[-1] == 0 or t.shape[-1] >= LONG:
        return t
    times = -(-LONG // t.shape[-1])
    return t.repeat(*([1] * (t.dim() - 1)), times)


def _long_of_rank_2(t: torch.Tensor) -> torch.Tensor:
    return long(t) if t.dim() >= 2 else t


TRANSFORMS = {"offset": offset, "cancel": cancel, "huge": huge, "tiny": tiny, "long": long}


class Transform:
    """The hooks of one transform (etops.conformance.hooks): ``applies`` leaves out
    cases with nothing to transform (no floating input; with `integers`, no integer
    input either); ``transform(case, func, args, kwargs)`` returns the new (args,
    kwargs, ATen's result on them), or None when ATen refuses them or nothing
    changed. `integers`: a call with no floating tensor has its integer tensors
    transformed (the module's docstring says how)."""

    def __init__(self, name: str, integers: bool = False):
        if name not in TRANSFORMS:
            raise ValueError(f"Transform: argument 'name' must be one of {', '.join(TRANSFORMS)}, got {name!r}")
        self.name, self._fn, self.integers = name, TRANSFORMS[name], integers

    def _moved(self, values: list):
        """Which tensors of `values` move: the floating ones; with `integers` and none
        floating, the integer ones."""
        if self.integers and not any(True for _ in _tensors(values)):
            return _integer
        return _floating

    def applies(self, case, args, kwargs) -> bool:
        values = list(args) + list(kwargs.values())
        return any(True for _ in _tensors(values, self._moved(values)))

    def values(self, args, kwargs):
        """`args`, `kwargs` with every floating tensor (2 elements or more; with
        `integers` and none floating, every integer one) transformed; ``long``
        lengthens only the tensors of rank 2 or more when there are any (a batch
        norm's per-channel weights keep their size)."""
        fn, moved = self._fn, self._moved(list(args) + list(kwargs.values()))
        if fn is long and any(t.dim() >= 2 for t in _tensors(list(args) + list(kwargs.values()), moved)):
            fn = _long_of_rank_2
        return [_map(a, fn, moved) for a in args], {k: _map(v, fn, moved) for k, v in kwargs.items()}

    def transform(self, case, func, args, kwargs):
        new_args, new_kwargs = self.values(args, kwargs)
        if _unchanged(list(args) + list(kwargs.values()), list(new_args) + list(new_kwargs.values())):
            return None  # nothing to transform: the case as it is, judged already
        if not _meta_accepts(func, new_args, new_kwargs):
            return None  # torch's checks refuse the new shapes (ATen's CPU kernel may not check them all)
        try:
            expected = func(*exact_clone(new_args), **exact_clone(new_kwargs))
        except Exception:  # noqa: BLE001 - ATen refuses the new values (a shape no longer fits, a domain)
            return None
        return new_args, new_kwargs, expected


def _unchanged(before: list, after: list) -> bool:
    """Whether every value of `after` is the very object of `before` (no tensor moved)."""
    for b, a in zip(before, after):
        if isinstance(b, (list, tuple)):
            if not _unchanged(list(b), list(a)):
                return False
        elif a is not b:
            return False
    return True


def _meta_accepts(func, args, kwargs) -> bool:
    """False when torch's meta kernel refuses the call (a per-channel weight no longer
    the size of its channels); True when it accepts it or cannot say (no meta
    kernel, a data-dependent shape)."""
    from torch._subclasses.fake_tensor import DynamicOutputShapeException

    try:
        func(*on_meta(list(args)), **{k: on_meta(v) for k, v in kwargs.items()})
    except (NotImplementedError, DynamicOutputShapeException):
        return True
    except Exception:  # noqa: BLE001 - refused
        return False
    return True


offset_hooks, cancel_hooks, huge_hooks, tiny_hooks, long_hooks = (Transform(n) for n in TRANSFORMS)
#: transform -> hooks spec (a sweep's worker loads it by name)
AXIS_TRANSFORMS = {name: f"{__name__}:{name}_hooks" for name in TRANSFORMS}
(offset_with_integers, cancel_with_integers, huge_with_integers, tiny_with_integers,
 long_with_integers) = (Transform(n, integers=True) for n in TRANSFORMS)
#: transform -> hooks spec of the transform moving integer inputs too (etops dev's numerics pass)
WITH_INTEGERS = {name: f"{__name__}:{name}_with_integers" for name in TRANSFORMS}
AXIS_MAX_DETAILS = 50


def layout_name(transform: str) -> str:
    return f"numerics:{transform}"


def _failing(case) -> bool:
    return case.status != "pass" and not (case.status == "mismatch" and case.verdict == AS_PRECISE)


class NumericsAxis:
    """What the numerics axis found: per transform its sweep, its findings (cases
    failing transformed that do not fail the same way as they are) and their
    clusters; ``seconds``: what the axis cost."""

    def __init__(self, base, runs: dict, seconds: float = 0.0):
        self.base, self.runs, self.seconds = base, runs, seconds
        failing = base.failing  # every failing case of the sweep, not only the recorded ones
        self.findings = {name: [c for c in r.details if _failing(c) and failing.get(c.id) != (c.status, c.verdict)]
                         for name, r in runs.items()}
        self.clusters: dict = {name: [] for name in runs}

    def all_clusters(self) -> list:
        return [c for name in self.runs for c in self.clusters[name]]

    def headline(self) -> str:
        from .clusters import findings_in_words

        found = self.all_clusters()
        words = findings_in_words(found)
        return (f"numerics axis ({', '.join(self.runs)}; {self.seconds:.0f} s): {len(found)} distinct findings"
                + (f" ({words})" if words else ""))

    def terminal_lines(self) -> list[str]:
        lines = [self.headline()]
        for c in self.all_clusters():
            lines.append(f"  [{c.category}] {c.summary}")
            if c.reproducer:
                lines.append(f"      reproducer: {c.reproducer}")
        return lines

    def markdown_lines(self) -> list[str]:
        from .report import md_escape

        out = ["## Numerics axis", "", self.headline(), "",
               "| transform | category | kernel | dtypes | summary | reproducer |", "|---|---|---|---|---|---|"]
        for name in self.runs:
            for c in self.clusters[name]:
                repro = f"`findings/{c.reproducer.rsplit('/', 1)[-1]}`" if c.reproducer else ""
                out.append(f"| {name} | {c.category} | `{c.kernel}` | {' '.join(c.dtypes)} | {md_escape(c.summary)} | {repro} |")
        return out

    def to_json(self) -> dict:
        return {"transforms": list(self.runs), "seconds": round(self.seconds, 2), "headline": self.headline(),
                "findings": {name: [c.to_json() for c in cl] for name, cl in self.clusters.items()}}


def run_axis(kernels, base, *, report_dir=None, shrink: bool = True, transforms=None, **run_options) -> NumericsAxis:
    """The numerics axis of a sweep: `base` (the sweep of the samples as they are)
    and one sweep per transform (``TRANSFORMS``, or the names in `transforms`) at
    the floating dtypes of DTYPES the sweep asked for, with its other options; the
    findings clustered (shrunk, reproducers in REPORT_DIR/findings/)."""
    import time

    from .clusters import build
    from .sweep import run

    start = time.perf_counter()
    asked = run_options.pop("dtypes", None)
    names = [str(d).replace("torch.", "") for d in asked] if asked else list(DTYPES)
    dtypes = [d for d in names if d in DTYPES]
    run_options = {**run_options, "max_details": max(run_options.get("max_details") or 0, AXIS_MAX_DETAILS)}
    chosen = {n: AXIS_TRANSFORMS[n] for n in (transforms or TRANSFORMS)}
    runs = {name: run(kernels, dtypes=dtypes, hooks=hooks, report_dir=None, **run_options) for name, hooks in chosen.items()} if dtypes else {}
    axis = NumericsAxis(base, runs)
    for name, hooks in chosen.items():
        if name in runs:
            axis.clusters[name] = build(runs[name], report_dir=report_dir, hooks=hooks, layout=layout_name(name),
                                        shrink=shrink, cases=axis.findings[name])
    axis.seconds = time.perf_counter() - start
    return axis
