"""ExecuTorch's log messages, routed into Python's ``logging`` (logger
``etops.executorch``) instead of raw stderr. What a failing kernel logged goes
into its KernelError instead (see _native/kernel_call.c)."""

from __future__ import annotations

import logging

from . import _native

logger = logging.getLogger("etops.executorch")

_LEVELS = {"D": logging.DEBUG, "I": logging.INFO, "E": logging.ERROR, "F": logging.CRITICAL}


def flush(op=None, text: str = "") -> None:
    """Sends queued ExecuTorch messages, and `text` logged by a successful call of
    `op`, to the ``etops.executorch`` logger."""
    for level, file, func, line, message in _native.drain_logs() or ():
        severity = _LEVELS.get(level, logging.INFO)
        if message.startswith("register_pal() called multiple times"):
            severity = logging.DEBUG  # etops and executorch's pybindings both install one
        logger.log(severity, "%s (%s:%d %s)", message, file, line, func)
    if text:
        logger.info("%s: %s", op, text)
