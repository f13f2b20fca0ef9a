"""How extensions extend the core without the core importing them.

The core (registry, kernel objects, the call path) never imports an extension
(``custom``, ``delegate``, ``edge``, ...). An extension that changes what the core
reports registers a hook here when it is imported; until then the core's own
answer stands (no extension loaded means no kernel of its kind exists).

- origin provider: ``KernelInfo.origins`` asks it where each registered kernel of
  an operator comes from (``etops.custom`` knows custom, Python and overridden
  kernels); without one, every kernel is built-in or from a library.
- ``extension(name)``: a name of the public ``etops`` namespace that an extension
  provides (``register_kernel``), loaded on first use through the package's lazy
  table.
"""

from __future__ import annotations

import sys
from typing import Callable

_origin_provider: Callable | None = None


def set_origin_provider(provider: Callable) -> None:
    """`provider(name) -> list[KernelOrigin]` answers ``KernelInfo.origins`` from
    now on (the last one set wins)."""
    global _origin_provider
    _origin_provider = provider


def origin_provider() -> Callable | None:
    """The registered origin provider, or None when no extension registered one."""
    return _origin_provider


def extension(name: str):
    """The public ``etops.<name>`` an extension provides, importing the extension on
    first use (the package's lazy table says which module)."""
    return getattr(sys.modules[__package__], name)
