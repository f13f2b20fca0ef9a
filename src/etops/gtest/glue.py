"""The headers a kernel test includes that a build of ExecuTorch would generate:
``FunctionHeaderWrapper.h`` (upstream: the kernel set's ``Functions.h``), whose
``torch::executor::<namespace>::<name>_outf`` overloads box their arguments and call
the kernel the registry holds by operator name and kernel key (``etops_gtest.h``),
and ``supported_features.h`` / ``.cpp`` from the checkout's own generator.

C++ parameter types come from the schema the way custom kernels get theirs
(``etops.custom.codegen.cpp_args``); which argument the return slot and the results
alias, from the argument plan (``etops.plan.build_plan``)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..custom.codegen import cpp_args
from ..dev.checkout import YamlKernel
from ..dev.install import schema_of
from ..errors import BuildError, CheckoutError, EtopsError
from ..plan import build_plan

#: C++ type of a fresh scalar return -> the EValue accessor that reads it
_FRESH = {"int64_t": "toInt", "double": "toDouble", "bool": "toBool"}


@dataclass(frozen=True)
class Overload:
    """One generated function: the operator and its C++ text."""

    op: str
    function: str  #: namespace-qualified C++ name, e.g. aten::add_outf
    code: str


def _fits(schema, function: str) -> bool:
    """Whether `schema` is the kind of variant C++ name `function` calls: an out
    variant for ``<op>_outf``, an in-place one (a written argument, no out) for ``<op>_``."""
    if function.endswith("_outf"):
        return any(a.is_out for a in schema.arguments)
    written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    return bool(written) and not any(a.is_out for a in schema.arguments)


def operator_base(function: str) -> str:
    """The operator name a generated C++ function is named after: ``add_outf`` ->
    ``add``, ``copy_`` -> ``copy_``."""
    return function[: -len("_outf")] if function.endswith("_outf") else function


def candidates(namespace: str, function: str, entries: list[YamlKernel], registered: list[str]) -> list[str]:
    """Operator names ``<namespace>::<op>.<overload>`` that C++ function `function`
    (``<op>_outf`` or ``<op>_``) may mean: the kernel YAMLs' (what upstream's
    Functions.h is generated from), else the registry's."""
    bare = f"{namespace}::{operator_base(function)}"  # an overload-less name: the default overload

    def match(name: str) -> bool:
        return name == bare or name.startswith(bare + ".")

    found = [e.op for e in entries if match(e.op)] or [n for n in registered if match(n)]
    return list(dict.fromkeys(found))


def overload(op: str, schema, function: str) -> Overload:
    """The C++ definition of `function` calling operator `op` through the registry."""
    args, fresh = cpp_args(op, schema)
    plan = build_plan(op, schema)
    slot = plan.args[-1].extra  # the argument the return slot holds again (None: a fresh value)
    params = ", ".join(["KernelRuntimeContext& context"] + [f"{a.param} a{i}" for i, a in enumerate(args)])
    body = ["  Stack s;"] + [f"  s.push(a{i});" for i in range(len(args))]
    call = f"s.call(context, {json.dumps(op)}, {-1 if slot is None else slot})"
    if fresh is not None:
        ret = fresh
        body.append(f"  return static_cast<{fresh}>({call}.{_FRESH.get(fresh, 'toInt')}());")
    else:
        body.append(f"  {call};")
        outs = list(plan.returns)
        if not outs or any(args[i].param != "Tensor&" for i in outs):
            ret = "void"  # no result, or results aliasing a list of outs
        elif len(outs) == 1:
            ret = "Tensor&"
            body.append(f"  return a{outs[0]};")
        else:
            ret = "std::tuple<" + ", ".join(["Tensor&"] * len(outs)) + ">"
            body.append(f"  return {ret}(" + ", ".join(f"a{i}" for i in outs) + ");")
    name = function.rsplit("::", 1)[-1]
    code = "\n".join([f"// {op}: {schema}", f"inline {ret} {name}({params}) {{", *body, "}"])
    return Overload(op, function, code)


