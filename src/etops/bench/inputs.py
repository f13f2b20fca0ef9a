"""Representative inputs for a kernel, derived from PyTorch's OpInfo database.

An ExecuTorch out-variant kernel (``aten::add.out``) is matched to OpInfo entries
by what they run: each OpInfo sample is called under a TorchDispatchMode that
records the aten ops it reaches, and a sample whose recorded functional op
(``aten::add.Tensor``) is the functional counterpart of the kernel gives the
kernel its input: the recorded arguments themselves. View ops count for their
``_copy`` kernels (``aten::select.int`` for ``aten::select_copy.int_out``).
The first OpInfo sample that matches wins, OpInfos named after the op first.

A sample can be rescaled to another size (every dimension above 1 multiplied by
one factor, so equal dimensions stay equal), and shrunk to zero elements for the
per-call overhead.
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from dataclasses import dataclass, field

import torch

#: Samples looked at per OpInfo and dtype before giving up on it.
MAX_SAMPLES = 40
#: dtypes tried, in order, when the caller does not ask for one.
DEFAULT_DTYPES = (torch.float32, torch.int64, torch.int32, torch.bool, torch.uint8, torch.float64)


@dataclass
class Sample:
    """Arguments for one kernel (the non-out arguments of its schema)."""

    kernel: str
    args: tuple
    kwargs: dict
    source: str  #: where it came from ("OpInfo 'add', sample 0, float32")
    functional: str = ""  #: the recorded torch op
    notes: list = field(default_factory=list)

    def tensors(self) -> list[torch.Tensor]:
        return [t for t in _walk(self.args) + _walk(list(self.kwargs.values())) if isinstance(t, torch.Tensor)]

    @property
    def size(self) -> int:
        """numel of the largest tensor argument."""
        return max((t.numel() for t in self.tensors()), default=0)

    def shapes(self) -> str:
        return " ".join("x".join(map(str, t.shape)) or "()" for t in self.tensors())

    @property
    def dtype(self) -> torch.dtype | None:
        ts = self.tensors()
        floats = [t.dtype for t in ts if t.is_floating_point()]
        return floats[0] if floats else (ts[0].dtype if ts else None)


def _walk(values) -> list:
    out = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.extend(_walk(v))
        else:
            out.append(v)
    return out


@contextlib.contextmanager
def quiet():
    """OpInfo samples warn a lot (deprecations, beta APIs); torchao logs at import."""
    loggers = [logging.getLogger(n) for n in ("torchao", "torch.utils._pytree", "torch._dynamo", "torch")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


_op_db = None


def op_db() -> list:
    """torch.testing's OpInfo database (imported on first use: seconds)."""
    global _op_db
    if _op_db is None:
        with quiet():
            from torch.testing._internal.common_methods_invocations import op_db as db
        _op_db = list(db)
    return _op_db


def _recorder():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            self.calls.append((func, args, kwargs))
            return func(*args, **kwargs)

    return Record()


def functional_names(kernel) -> list[str]:
    """Names of torch ops whose call the kernel stands for: its functional
    counterpart, and for ``*_copy`` kernels the view op they copy."""
    try:
        functional = kernel.functional_overload()
    except Exception:  # noqa: BLE001
        functional = None
    if functional is None:
        return []
    name = functional.name()  # aten::select_copy.int
    names = [name]
    ns, _, rest = name.partition("::")
    op, _, overload = rest.partition(".")
    if op.endswith("_copy"):
        names.append(f"{ns}::{op[:-5]}" + (f".{overload}" if overload else ""))
    return names


