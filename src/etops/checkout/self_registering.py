"""Kernel files that register their kernels themselves: a static initializer
(``EXECUTORCH_LIBRARY(ns, "op.out", fn)``, ``register_kernel(Kernel("ns::op.out",
...))``) instead of an entry of a kernel YAML, as the LLM custom ops of
``extension/llm/custom_ops`` do. Their library registers the same names when it
loads, so a build of the file loaded beside it would register them again, which
ExecuTorch aborts the process on; etops dev refuses such a file before building
it, naming the registrations (docs/llm.md says what swapping them in would take).

Reads source text only (what the file is, never a verdict); imports the standard
library only."""

from __future__ import annotations

import re

_LIBRARY_MACRO = re.compile(r'\bEXECUTORCH_LIBRARY\s*\(\s*(\w+)\s*,\s*"([^"]+)"')
_KERNEL_RECORD = re.compile(r'\bregister_kernels?\s*\([^;]*?\bKernel\s*\(\s*"([\w:.]+)"', re.S)


def static_registrations(text: str) -> list[tuple[str, int]]:
    """(operator, line) of each kernel `text` (a C++ source) registers at load."""
    found = [(f"{m.group(1)}::{m.group(2)}", text.count("\n", 0, m.start()) + 1) for m in _LIBRARY_MACRO.finditer(text)]
    found += [(m.group(1), text.count("\n", 0, m.start()) + 1) for m in _KERNEL_RECORD.finditer(text)]
    return sorted(found, key=lambda item: item[1])


def refusal(path, text: str) -> str | None:
    """Why etops dev cannot swap kernel file `path` in (it registers its kernels
    itself), or None when it does not."""
    found = static_registrations(text)
    if not found:
        return None
    named = ", ".join(f"{op} (line {line})" for op, line in found[:4]) + (f" and {len(found) - 4} more" if len(found) > 4 else "")
    return (f"{path}: registers its kernels itself at load ({named}); the library that ships them registers the same "
            f"names, so a build of this file would register them twice, which ExecuTorch aborts on. etops dev swaps in "
            f"kernels named by a kernel YAML only; check these kernels with 'etops check --llm-custom-ops' "
            f"and their upstream tests with 'python -m etops.conformance.llm_upstream' (docs/llm.md)")
