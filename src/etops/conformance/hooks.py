"""Hooks of a conformance sweep: a module (by name or .py path) or a `module:object`
whose attributes change how each case is checked (see load_hooks), and those
hooks with every call guarded (with_guard). Imports the standard library (and
etops.guard when a guarded call is made)."""

from __future__ import annotations

import importlib
import importlib.util
import zlib


def load_hooks(spec):
    """A hooks module from a module name or a .py path, or `module:object` (None:
    no hooks). Hooks:
    ``before_call(case: CaseInfo)`` runs just before the kernel is called;
    ``reference(case, expected)`` returns what the kernel's result is compared with
    (default: ATen's result); ``inputs(case, args, kwargs)`` returns the arguments
    the kernel gets instead (same values); ``calling(case)`` returns a context
    manager the kernel call runs in; ``invoke(kernel, args, kwargs)`` makes the
    call (``etops check --guard``); ``leaves_inputs`` True says that call never
    writes the arguments it is given but the outs and those the schema marks
    mutable (a guarded call places copies), so a replayed case's recorded inputs
    go to it uncopied; ``applies(case, args, kwargs)`` False leaves the
    case out of the sweep (not checked, not counted). The first two exist for testing the
    machinery, the others for sweeps such as ``etops check --dim-orders``."""
    if spec is None or not isinstance(spec, str):
        return spec
    if spec in _HOOKS:
        return _HOOKS[spec]
    if ":" in spec and not spec.endswith(".py"):  # module:object, an object with the hooks as attributes
        module_name, _, attr = spec.partition(":")
        _HOOKS[spec] = getattr(importlib.import_module(module_name), attr)
        return _HOOKS[spec]
    if spec.endswith(".py"):
        name = "_etops_conformance_hooks_" + str(zlib.crc32(spec.encode()))
        loader = importlib.util.spec_from_file_location(name, spec)
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
    else:
        module = importlib.import_module(spec)
    _HOOKS[spec] = module
    return module


_HOOKS: dict = {}


class _GuardedHooks:
    """Hooks with the kernel call made by etops.guard.call (the other hooks kept)."""

    def __init__(self, base):
        self._base = base

    #: a guarded call copies every tensor argument into guarded memory, and copies
    #: back only the outs and the arguments the schema marks mutable
    leaves_inputs = True

    def __getattr__(self, name):
        if name == "invoke":
            from ..guard.hooks import guarded

            return guarded.invoke
        if self._base is None:
            raise AttributeError(name)
        return getattr(self._base, name)


def with_guard(hooks):
    """`hooks` (a spec or an object, None: none) with every kernel call made by
    etops.guard.call: a kernel that faults raises KernelCrashed (a crash case)
    instead of killing the process."""
    return _GuardedHooks(load_hooks(hooks))