def _detach(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list):
        return [_detach(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_detach(v) for v in value)
    return value


def _kernel_op(name: str) -> str:
    op = name.split("::", 1)[1].split(".", 1)[0]
    return op[:-5] if op.endswith("_copy") else op


def _ranked_opinfos(wanted_ops: set[str]) -> list:
    """OpInfos named after one of the wanted ops first, then the rest (db order)."""
    db = op_db()
    first = [o for o in db if o.name in wanted_ops or getattr(o, "aten_name", None) in wanted_ops or o.name.split(".")[-1] in wanted_ops]
    seen = {id(o) for o in first}
    return first + [o for o in db if id(o) not in seen]


def _samples(opinfo, dtype, limit=MAX_SAMPLES):
    try:
        supported = opinfo.supported_dtypes("cpu")
    except Exception:  # noqa: BLE001
        return
    if dtype not in supported:
        return
    try:
        # sample_inputs_func directly: OpInfo.sample_inputs inspects the call stack
        # for test-function metadata (0.1 s a call).
        torch.manual_seed(0)
        it = iter(opinfo.sample_inputs_func(opinfo, "cpu", dtype, False))
        for i in range(limit):
            try:
                yield i, next(it)
            except StopIteration:
                return
    except Exception:  # noqa: BLE001 - some generators need optional packages
        return


def derive(kernels: list, dtypes=None, deadline: float | None = None, only_named: bool = False) -> dict[str, Sample]:
    """kernel name -> Sample for every kernel (etops kernel objects) OpInfo can feed.

    ``dtypes``: dtypes to try in order (default: float32 first, then others).
    ``only_named``: look only at OpInfos named after the kernels' ops (fast)."""
    import time

    dtypes = tuple(dtypes or DEFAULT_DTYPES)
    wanted: dict[str, list] = {}  # torch op name -> kernels
    for k in kernels:
        for n in functional_names(k):
            wanted.setdefault(n, []).append(k)
    found: dict[str, Sample] = {}
    settled: set[str] = set()  # found by an earlier OpInfo: kept even if trivial (one element), not if empty
    ops = {_kernel_op(k.name) for k in kernels}
    with quiet():
        opinfos = _ranked_opinfos(ops)
        if only_named:
            opinfos = [o for o in opinfos if o.name in ops or getattr(o, "aten_name", None) in ops or o.name.split(".")[-1] in ops]
        for i, dtype in enumerate(dtypes):
            if i > 0:  # other dtypes: only for the kernels still without a sample
                missing = {_kernel_op(k.name) for k in kernels if k.name not in found}
                opinfos = [o for o in opinfos if o.name in missing or getattr(o, "aten_name", None) in missing or o.name.split(".")[-1] in missing]
            for opinfo in opinfos:
                if deadline is not None and time.monotonic() > deadline:
                    return found
                if all(k.name in found and found[k.name].size > 0 for k in kernels):
                    return found
                for index, sample in _samples(opinfo, dtype):
                    record = _recorder()
                    try:
                        with record:
                            opinfo(sample.input, *sample.args, **sample.kwargs)
                    except Exception:  # noqa: BLE001
                        break
                    for func, args, kwargs in record.calls:
                        for k in wanted.get(func.name(), ()):
                            have = found.get(k.name)
                            if have is not None and (have.size > 1 or k.name in settled):
                                continue
                            candidate = Sample(
                                k.name, _detach(tuple(args)), _detach(dict(kwargs)),
                                f"OpInfo '{opinfo.name}' sample {index}, {str(dtype).replace('torch.', '')}",
                                func.name())
                            if have is None or candidate.size > 1:
                                found[k.name] = candidate
                    # A sample of single-element tensors says little about speed:
                    # later samples of the same OpInfo may replace it.
                    if all(k.name in found and found[k.name].size > 1 for ks in wanted.values() for k in ks if _kernel_op(k.name) in (opinfo.name, getattr(opinfo, "aten_name", None))):
                        break
                # an empty sample (zero elements) can be neither timed nor scaled: a later
                # OpInfo's may replace it
                settled.update(name for name, sample in found.items() if sample.size > 0)
    return found


# ---- reshaping samples -------------------------------------------------------------


def _new_like(t: torch.Tensor, shape) -> torch.Tensor:
    """A tensor of `shape` whose values look like `t`'s: floats uniform over t's
    range, integers and bools drawn from t's values (indices stay valid)."""
    shape = tuple(shape)
    n = math.prod(shape)
    if n == 0 or t.numel() == 0:
        return torch.empty(shape, dtype=t.dtype)
    flat = t.reshape(-1)
    if t.is_floating_point():
        lo, hi = float(flat.min()), float(flat.max())
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo == hi:
            lo, hi = -1.0, 1.0
        return torch.empty(shape, dtype=torch.float32).uniform_(lo, hi).to(t.dtype)
    if t.is_complex():
        return torch.randn(shape, dtype=t.dtype)
    return flat[torch.randint(flat.numel(), shape)]


def _map_tensors(value, fn):
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, list):
        return [_map_tensors(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(_map_tensors(v, fn) for v in value)
    return value


def _remap(sample: Sample, dim_map, note: str) -> Sample:
    def fn(t):
        shape = [dim_map(d) for d in t.shape]
        if list(shape) == list(t.shape):
            return t
        return _new_like(t, shape)

    return Sample(sample.kernel, _map_tensors(sample.args, fn), {k: _map_tensors(v, fn) for k, v in sample.kwargs.items()},
                  sample.source, sample.functional, sample.notes + [note])


def scaled(sample: Sample, size: int) -> Sample | None:
    """The sample with every dimension above 1 scaled by one factor, so that its
    largest tensor has about `size` elements; None when it has nothing to scale."""
    biggest = max(sample.tensors(), key=lambda t: t.numel(), default=None)
    if biggest is None or biggest.numel() == 0:
        return None
    big_dims = [d for d in biggest.shape if d > 1]
    if not big_dims:
        return None
    factor = (size / biggest.numel()) ** (1.0 / len(big_dims))
    cache: dict[int, int] = {}

    def dim_map(d):
        if d <= 1:
            return d
        if d not in cache:
            cache[d] = max(1, round(d * factor))
        return cache[d]

    return _remap(sample, dim_map, f"scaled from {sample.shapes()}")


def scaled_but_axis(sample: Sample, size: int, axis: int) -> Sample | None:
    """A sample of one tensor with every dimension above 1 but `axis` scaled by one
    factor, so that it has about `size` elements (the axis split or unbound keeps
    its length, so the outs grow, not their number); None when nothing scales."""
    tensors = sample.tensors()
    if len(tensors) != 1 or axis >= tensors[0].dim() or tensors[0].numel() == 0:
        return None
    shape = list(tensors[0].shape)
    others = [i for i, d in enumerate(shape) if d > 1 and i != axis]
    if not others:
        return None
    factor = (size / tensors[0].numel()) ** (1.0 / len(others))
    new_shape = [max(1, round(d * factor)) if i in others else d for i, d in enumerate(shape)]

    def fn(t):
        return _new_like(t, new_shape)

    return Sample(sample.kernel, _map_tensors(sample.args, fn), {k: _map_tensors(v, fn) for k, v in sample.kwargs.items()},
                  sample.source, sample.functional, sample.notes + [f"scaled from {sample.shapes()}, dim {axis} held"])


def flat(sample: Sample, size: int) -> Sample | None:
    """Every tensor with more than one element replaced by a 1-D one of `size`."""
    if not any(t.numel() > 1 for t in sample.tensors()):
        return None

    def fn(t):
        return _new_like(t, (size,)) if t.numel() > 1 else t

    return Sample(sample.kernel, _map_tensors(sample.args, fn), {k: _map_tensors(v, fn) for k, v in sample.kwargs.items()},
                  sample.source, sample.functional, sample.notes + ["1-D inputs"])


def zero_size(sample: Sample) -> list[Sample]:
    """Candidates for the zero-element call of the same kernel (the per-call cost):
    every dimension 0, or only those above 1."""
    return [_remap(sample, lambda d: 0, "zero-size"), _remap(sample, lambda d: 0 if d > 1 else d, "zero-size")]


def with_dtype(sample: Sample, dtype: torch.dtype) -> Sample:
    """Floating-point tensors converted to `dtype`."""
    def fn(t):
        return t.to(dtype) if t.is_floating_point() else t

    return Sample(sample.kernel, _map_tensors(sample.args, fn), {k: _map_tensors(v, fn) for k, v in sample.kwargs.items()},
                  sample.source, sample.functional, sample.notes)


def parse_size(text: str) -> int:
    """'16' -> 16, '4k' -> 4096, '1M' -> 1048576, '16M', '1G'."""
    s = text.strip()
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(s[-1:].lower(), 1)
    body = s[:-1] if mult != 1 else s
    try:
        value = float(body) * mult
    except ValueError:
        raise ValueError(f"size {text!r} is not a number like 16, 4k, 1M") from None
    if value < 0 or value != int(value):
        raise ValueError(f"size {text!r} must be a whole number of elements")
    return int(value)


def format_size(n: int) -> str:
    for unit, m in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
        if n >= m and n % m == 0:
            return f"{n // m}{unit}"
    return str(n)
