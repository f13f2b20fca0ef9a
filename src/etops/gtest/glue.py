"""The headers a kernel test includes that a build of ExecuTorch would generate:
``FunctionHeaderWrapper.h`` (upstream: the kernel set's ``Functions.h``), whose
``torch::executor::<namespace>::<name>_outf`` overloads box their arguments and call
the kernel the registry holds by operator name and kernel key (``etops_gtest.h``);
a kernel folder's ``NativeFunctions.h`` (upstream: generated from the folder's
YAML), whose ``torch::executor::native::<kernel>`` functions do the same for the
kernels' own C++ names; and ``supported_features.h`` / ``.cpp`` from the
checkout's own generator.

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
from ..checkout.layout import YamlKernel
from ..checkout.install import schema_of
from ..errors import BuildError, CheckoutError, EtopsError
from ..plan import build_plan
from .layout import operator_base

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


def candidates(namespace: str, function: str, entries: list[YamlKernel], registered: list[str]) -> list[str]:
    """Operator names ``<namespace>::<op>.<overload>`` that C++ function `function`
    (``<op>_outf`` or ``<op>_``) may mean: the kernel YAMLs' (what upstream's
    Functions.h is generated from), else the registry's."""
    bare = f"{namespace}::{operator_base(function)}"  # an overload-less name: the default overload

    def match(name: str) -> bool:
        return name == bare or name.startswith(bare + ".")

    found = [e.op for e in entries if match(e.op)] or [n for n in registered if match(n)]
    return list(dict.fromkeys(found))


def _returns(args, fresh: str | None, plan, call: str) -> tuple[str, list[str]]:
    """(C++ return type, the body's lines from the call on) of a generated function."""
    if fresh is not None:
        return fresh, [f"  return static_cast<{fresh}>({call}.{_FRESH.get(fresh, 'toInt')}());"]
    body = [f"  {call};"]
    outs = list(plan.returns)
    if not outs or any(args[i].param != "Tensor&" for i in outs):
        return "void", body  # no result, or results aliasing a list of outs
    if len(outs) == 1:
        return "Tensor&", body + [f"  return a{outs[0]};"]
    ret = "std::tuple<" + ", ".join(["Tensor&"] * len(outs)) + ">"
    return ret, body + [f"  return {ret}(" + ", ".join(f"a{i}" for i in outs) + ");"]


def overload(op: str, schema, function: str, context_free: bool = False) -> Overload:
    """The C++ definition of `function` calling operator `op` through the registry.
    With `context_free`, also the overload without the context (upstream's kernels
    define one for some operators, and their tests call it): it runs the call on a
    context of its own, whose failure is a failure of the test (etops_gtest::OwnContext)."""
    args, fresh = cpp_args(op, schema)
    plan = build_plan(op, schema)
    slot = plan.args[-1].extra  # the argument the return slot holds again (None: a fresh value)
    typed = [f"{a.param} a{i}" for i, a in enumerate(args)]
    params = ", ".join(["KernelRuntimeContext& context"] + typed)
    call = f"s.call(context, {json.dumps(op)}, {-1 if slot is None else slot})"
    ret, tail = _returns(args, fresh, plan, call)
    body = ["  Stack s;"] + [f"  s.push(a{i});" for i in range(len(args))] + tail
    name = function.rsplit("::", 1)[-1]
    lines = [f"// {op}: {schema}", f"inline {ret} {name}({params}) {{", *body, "}"]
    if context_free:
        forwarded = ", ".join(["own.context"] + [f"a{i}" for i in range(len(args))])
        lines += [f"inline {ret} {name}({', '.join(typed)}) {{", f"  OwnContext own({json.dumps(op)});",
                  f"  return {name}({forwarded});", "}"]
    return Overload(op, function, "\n".join(lines))


def _blocks(namespace: str, overloads: list[Overload], inner: str) -> list[str]:
    """The generated functions in ``etops_gtest::<inner>``, each made visible in
    ``torch::executor::<namespace>`` by a using-declaration."""
    lines = [f"namespace etops_gtest {{ namespace {inner} {{", *[ov.code for ov in overloads],
             f"}} }}  // namespace etops_gtest::{inner}", ""]
    exported = sorted({ov.function.rsplit("::", 1)[-1] for ov in overloads})
    lines += [f"namespace torch {{ namespace executor {{ namespace {namespace} {{"]
    lines += [f"using ::etops_gtest::{inner}::{n};" for n in exported]
    lines += [f"}} }} }}  // namespace torch::executor::{namespace}", ""]
    return lines


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
        lines += _blocks(namespace, overloads, f"ops_{namespace}")
    return "\n".join(lines) + "\n", notes


def _kernel_name(entry: YamlKernel) -> str:
    return entry.function.rsplit("::", 1)[-1]


def native_headers(names, folders: dict[str, list[YamlKernel]], fallback: list[YamlKernel]) -> tuple[dict[str, str], list[str]]:
    """({folder: ``<folder>/NativeFunctions.h``}, notes) for the kernel folders a test
    includes the header of (`folders`: folder -> its YAMLs' entries) and the kernel
    C++ names `names` it uses as ``torch::executor::native::<name>``. A name goes to
    the first folder whose YAML names that kernel (``kernel_name:
    torch::executor::quantize_per_tensor_out``), else to the first folder with the
    operators of `fallback` (every kernel YAML of the checkout) that name it: each
    operator becomes a function of that name calling it through the registry, with
    the context and without it. A name no YAML gives is left out (the test then
    fails to compile, naming it; the note says why)."""
    notes: list[str] = []
    chosen: dict[str, list[Overload]] = {folder: [] for folder in folders}
    for name in names:
        home = next((f for f, es in folders.items() if any(_kernel_name(e) == name for e in es)), None)
        found = [e for e in (folders[home] if home is not None else fallback) if _kernel_name(e) == name]
        if not found or not folders:
            notes.append(f"torch::executor::native::{name}: no kernel of that name in the checkout's kernel YAMLs")
            continue
        seen: set[tuple[str, ...]] = set()
        for entry in found:
            try:
                schema = schema_of(entry)
                key = tuple(a.param for a in cpp_args(entry.op, schema)[0])
                if key not in seen:  # else the same kernel under two names of one operator
                    seen.add(key)
                    chosen[home or next(iter(folders))].append(overload(entry.op, schema, f"native::{name}", context_free=True))
            except (EtopsError, RuntimeError) as exc:
                notes.append(f"torch::executor::native::{name}: {entry.op} left out: {str(exc).splitlines()[0]}")
    texts = {}
    for folder, overloads in chosen.items():
        lines = [
            f"// {folder}/NativeFunctions.h - generated by etops (etops.gtest): every kernel the test",
            "// calls by its C++ name goes through the kernel registry of the process running the test.",
            "#pragma once",
            '#include "etops_gtest.h"',
            "#include <executorch/runtime/kernel/kernel_includes.h>",
            "",
        ]
        if overloads:
            lines += _blocks("native", overloads, "native_" + folder.replace("/", "_"))
        texts[folder] = "\n".join(lines) + "\n"
    return texts, notes


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
