"""Kernel files that register their kernels themselves: a static initializer
(``EXECUTORCH_LIBRARY(ns, "op.out", fn)``, ``register_kernel(Kernel("ns::op.out",
boxed))``) instead of an entry of a kernel YAML, as the LLM custom ops of
``extension/llm/custom_ops`` do. Their library registers the same names when it
loads, and a second registration aborts the process, so etops dev builds such a
file with its registrations captured (etops.custom.capture) and overrides each
operator with the kernel the file registered for it. What the registrations are
is read here from the source (``registrations``); a file whose registrations
etops cannot read or cannot swap in (a kernel key, a name that is no string
literal, one operator twice) is refused before any build, saying why (``refusal``).

Reads source text only (what the file is, never a verdict); imports the standard
library only."""

from __future__ import annotations

import re
from dataclasses import dataclass

#: EXECUTORCH_LIBRARY(ns, "op.overload", function)
_LIBRARY_MACRO = re.compile(r'\bEXECUTORCH_LIBRARY\s*\(\s*(\w+)\s*,\s*"([^"]+)"\s*,\s*([\w:]+)\s*\)')
#: register_kernel(s)(... Kernel("ns::op.overload", boxed_function) ...): a fallback kernel
_KERNEL_RECORD = re.compile(r'\bregister_kernels?\s*\([^;]*?\bKernel\s*\(\s*"([\w:.]+)"\s*,\s*([\w:]+)\s*\)', re.S)
#: every use, read or not: what the two above do not read is a registration etops cannot swap in
_ANY_MACRO = re.compile(r"^(?!\s*#\s*define)[^\n]*?\bEXECUTORCH_LIBRARY\s*\(", re.M)
_ANY_RECORD = re.compile(r"\bregister_kernels?\s*\([^;]*?\bKernel\s*\(", re.S)


@dataclass(frozen=True)
class Registration:
    """One kernel a source registers at load: the operator, the line of the
    registration and the C++ function it names (typed for the macro, boxed for a
    ``Kernel`` record)."""

    op: str
    line: int
    function: str


def _line(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def registrations(text: str) -> list[Registration]:
    """The fallback kernels `text` (a C++ source) registers at load, in source order."""
    found = [Registration(f"{m.group(1)}::{m.group(2)}", _line(text, m.start()), m.group(3)) for m in _LIBRARY_MACRO.finditer(text)]
    found += [Registration(m.group(1), _line(text, m.start()), m.group(2)) for m in _KERNEL_RECORD.finditer(text)]
    return sorted(found, key=lambda r: r.line)


def static_registrations(text: str) -> list[tuple[str, int]]:
    """(operator, line) of each kernel `text` registers at load, read or not (a use
    of the macro or of a Kernel record etops cannot read is named ``?``)."""
    read = {r.line: r.op for r in registrations(text)}
    lines = sorted({_line(text, m.start()) for m in _ANY_MACRO.finditer(text)}
                   | {_line(text, m.start()) for m in _ANY_RECORD.finditer(text)} | set(read))
    return [(read.get(line, "?"), line) for line in lines]


def refusal(path, text: str) -> str | None:
    """Why etops dev cannot swap in the kernels kernel file `path` registers itself,
    or None (it registers none, or only fallback kernels named by string literals,
    each operator once)."""
    uses = static_registrations(text)
    if not uses:
        return None
    problems = [f"line {line}: a registration etops cannot read (a kernel key, or a name that is no string literal)"
                for op, line in uses if op == "?"]
    ops = [r.op for r in registrations(text)]
    problems += [f"{op} is registered {ops.count(op)} times" for op in dict.fromkeys(ops) if ops.count(op) > 1]
    if not problems:
        return None
    return (f"{path}: registers its kernels itself at load, and etops dev cannot swap them in: {'; '.join(problems)} "
            f"(it overrides one fallback kernel per operator, each registered as EXECUTORCH_LIBRARY(ns, \"op.out\", fn) "
            f"or register_kernel(Kernel(\"ns::op.out\", boxed_fn)); docs/llm.md)")
