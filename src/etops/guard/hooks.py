"""Hooks that run another tool's kernel calls guarded: ``etops check --guard``
(the conformance runner's ``invoke`` hook) and ``python -m etops.fuzz --guard``."""

from __future__ import annotations

from .call import call


class _Guarded:
    """invoke(kernel, args, kwargs): the call made by etops.guard.call, which writes
    back only the outs and the arguments the schema marks mutable (leaves_inputs)."""

    leaves_inputs = True

    @staticmethod
    def invoke(kernel, args, kwargs):
        return call(kernel, *args, **kwargs)


guarded = _Guarded()