def functions_header(functions, entries: list[YamlKernel], registered: list[str]) -> tuple[str, list[str]]:
    """(FunctionHeaderWrapper.h, notes) for the ``(namespace, C++ name)`` functions a
    test calls. A function no YAML or registered operator provides is left out (the
    test then fails to compile, naming it; the note says why); overloads whose C++
    parameters coincide keep the first."""
    by_op = {e.op: e for e in entries}
    notes: list[str] = []
    blocks: dict[str, list[Overload]] = {}
    for namespace, function in functions:
        seen: set[tuple[str, ...]] = set()
        qualified = f"{namespace}::{function}"
        for op in candidates(namespace, function, entries, registered):
            try:
                entry = by_op.get(op)
                schema = schema_of(entry) if entry is not None else _registered_schema(op)
                if not _fits(schema, function):
                    continue
                ov = overload(op, schema, qualified)
            except (EtopsError, RuntimeError) as exc:
                notes.append(f"{qualified}: {op} left out: {str(exc).splitlines()[0]}")
                continue
            key = tuple(a.param for a in cpp_args(op, schema)[0])
            if key in seen:
                notes.append(f"{qualified}: {op} left out (same C++ parameters as an earlier overload)")
                continue
            seen.add(key)
            blocks.setdefault(namespace, []).append(ov)
        if not seen:
            kind = "out" if function.endswith("_outf") else "in-place"
            notes.append(f"{qualified}: no {kind} variant of {namespace}::{operator_base(function)} in the checkout's "
                         "kernel YAMLs or the registry")
    lines = [
        "// FunctionHeaderWrapper.h - generated by etops (etops.gtest): every <op>_outf the test",
        "// calls goes through the kernel registry of the process running the test.",
        "#pragma once",
        '#include "etops_gtest.h"',
        "#include <executorch/runtime/kernel/kernel_includes.h>",
        "",
    ]
    for namespace, overloads in blocks.items():
        codes = [ov.code for ov in overloads]
        lines += [f"namespace etops_gtest {{ namespace ops_{namespace} {{", *codes, f"}} }}  // namespace etops_gtest::ops_{namespace}", ""]
        exported = sorted({ov.function.rsplit("::", 1)[-1] for ov in overloads})
        lines += [f"namespace torch {{ namespace executor {{ namespace {namespace} {{"]
        lines += [f"using ::etops_gtest::ops_{namespace}::{n};" for n in exported]
        lines += [f"}} }} }}  // namespace torch::executor::{namespace}", ""]
    return "\n".join(lines) + "\n", notes


def _registered_schema(op: str):
    from ..schemas import find_schema

    found, why = find_schema(op)
    if found is None:
        raise CheckoutError(f"{op}: {why}")
    return found


def supported_features(spec: Path | None, definition: Path | None, generator: Path | None) -> tuple[str, str]:
    """(supported_features.h, supported_features.cpp) from the checkout's
    ``kernels/test/gen_supported_features.py``: the header from
    ``supported_features.yaml``, the definition from the kernel set's
    ``supported_features_def.yaml`` (none: every feature at its default). BuildError
    when the checkout lacks the generator or the YAML, or the generator fails."""
    if generator is None or spec is None:
        raise BuildError("the test includes supported_features.h, and the checkout has no kernels/test/gen_supported_features.py "
                         "and supported_features.yaml to generate it from")
    header = _generate(generator, spec)
    if definition is None:
        cpp = ("#include <executorch/kernels/test/supported_features.h>\n"
               "namespace torch::executor::testing {\n"
               "SupportedFeatures* SupportedFeatures::get() { static SupportedFeatures instance; return &instance; }\n"
               "}  // namespace torch::executor::testing\n")
    else:
        cpp = _generate(generator, definition)
    return header, cpp


def _generate(generator: Path, yaml_path: Path) -> str:
    proc = subprocess.run([sys.executable, str(generator), str(yaml_path)], capture_output=True, text=True,
                          cwd=str(generator.parent))
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise BuildError(f"{generator} {yaml_path.name} failed: {tail}")
    return proc.stdout
