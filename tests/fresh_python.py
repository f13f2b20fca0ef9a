"""Running test code in a fresh interpreter (import order and aborts are
process-wide). A module of its own, not conftest: several test folders have a
conftest, and `from conftest import ...` would find whichever loaded first."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import etops

#: The folder etops was imported from (the source tree, or wherever PYTHONPATH
#: points): fresh interpreters import the same etops.
SRC = str(Path(etops.__file__).resolve().parent.parent)


#: Under pytest-xdist (``make test``: two workers) every worker imports every test
#: module but runs only some of them: there, a module's background work starts when
#: its first test runs in this worker (``start_module``), not at import.
DEFERRED = bool(os.environ.get("PYTEST_XDIST_WORKER"))

#: Background work (fresh interpreters mostly) runs next to the in-process tests:
#: two at a time, one a worker under xdist (its two workers keep both cores busy).
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1 if DEFERRED else 2, thread_name_prefix="etops-background")

#: module name -> its background work not started yet (DEFERRED)
_PENDING: dict[str, list["Background"]] = {}


class Background:
    """``fn(*args)`` queued on the background pool (under xdist: once its module's
    first test runs); ``.result()`` starts it if it has not started and waits."""

    def __init__(self, module: str, fn, *args) -> None:
        self._call, self._future = (fn, args), None
        if DEFERRED:
            _PENDING.setdefault(module, []).append(self)
        else:
            self.start()

    def start(self) -> None:
        if self._future is None:
            fn, args = self._call
            self._future = _POOL.submit(fn, *args)

    def result(self):
        self.start()
        return self._future.result()


def in_background(fn, *args) -> Background:
    """Queues ``fn(*args)`` (a subprocess, say) to run beside the tests and returns
    at once. Call it at module level so that the work overlaps the module's
    in-process tests; collect with ``.result()`` in the test."""
    return Background(sys._getframe(1).f_globals.get("__name__", ""), fn, *args)


def start_module(module: str) -> None:
    """Starts the background work `module` queued (DEFERRED: called by conftest
    when the module's first test runs)."""
    for work in _PENDING.pop(module, []):
        work.start()


def _run(code: str, timeout: float) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}  # a plain interpreter
    # no empty entry (it would put the working folder first: a test's folder holding a
    # checkout named executorch would shadow the package)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    try:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        out, err = (b.decode(errors="replace") if isinstance(b, bytes) else (b or "") for b in (exc.stdout, exc.stderr))
        return subprocess.CompletedProcess(exc.cmd, -9, out, f"timed out after {timeout}s\n{err}")


def start_python(code: str, timeout: float = 300) -> Background:
    """Queues `code` for a fresh interpreter (etops importable from where this process
    imported it) and returns at once (see in_background); ``.result()`` is its
    subprocess.CompletedProcess."""
    return Background(sys._getframe(1).f_globals.get("__name__", ""), _run, textwrap.dedent(code), timeout)


def run_python(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter and waits for it."""
    return _run(textwrap.dedent(code), timeout)
