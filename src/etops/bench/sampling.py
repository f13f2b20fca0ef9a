"""How a benchmark gets its input: a dtype from its name, the OpInfo sample of a
kernel at a dtype, and that sample scaled to a size both sides accept. Imports
etops.bench's inputs and core modules when asked (none imports this one back)."""

from __future__ import annotations


def parse_dtype(value):
    """A torch.dtype from a dtype or a name ("float32", "torch.half", "f16", ...)."""
    import torch

    if isinstance(value, torch.dtype):
        return value
    name = str(value).strip().replace("torch.", "")
    aliases = {"float": "float32", "half": "float16", "double": "float64", "int": "int32", "long": "int64", "bf16": "bfloat16", "f32": "float32", "f16": "float16"}
    name = aliases.get(name, name)
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {value!r} (try float32, float16, bfloat16, int64, ...)")
    return dt


#: (kernel name, dtype) -> its base_sample (searching OpInfo's database takes seconds
#: when no OpInfo names the kernel; the sample depends on the operator only)
_BASE_SAMPLES: dict = {}


def found_samples() -> dict:
    """The base samples searched so far in this process ((kernel name, dtype) -> sample or None)."""
    return dict(_BASE_SAMPLES)


def keep_samples(found: dict) -> None:
    """Adds base samples another process searched (a fork's found_samples) to this one's."""
    _BASE_SAMPLES.update(found)


def base_sample(kernel, dtype):
    """The OpInfo sample for `kernel` at `dtype` (None: OpInfo has none); searched
    once per process, each call given a copy of its own (a kernel may write its inputs)."""
    import copy

    key = (kernel.name, dtype)
    if key not in _BASE_SAMPLES:
        _BASE_SAMPLES[key] = _find_base_sample(kernel, dtype)
    return copy.deepcopy(_BASE_SAMPLES[key])


def _find_base_sample(kernel, dtype):
    from . import inputs as _inputs

    if dtype is None:
        found = _inputs.derive([kernel], only_named=True) or _inputs.derive([kernel])
        return found.get(kernel.name)
    empty = None  # a sample whose tensors have no element: timed or scaled, it says nothing
    for only_named in (True, False):
        found = _inputs.derive([kernel], dtypes=[dtype], only_named=only_named)
        if kernel.name in found:
            if found[kernel.name].size > 0:
                return found[kernel.name]
            empty = empty or found[kernel.name]
    if empty is not None:
        return empty
    if dtype.is_floating_point:  # an OpInfo without this dtype: convert its float sample
        found = _inputs.derive([kernel], only_named=True) or _inputs.derive([kernel])
        if kernel.name in found and found[kernel.name].dtype is not None and found[kernel.name].dtype.is_floating_point:
            s = _inputs.with_dtype(found[kernel.name], dtype)
            s.notes.append(f"converted to {str(dtype).replace('torch.', '')}")
            return s
    return None


def sized(kernel, sample, size: int | None, with_pair: bool = False, raising: tuple = ()):
    """A sample of about `size` elements that both sides accept: the OpInfo sample
    scaled, else 1-D inputs, else (an operator with a list out) scaled with one
    dimension held; none giving a list out more tensors than the sample gives
    (list_outs); None if none works. ``with_pair``: returns
    (sample, its core.Pair) instead. ``raising``: the kernel's exceptions that are
    raised rather than make a candidate fail (core.Pair.try_make)."""
    from . import core, inputs as _inputs

    if size is None or size == sample.size:
        return (sample, None) if with_pair else sample
    for make in (_inputs.scaled, _inputs.flat, *_holding_one_axis(kernel, sample)):
        candidate = make(sample, size)
        if candidate is None or _more_outs_when_larger(kernel, sample, make):
            continue  # more outs, not more work per out (unbind of a scaled dim: a million 0-d outs)
        pair = core.Pair.try_make(kernel, candidate, raising)
        if pair is not None:
            return (candidate, pair) if with_pair else candidate
    return (None, None) if with_pair else None


def _holding_one_axis(kernel, sample) -> list:
    """For an operator with a list out and a one-tensor sample: the sample scaled
    with one dimension held (the one split or unbound, when it is that one), a
    maker per dimension."""
    import functools

    from . import inputs as _inputs

    tensors = sample.tensors()
    if not _has_list_out(kernel) or len(tensors) != 1:
        return []
    return [functools.partial(_inputs.scaled_but_axis, axis=i) for i in range(tensors[0].dim())]


def _has_list_out(kernel) -> bool:
    schema = getattr(kernel, "_schema", None)
    return any(a.is_out and str(a.type).startswith("List[") for a in getattr(schema, "arguments", ()))


def _more_outs_when_larger(kernel, sample, make) -> bool:
    """Whether `make` at 16 times the sample's size gives a list out more tensors
    than at its size: two small calls, made before the large one (False when the kernel
    has no list out or either call fails)."""
    from . import core

    if not _has_list_out(kernel):
        return False
    n = max(1, sample.size)
    pairs = [core.Pair.try_make(kernel, c) if c is not None else None for c in (make(sample, n), make(sample, 16 * n))]
    if any(p is None for p in pairs):
        return False
    return list_outs(pairs[1])[1] > list_outs(pairs[0])[1]


def list_outs(pair) -> tuple[int, int]:
    """(lists among the pair's outs, tensors in them): a scaled input of an operator
    with a list out (unbind, split) may ask for more outs rather than bigger ones."""
    lists = [v for v in pair.et_outs.values() if isinstance(v, (list, tuple))]
    return len(lists), sum(len(v) for v in lists)
