"""Upstream's LLM custom-ops library (``llama::*``, ``preprocess::*`` kernels and their
torch ops): its namespaces and its loading, for ``etops check`` and for ``etops dev``
on a file of ``extension/llm/custom_ops`` (which needs its operators' schemas and
the kernels it replaces). Imports the standard library and references.llm only."""

from __future__ import annotations


#: the namespaces of the kernels ExecuTorch's LLM custom-ops library registers
LLM_NAMESPACES = ("llama::", "preprocess::")


def load_llm_custom_ops() -> None:
    """Imports upstream's LLM custom-ops package and the module of it that loads
    its library (the llama::* and preprocess::* kernels, and their ATen
    implementations for torch), hiding what the torchao it imports warns and logs."""
    import importlib
    import logging
    import warnings

    from .references.llm import LIBRARY

    logger = logging.getLogger("torchao")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importlib.import_module("executorch.extension.llm.custom_ops")
            importlib.import_module(LIBRARY)
    finally:
        logger.setLevel(level)
