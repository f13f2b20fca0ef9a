"""A kernel file of an ExecuTorch checkout (or an out-of-tree folder laid out the
same way), below every tool that works on one (dev, gtest, conformance, bench,
fuzz, upstream): finding the checkout, its kernel YAML and the headers a file
includes (``layout``), building the file against the installed wheel and swapping
its kernels in (``install``; ``self_registering``: the files that cannot be), and
``--load`` for every command (``load``).

May import the core and etops.custom; never dev, gtest, conformance, bench or any
other tool built on it.
"""

from __future__ import annotations

from ..errors import CheckoutError, NoOperators
from .layout import find_checkout

__all__ = ["CheckoutError", "NoOperators", "find_checkout"]
