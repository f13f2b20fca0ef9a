"""Upstream's LLM custom-ops library (``llama::*``, ``preprocess::*`` kernels and their
torch ops): its namespaces and its loading, for ``etops check`` and for ``etops dev``
on a file of ``extension/llm/custom_ops`` (which needs its operators' schemas and
the kernels it replaces) and for ``etops gtest`` on their tests. Core module: imports
the standard library only."""

from __future__ import annotations


#: the namespaces of the kernels ExecuTorch's LLM custom-ops library registers
LLM_NAMESPACES = ("llama::", "preprocess::")
#: the module of upstream's package that loads its library (whose .so defines the
#: preprocess ops for torch too)
LIBRARY = "executorch.extension.llm.custom_ops.custom_ops"


def load_llm_custom_ops() -> None:
    """Imports upstream's LLM custom-ops package and the module of it that loads
    its library (the llama::* and preprocess::* kernels, and their ATen
    implementations for torch), hiding what the torchao it imports warns and logs."""
    import importlib
    import logging
    import warnings

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
