"""etops.process_end: one wording for how a child process ended, whichever tool ran it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from etops.process_end import from_exit_code, from_wait_status, signal_name


def _wait_status(code: str) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            for signo in (signal.SIGSEGV, signal.SIGABRT):
                signal.signal(signo, signal.SIG_DFL)  # no handler of pytest's or etops': the signal ends it quietly
            exec(code)  # noqa: S102 - the child's way to end
        finally:
            os._exit(0)
    return os.waitpid(pid, 0)[1]


def test_a_wait_status_and_an_exit_code_read_alike():
    killed = _wait_status("os.kill(os.getpid(), signal.SIGSEGV)")
    assert from_wait_status(killed) == "killed by SIGSEGV"
    assert from_wait_status(_wait_status("os._exit(3)")) == "exited with status 3"
    assert from_wait_status(_wait_status("os._exit(134)")) == "ended by SIGABRT (exit status 134)"  # a reporter's 128 + signal
    ran = subprocess.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"])
    assert from_exit_code(ran.returncode) == "killed by SIGABRT"
    assert from_exit_code(0) == "exited with status 0" and from_exit_code(None) == "still running"
    assert signal_name(signal.SIGFPE) == "SIGFPE" and signal_name(99) == "signal 99"
