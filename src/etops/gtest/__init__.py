"""Extension: ``etops gtest`` / ``etops.gtest(...)``, upstream ExecuTorch's kernel
tests (``kernels/test/op_<name>_test.cpp`` of a checkout, a kernel folder's own
``kernels/<folder>/test/``, or an out-of-tree folder laid out the same way) built
against the installed wheel and run against the kernels registered in this
process, without building ExecuTorch.

Owns: the test files' layout and a kernel file's tests and kernel set (layout.py),
the headers a build of ExecuTorch would generate for them (glue.py,
runtime_source.py: every ``<op>_outf`` and ``native::<kernel>`` through the
registry by name and kernel key), their build with googletest (build.py, on
etops.custom's toolchain), the isolated runs (run.py: a fork per binary, a crash
ends only its test) and the report (report.py; session.py ties them together).

May import: the core, and the public modules of etops.custom (toolchain, codegen,
compile flags, the libraries that registered kernels), etops.checkout (checkout
reading, schemas of YAML entries, a source's own registrations); the core's
llm_library loads upstream's LLM kernels, whose tests link their library. Nothing in
the core imports it; etops.dev, etops.upstream and the CLI do.
"""

from __future__ import annotations

import sys
import types

from .build import find_googletest
from .report import FileResult, GtestResult
from .run import TestResult
from .session import gtest

__all__ = ["gtest", "GtestResult", "FileResult", "TestResult", "find_googletest"]


class _CallableModule(types.ModuleType):
    def __call__(self, paths, **options) -> GtestResult:
        return gtest(paths, **options)


sys.modules[__name__].__class__ = _CallableModule
