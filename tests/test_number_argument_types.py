"""A known argument signature accepts exactly what a fresh kernel accepts: a number
argument given as another object (a 0-dim tensor where the schema wants a number,
a bool or a float where it wants an int) converts to the value a steady call had,
so its signature is the known one; torch's checks still see it (kernel_call.c's
validate_once, CallScratch.odd_numbers), and the call raises what a fresh kernel of
the operator raises. numpy scalars too (a plain one is checked as the Python number
its item() gives, numpy's bool as a bool). Over every aten kernel of a simple call
(simple_calls.py) with a Scalar / int / float / bool argument."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from etops.kernel import make_kernel

def _numpy(v) -> list:
    """numpy scalars of v: a plain one is checked as its item() (no check on every
    call), numpy's bool as a bool (checked on every call)."""
    return [np.float32(v), np.int64(int(v)), np.bool_(bool(v))]


#: schema types of number arguments -> the wrong-typed (or other-typed) objects tried for a value v
_WRONG = {
    "number": lambda v: [torch.tensor(v), *_numpy(v)],
    "int": lambda v: [torch.tensor(v), True, float(v), *_numpy(v)],
    "SymInt": lambda v: [torch.tensor(v), True, float(v), *_numpy(v)],
    "float": lambda v: [torch.tensor(v), *_numpy(v)],
    "bool": lambda v: [torch.tensor(v), int(v), *_numpy(v)],
}


def _fresh(kernel):
    """A kernel object of the same operator that has met no call."""
    info = kernel._info
    return make_kernel(info.name, info._schema, info.schema_source, registered_as=info.registered_as)


def _outcome(kernel, kwargs, outs):
    """What a call does: ("ok",) or its error's type and message."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kernel(**kwargs, **outs)
    except Exception as exc:  # noqa: BLE001 - compared below
        return type(exc), str(exc)
    return ("ok",)


def test_a_wrong_typed_number_after_steady_calls_raises_what_a_fresh_kernel_raises():
    from simple_calls import simple_calls

    tried, refused, wrong, kernels = 0, 0, [], set()
    for c in simple_calls():
        numbers = [a for a in c.overload._schema.arguments
                   if a.name in c.kwargs and str(a.type) in _WRONG and isinstance(c.kwargs[a.name], (bool, int, float))]
        if not numbers:
            continue
        outs = c.make_outs(torch.empty_like)
        if outs is None:
            continue
        fresh = _fresh(c.kernel)
        for arg in numbers:
            for bad in _WRONG[str(arg.type)](c.kwargs[arg.name]):
                for _ in range(3):  # steady: the signature known, probed, the memo warm
                    c.kernel(**c.kwargs, **outs)
                kwargs = {**c.kwargs, arg.name: bad}
                warm, cold = _outcome(c.kernel, kwargs, outs), _outcome(fresh, kwargs, outs)
                tried += 1
                refused += cold != ("ok",)
                kernels.add(c.name)
                if warm != cold:
                    wrong.append((c.name, arg.name, repr(bad), warm[0], cold[0]))
    assert tried >= 250 and refused >= 150 and len(kernels) >= 40, (tried, refused, len(kernels))
    assert wrong == [], wrong
