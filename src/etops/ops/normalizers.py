"""Normalizer constructors: ``constructor(argument names ...)`` returns a normalizer
``normalizer(bound, info)`` giving the arguments torch accepts in a form the kernel
mishandles, rewritten to the equivalent form it handles (a dict of the changed
arguments), or None when there is nothing to rewrite. A normalizer passes over
arguments of the wrong kind: the guards and the call path report those.
"""

from __future__ import annotations

from .guards import shape_dtype


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def nonnegative_dim(name: str = "self", dim_name: str = "dim"):
    """A negative `dim_name` in [-ndim, 0) as dim + ndim (torch wraps it; the kernel
    passes it to size() unwrapped)."""

    def normalize(bound, info):
        m, dim = shape_dtype(bound.get(name)), bound.get(dim_name)
        if m is None or not _int(dim):
            return None
        ndim = len(m[0])
        if ndim > 0 and -ndim <= dim < 0:
            return {dim_name: dim + ndim}
        return None

    return normalize


def scalar_dims_as_none(name: str = "self", dim_name: str = "dim"):
    """A 0-dim `name` reduced over dims [0] or [-1] (torch treats a 0-dim tensor as
    having one dim) as a reduction over every dim (dim=None): the same result, and
    the kernel aborts on size(0) of a 0-dim tensor."""

    def normalize(bound, info):
        m, dims = shape_dtype(bound.get(name)), bound.get(dim_name)
        if m is None or len(m[0]) != 0 or not isinstance(dims, (list, tuple)) or not dims:
            return None
        if all(_int(d) and d in (0, -1) for d in dims):
            return {dim_name: None}
        return None

    return normalize
