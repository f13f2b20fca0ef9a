"""The kernel-development loop on an ExecuTorch checkout: edit a kernel file, and in
seconds it is built, swapped in, judged as ``etops check`` judges (guarded), next to
the same file before the edit (git HEAD, or the wheel's built-in), and timed
against it.

    result = etops.dev("executorch/kernels/portable/cpu/op_add.cpp")
    print(result)            # build (and the base's), cases per operator, findings new / also in base, timing, verdict
    result.exit_code         # 0 no new finding, 1 a new finding, 2 a build error, 3 an operator got no case
    result.restore()         # the built-in kernels back (else they stay swapped for the session)

    etops.dev.watch("op_add.cpp", on_round=print)   # again on every save

For each file: the checkout, the build and swap (etops.checkout: source root,
YAML, operators the file implements, headers it includes; one kernel set in
etops.custom's cache, overrides / registrations), the base (``base``: the file
at a git revision, built with the same flags; ``swap``: the base's kernels swapped
in or made callable), the cases (``cases``, ``derived``), check's judge on both
sides (``judge``; on a fresh cache, the edit's early cases before discovery:
``early``), one round of it all (``loop``), the reproducers (``reproduce``), the timing (``timing``;
``llm_timing``: the LLM kernels' model steps), the upstream tests (``upstream_tests``; ``upstream_python``: an
LLM file's Python tests, routed to the registry), the
report (``report``, ``text``), ``--changed`` (``changes``) and the watch loop
(``watch``); ``load`` is etops.checkout.load's name in the reproducers. A tool on
top: may import the core, etops.checkout, etops.custom, etops.conformance,
etops.gtest, etops.guard and etops.bench; nothing but the CLI imports it.
``etops.dev`` is this module, callable as ``etops.dev(paths)``.
"""

from __future__ import annotations

import sys
import types

from ..checkout.layout import CheckoutError
from .base import Base
from .loop import CHECK_BUDGET, dev, run_file  # noqa: F401 - etops.dev's API
from .report import DevResult, FileResult
from .watch import watch


class _CallableModule(types.ModuleType):
    def __call__(self, paths, **options) -> DevResult:
        return dev(paths, **options)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["Base", "CheckoutError", "DevResult", "FileResult", "dev", "run_file", "watch"]
