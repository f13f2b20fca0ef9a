"""How a child process ended, in words, the same for every tool that runs one
(the guard and task processes, the conformance workers, the fuzzer's, the upstream
tests): "killed by SIGSEGV", "ended by SIGABRT (exit status 134)" for a process
whose fault reporter ended it with 128 + the signal, "exited with status 3".
Core module: imports the standard library only."""

from __future__ import annotations

import os
import signal


def signal_name(signo: int) -> str:
    """'SIGSEGV', or 'signal 99' for a number Python does not name."""
    try:
        return signal.Signals(signo).name
    except ValueError:
        return f"signal {signo}"


def from_wait_status(status: int) -> str:
    """How a process ended, from its wait status (os.waitpid)."""
    if os.WIFSIGNALED(status):
        return f"killed by {signal_name(os.WTERMSIG(status))}"
    return from_exit_code(os.WEXITSTATUS(status) if os.WIFEXITED(status) else status)


def exit_code(status: int) -> int:
    """A wait status (os.waitpid) as the exit code subprocess and multiprocessing give:
    negative, the signal that killed the process; else its exit status."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def from_exit_code(code: int | None) -> str:
    """How a process ended, from its exit code as subprocess and multiprocessing
    give it (negative: the signal that killed it; None: still running)."""
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by {signal_name(-code)}"
    if code > 128 and code - 128 in signal.Signals._value2member_map_:
        return f"ended by {signal_name(code - 128)} (exit status {code})"
    return f"exited with status {code}"
