"""Running a test's reproducer scripts as ``python SCRIPT`` runs them, without paying
``import torch, etops`` once per script: ``Scripts`` starts one interpreter that
imports torch and etops (a reproducer's first lines) and then, for each script it
is given, forks a child that runs the script as ``__main__`` (its folder first on
sys.path, as ``python SCRIPT`` puts it; stdin /dev/null, stdout and stderr its own),
its exit code the interpreter's (SystemExit, an uncaught exception: 1, a signal:
minus its number). Nothing but the two imports happens before the fork, so each
script starts from the state its own first lines give, whatever the script before
it loaded or broke; the files it reads (the kernel file) are read when it runs.
The environment and working folder are the test's when ``Scripts`` starts."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import tempfile
from pathlib import Path

#: the interpreter's loop (-P: the test's folder, holding a checkout named executorch, not on sys.path)
_SERVER = r"""
import json, os, runpy, sys
import torch, etops
for line in sys.stdin:
    job = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, path in ((1, job["out"]), (2, job["err"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        sys.stdin = open(os.devnull)
        script = job["script"]
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, run_name="__main__")
        sys.exit(0)  # as the interpreter exits after a script (SystemExit and exceptions end the child alike)
    _, status = os.waitpid(pid, 0)
    print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)
"""


class Scripts:
    """One interpreter running scripts (see the module); ``run(script)`` gives
    (exit code, stdout, stderr) as subprocess.run would. Close it (``with``)."""

    def __init__(self, cwd, timeout: float = 300):
        self._folder = Path(tempfile.mkdtemp(prefix="scripts-", dir=cwd))
        self._timeout = timeout
        self._proc = subprocess.Popen([sys.executable, "-P", "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, cwd=cwd)
        self._runs = 0

    def run(self, script) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of `script` run as ``python SCRIPT`` runs it."""
        self._runs += 1
        out, err = self._folder / f"{self._runs}.out", self._folder / f"{self._runs}.err"
        self._proc.stdin.write(json.dumps({"script": str(script), "out": str(out), "err": str(err)}) + "\n")
        self._proc.stdin.flush()
        ready, _, _ = select.select([self._proc.stdout], [], [], self._timeout)
        if not ready:
            self._proc.kill()
            raise subprocess.TimeoutExpired(str(script), self._timeout)
        line = self._proc.stdout.readline()
        assert line, f"the script runner ended (exit {self._proc.wait()})"
        return json.loads(line), out.read_text(), err.read_text()

    def close(self) -> None:
        """Ends the interpreter (its children have ended: each run waits for its own)."""
        self._proc.stdin.close()
        self._proc.wait(timeout=60)

    def __enter__(self) -> "Scripts":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
