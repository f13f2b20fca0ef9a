"""ExecuTorch's log messages, routed into Python's ``logging`` (logger
``etops.executorch``) instead of raw stderr. What a failing kernel logged goes
into its KernelError instead (see _native/kernel_call.c).

Messages logged at Error (or Fatal) level by a kernel whose call succeeded, or
drained during a kernel's call from the queue of messages logged outside calls
(a kernel's threadpool workers), are also counted and kept here (``errors_since``):
a check's case whose kernel logged an error is no silent pass. Messages logged
outside any etops call by someone else's code (``drain_as``: an ATen reference
built on the same ExecuTorch runtime) are told apart and logged at DEBUG."""

from __future__ import annotations

import collections
import logging

from . import _native

logger = logging.getLogger("etops.executorch")

_LEVELS = {"D": logging.DEBUG, "I": logging.INFO, "E": logging.ERROR, "F": logging.CRITICAL}
#: how many error-level messages kernels logged in this process, and the last of them (kernel, message)
_errors = {"count": 0}
_recent: collections.deque = collections.deque(maxlen=64)


def _note_error(op, message: str) -> None:
    _errors["count"] += 1
    _recent.append((str(op) if op is not None else "", message))


def flush(op=None, text: str = "", error: bool = False) -> None:
    """Sends queued ExecuTorch messages, and `text` logged by a successful call of
    `op`, to the ``etops.executorch`` logger. `error`: `text` holds a message the
    call logged at Error or Fatal level (the bridge's structured flag): it is
    logged at ERROR and counted (``errors_since``), as are queued error-level
    messages drained here."""
    for level, file, func, line, message in _native.drain_logs() or ():
        severity = _LEVELS.get(level, logging.INFO)
        if func == "register_pal":  # its one message: a second platform layer (etops and executorch's pybindings both install one)
            severity = logging.DEBUG
        if severity >= logging.ERROR:
            _note_error(op, message)
        logger.log(severity, "%s (%s:%d %s)", message, file, line, func)
    if text and error:
        _note_error(op, text)
        logger.error("%s logged an error in a call that succeeded: %s", op, text)
    elif text:
        logger.info("%s: %s", op, text)


def errors_logged() -> int:
    """A mark: how many error-level messages kernels have logged so far (for ``errors_since``)."""
    return _errors["count"]


def errors_since(mark: int) -> list[str]:
    """The error-level messages kernels logged since `mark` (``errors_logged()``),
    each as "kernel: message" (at most the last 64)."""
    n = min(_errors["count"] - mark, len(_recent))
    return [f"{op}: {message}" if op else message for op, message in list(_recent)[len(_recent) - n:]] if n > 0 else []


def drain_as(source: str) -> int:
    """Takes the messages ExecuTorch queued outside etops' calls as `source`'s
    (code that ran ExecuTorch outside etops, e.g. an ATen wrapper of a kernel):
    logged at DEBUG under its name, never counted as a kernel's. Returns how many."""
    drained = _native.drain_logs() or ()
    for level, file, func, line, message in drained:
        logger.debug("%s logged (%s): %s (%s:%d %s)", source, level, message, file, line, func)
    return len(drained)
