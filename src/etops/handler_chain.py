"""Keeps etops' fault handler in front of the handlers Python code installs later.

etops' handler for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT (_native/fault_trap.c)
traps faults inside kernel calls and hands every other one on to the handler it
displaced. Python installs and removes handlers of those signals after ``import
etops`` through three functions, which this module wraps so that etops' handler
goes back on top right after (``_native.trap_faults``), chaining to whatever they
left in place:

- ``faulthandler.enable()``: its handler would otherwise see a kernel's fault first
  and report it as fatal;
- ``faulthandler.disable()``: it restores the handler it found, which may be older
  than etops' (``python -X faulthandler``): etops' would be gone;
- ``signal.signal()`` for one of the five signals: Python's handler would catch a
  kernel's trap and, never returning to Python, run the faulting instruction forever.

``signal.signal`` is wrapped where it looks its function up at each call
(``_signal.signal``), so names imported from ``signal`` before etops are covered
too. Handlers a C library installs are checked when a call meets a new argument
signature (kernel_call.c). Core: imports faulthandler, _signal and etops._native.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub: the C module signal.signal calls
import faulthandler
import functools
import signal
from typing import Any, Callable

from . import _native

#: the signals whose handler etops keeps on top
HANDLED_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT})


def _then_trap(function: Callable[..., Any], only_for_handled: bool) -> Callable[..., Any]:
    """`function`, then etops' handler back on top (when `only_for_handled`: only
    when its first argument is one of HANDLED_SIGNALS)."""

    @functools.wraps(function)
    def then_trap(*args: Any, **kwargs: Any) -> Any:
        result = function(*args, **kwargs)
        if not only_for_handled or (args and args[0] in HANDLED_SIGNALS):
            _native.trap_faults()
        return result

    return then_trap


def keep_on_top() -> None:
    """Wraps faulthandler.enable, faulthandler.disable and signal.signal once per
    process (a second call, a reload of etops, wraps nothing again)."""
    for module, name, only_for_handled in ((faulthandler, "enable", False), (faulthandler, "disable", False),
                                           (_signal, "signal", True)):
        function = getattr(module, name)
        if not hasattr(function, "__wrapped__"):
            setattr(module, name, _then_trap(function, only_for_handled))
