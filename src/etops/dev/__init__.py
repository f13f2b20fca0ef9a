"""The kernel-development loop on an ExecuTorch checkout: edit a kernel file, and in
seconds it is built, swapped in, checked against ATen and the built-in kernel it
replaced, and timed against both.

    result = etops.dev("executorch/kernels/portable/cpu/op_add.cpp")
    print(result)            # build, conformance vs ATen and vs the built-in, A/B timing, verdict
    result.exit_code         # 0 agrees, 1 a finding stands, 2 a file did not build
    result.restore()         # the built-in kernels back (else they stay swapped for the session)

    etops.dev.watch("op_add.cpp", on_round=print)   # again on every save

For each file: the checkout (``checkout``: source root, YAML, operators the file
implements, headers it includes), the build and swap (``install``: one kernel set
in etops.custom's cache, overrides / registrations), conformance against ATen and
the replaced kernel (``check``), A/B timing (``etops.bench.ab``), the report
(``report``), one round of all of it (``loop``) and the watch loop (``watch``). ``load`` gives the other commands
``--load``. May import the core, etops.custom, etops.conformance and etops.bench.
``etops.dev`` is this module, callable as ``etops.dev(paths)``.
"""

from __future__ import annotations

import sys
import types

from .checkout import CheckoutError
from .loop import CHECK_BUDGET, dev, run_file  # noqa: F401 - etops.dev's API
from .report import DevResult, FileResult
from .watch import watch


class _CallableModule(types.ModuleType):
    def __call__(self, paths, **options) -> DevResult:
        return dev(paths, **options)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["CheckoutError", "DevResult", "FileResult", "dev", "run_file", "watch"]
