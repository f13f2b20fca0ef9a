"""Reproducers as pure data, in etops.fuzz's case format (its worker builds them;
``strategies.describe`` prints them)."""

from __future__ import annotations


def tensor(shape, dtype="float32", layout="c", values="normal", seed=0):
    """A tensor argument of a case."""
    return ("T", tuple(shape), dtype, layout, seed, values)


def value(v):
    """A plain argument of a case (dtypes spelled "torch.float32")."""
    return ("V", v)


def case(op, args, outs=("out",)):
    """An invalid-mode call of `op` with `args` ((name, argument) pairs) and empty
    outs named `outs` (an empty tuple: outs omitted)."""
    return {
        "op": op,
        "mode": "invalid",
        "args": list(args),
        "kwargs": [],
        "outs": {o: ("empty",) for o in outs} if outs else {"out": ("omit",)},
        "out_dtype": "float32",
        "mutation": None,
        "target": None,
    }
