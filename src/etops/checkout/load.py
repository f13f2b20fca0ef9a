"""``--load`` for every command: kernels loaded before the command runs.

A spec is one of
- ``FILE.cpp`` (``.cc``, ``.cxx``): a kernel file of a checkout or an out-of-tree
  folder, built and swapped in as ``etops dev`` does (not judged, timed or tested);
- ``LIB.so``: a shared library registering kernels (``etops.load_library``);
- ``FILE.py:FUNCTION`` or ``package.module:FUNCTION``: a function called with no
  arguments that registers or overrides kernels through etops (what it returns is
  kept alive for the process).

The specs also go to the environment (``ETOPS_LOAD``), so the worker processes of
``--isolated`` sweeps and of fuzzing load the same kernels (a C++ file is a cache hit
there, no compile).

Imports the core, etops.custom and this package (install) only.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import zlib
from pathlib import Path

from ..errors import EtopsError, LoadError
from .layout import SOURCE_SUFFIXES

ENV = "ETOPS_LOAD"

#: what loaded specs returned (handles, overrides), kept alive for the process
_kept: list = []
_applied: list[str] = []
#: kernel file spec -> the helper sources built with it (etops dev --changed's reproducers)
_helpers: dict[str, list[str]] = {}


def _call(spec: str):
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise LoadError(f"--load {spec}: no file {target}")
        name = "_etops_load_" + str(zlib.crc32(str(path.resolve()).encode()))
        loader = importlib.util.spec_from_file_location(name, path)
        if loader is None or loader.loader is None:
            raise LoadError(f"--load {spec}: cannot import {target}")
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise LoadError(f"--load {spec}: {target} has no function {attr!r}")
    return fn()


def _install_file(spec: str, helpers):
    """Kernel file `spec` located, built with the wheel's flags and swapped in (as
    ``etops dev`` does, without judging or timing it): its install.Installed.
    LoadError naming the spec when it cannot be located or does not build."""
    from ..errors import BuildError, CheckoutError
    from . import install

    try:
        target = install.locate(spec, None, None, helpers)
        library = install.build_target(target)
    except (BuildError, CheckoutError) as exc:
        raise LoadError(f"--load {spec}: {exc}") from None
    return install.install(target, library)


def load(spec: str, helpers=()) -> list[str]:
    """Loads one spec; returns the operator names it registered or replaced (as far
    as etops can tell: for a Python function, the ones whose kernels changed).
    `helpers`: for a kernel file, the checkout's helper sources built with it."""
    from .. import _native

    suffix = Path(spec).suffix
    library = suffix == _native.SHARED_LIBRARY_SUFFIX or f"{_native.SHARED_LIBRARY_SUFFIX}." in Path(spec).name
    if (suffix in SOURCE_SUFFIXES or library) and not Path(spec).is_file():
        raise LoadError(f"--load {spec}: no such file")
    if suffix in SOURCE_SUFFIXES:
        installed = _install_file(spec, helpers)
        _kept.append(installed)
        return list(installed.target.names)
    if helpers:
        raise LoadError(f"--load {spec}: helper sources go with a kernel file (.cpp)")
    if library:
        from ..custom import load_library

        return load_library(spec)
    if ":" in spec:
        before = {(n, k): a for n, k, a in _native.registered_kernels()}
        _kept.append(_call(spec))
        after = _native.registered_kernels()
        return sorted({n for n, k, a in after if before.get((n, k)) != a and not n.startswith("etops_previous::")})
    raise LoadError(f"--load {spec}: give a kernel file (.cpp), a library (.so) or FILE.py:FUNCTION / module:FUNCTION")


def load_all(specs, helpers=None) -> list[str]:
    """Loads every spec (and records them in the environment for worker
    processes); returns the operator names loaded, in order, without repeats.
    `helpers`: kernel file spec -> the helper sources to build with it."""
    names: list[str] = []
    helpers = dict(helpers or {})
    for spec in specs or ():
        for n in load(spec, helpers.get(spec, ())):
            if n not in names:
                names.append(n)
        _applied.append(spec)
        if helpers.get(spec):
            _helpers[spec] = list(helpers[spec])
    if _applied:
        os.environ[ENV] = json.dumps({"specs": _applied, "helpers": _helpers} if _helpers else _applied)
    return names


def load_for_command(specs, prog: str) -> list[str] | None:
    """``load_all(specs)`` for a command line: on an etops error (a build error, a
    spec naming nothing loadable) prints ``prog: error: ...`` and returns None."""
    import sys

    try:
        return load_all(specs)
    except EtopsError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return None


def unload_all() -> None:
    """Puts back what the specs loaded in this process replaced or added (kernel
    files; overrides and registrations a Python function returned; a library stays
    loaded: ExecuTorch cannot unregister) and forgets the specs."""
    from ..custom import KernelHandle

    for kept in reversed(_kept):
        for item in kept if isinstance(kept, (list, tuple)) else [kept]:
            if isinstance(item, KernelHandle):  # an override restored, a registration deregistered
                item.undo()
            elif hasattr(item, "restore") and hasattr(item, "replaced"):  # a kernel file's install.Installed
                item.restore()
    _kept.clear()
    _applied.clear()
    _helpers.clear()
    os.environ.pop(ENV, None)


def from_environment() -> list[str]:
    """In a worker process: loads the specs its parent loaded (none: nothing)."""
    text = os.environ.get(ENV)
    if not text or _applied:
        return []
    recorded = json.loads(text)
    if isinstance(recorded, dict):  # kernel files with helper sources
        return load_all(recorded["specs"], recorded["helpers"])
    return load_all(recorded)
