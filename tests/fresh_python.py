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


#: Fresh interpreters run two at a time in the background, next to the in-process
#: tests: each pays torch's (and executorch.runtime's) import, seconds apiece.
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="etops-subprocess")


def _run(code: str, timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    try:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        out, err = (b.decode(errors="replace") if isinstance(b, bytes) else (b or "") for b in (exc.stdout, exc.stderr))
        return subprocess.CompletedProcess(exc.cmd, -9, out, f"timed out after {timeout}s\n{err}")


class Launched:
    """Code queued to run in a fresh interpreter; `.result()` waits for it."""

    def __init__(self, code: str, timeout: float = 300) -> None:
        self.code = textwrap.dedent(code)
        self._future = _POOL.submit(_run, self.code, timeout)

    def result(self) -> subprocess.CompletedProcess:
        return self._future.result()


def start_python(code: str) -> Launched:
    """Queues `code` for a fresh interpreter (etops importable from where this process
    imported it) and returns at once. Call it at module level, so the work overlaps
    the in-process tests; collect with ``.result()`` in the test."""
    return Launched(code)


def run_python(code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter and waits for it."""
    return _run(textwrap.dedent(code), timeout)
