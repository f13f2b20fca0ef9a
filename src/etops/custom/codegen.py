"""Schema -> C++: the typed signature a custom kernel function must have, the
prelude every kernel source sees first, and the boxed wrappers that unpack
ExecuTorch's EValue stack by the schema (tags checked, never ET_CHECKed).
May import the core only."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..errors import SchemaError

#: schema type (Optional stripped) -> (C++ parameter type, tag check, conversion), with
#: {v} the EValue. Optional types get std::optional<...> and toOptional<...>().
_CPP = {
    "Tensor": ("const Tensor&", "{v}.isTensor()", "{v}.toTensor()", "Tensor"),
    "List[Tensor]": ("TensorList", "{v}.isTensorList()", "{v}.toTensorList()", "TensorList"),
    "List[Optional[Tensor]]": ("ArrayRef<std::optional<Tensor>>", "{v}.isListOptionalTensor()", "{v}.toListOptionalTensor()", None),
    "number": ("const Scalar&", "{v}.isScalar()", "{v}.toScalar()", "Scalar"),
    "Scalar": ("const Scalar&", "{v}.isScalar()", "{v}.toScalar()", "Scalar"),
    "int": ("int64_t", "{v}.isInt()", "{v}.toInt()", "int64_t"),
    "SymInt": ("int64_t", "{v}.isInt()", "{v}.toInt()", "int64_t"),
    "float": ("double", "{v}.isDouble()", "{v}.toDouble()", "double"),
    "bool": ("bool", "{v}.isBool()", "{v}.toBool()", "bool"),
    "str": ("string_view", "{v}.isString()", "{v}.toString()", "string_view"),
    "List[int]": ("IntArrayRef", "{v}.isIntList()", "{v}.toIntList()", "IntArrayRef"),
    "List[SymInt]": ("IntArrayRef", "{v}.isIntList()", "{v}.toIntList()", "IntArrayRef"),
    "List[float]": ("ArrayRef<double>", "{v}.isDoubleList()", "{v}.toDoubleList()", "ArrayRef<double>"),
    "List[bool]": ("ArrayRef<bool>", "{v}.isBoolList()", "{v}.toBoolList()", "ArrayRef<bool>"),
    "ScalarType": ("ScalarType", "{v}.isInt()", "{v}.toScalarType()", "ScalarType"),
    "MemoryFormat": ("MemoryFormat", "{v}.isInt()", "{v}.toMemoryFormat()", "MemoryFormat"),
    "Layout": ("Layout", "{v}.isInt()", "{v}.toLayout()", "Layout"),
}

_SCALAR_RETURNS = {"int": "int64_t", "SymInt": "int64_t", "float": "double", "bool": "bool"}


def _strip_optional(t: str) -> tuple[str, bool]:
    if t.startswith("Optional[") and t.endswith("]"):
        return t[len("Optional[") : -1], True
    return t, False


@dataclass
class CppArg:
    name: str
    param: str  #: C++ parameter type
    check: str  #: C++ condition on the EValue `v`
    convert: str  #: C++ expression from `v`
    type_str: str


def cpp_args(name: str, schema) -> tuple[list[CppArg], str | None]:
    """The typed kernel's parameters (after KernelRuntimeContext&) and the C++ type of
    a fresh scalar return (None when the results are outs)."""
    args = []
    for a in schema.arguments:
        t, optional = _strip_optional(str(a.real_type))
        if t not in _CPP:
            raise SchemaError(f"{name}: argument '{a.name}' has type {a.real_type}, which etops cannot unbox for a custom kernel")
        param, check, convert, inner = _CPP[t]
        written = a.alias_info is not None and a.alias_info.is_write
        if t == "Tensor" and written and not optional:
            param = "Tensor&"
        if optional:
            if inner is None:
                raise SchemaError(f"{name}: argument '{a.name}' has type {a.real_type}, which etops cannot unbox")
            param = f"const std::optional<{inner}>&" if inner in ("Tensor", "Scalar") else f"std::optional<{inner}>"
            check = "({v}.isNone() || " + check + ")"
            convert = "{v}.toOptional<" + inner + ">()"
        args.append(CppArg(a.name, param, check, convert, str(a.real_type)))
    fresh = [r for r in schema.returns if not (r.alias_info is not None and r.alias_info.is_write)]
    ret = None
    if fresh:
        t, _ = _strip_optional(str(getattr(fresh[0], "real_type", fresh[0].type)))
        if len(schema.returns) != 1 or t not in _SCALAR_RETURNS:
            raise SchemaError(
                f"{name}: returns a fresh {fresh[0].type}; an ExecuTorch kernel writes tensor results into out "
                "arguments (register the op's .out variant), or returns one int/float/bool"
            )
        ret = _SCALAR_RETURNS[t]
    return args, ret


def signature(name: str, schema, function: str) -> str:
    """The C++ declaration etops expects for `function` implementing `schema`."""
    args, ret = cpp_args(name, schema)
    params = ", ".join(["KernelRuntimeContext& ctx"] + [f"{a.param} {a.name}" for a in args])
    out_ret = ret or _out_return_type(schema)
    return f"{out_ret} {function.rsplit('::', 1)[-1]}({params})"


def _out_return_type(schema) -> str:
    n = len(schema.returns)
    if n == 0:
        return "void"
    if n == 1:
        return "Tensor&"
    return "std::tuple<" + ", ".join(["Tensor&"] * n) + ">"


#: The C++ names generated signatures use (cpp_args), for every source that declares them.
CPP_TYPE_NAMES = """using ::executorch::aten::ArrayRef;
using ::executorch::aten::IntArrayRef;
using ::executorch::aten::Layout;
using ::executorch::aten::MemoryFormat;
using ::executorch::aten::Scalar;
using ::executorch::aten::ScalarType;
using ::executorch::aten::Tensor;
using ::executorch::aten::TensorList;
using ::executorch::runtime::EValue;
using ::executorch::runtime::KernelRuntimeContext;
using string_view = std::string_view;
"""


#: ExecuTorch's kernel headers, force-included (precompiled) into every source
PRELUDE_INCLUDES = """// etops prelude: ExecuTorch's kernel headers (force-included).
#pragma once
#include <executorch/runtime/kernel/kernel_includes.h>
#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/core/evalue.h>
#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>
"""

#: What every custom kernel source sees first (force-included): the headers and the
#: short type names at global scope. A checkout's kernel file gets PRELUDE_INCLUDES
#: only (it declares what it uses; global names would clash with ATen's headers).
PRELUDE = PRELUDE_INCLUDES.replace("ExecuTorch's kernel headers", "what every custom kernel source sees first") + """
using ::executorch::runtime::Error;
using ::executorch::runtime::Span;
""" + CPP_TYPE_NAMES


@dataclass
class KernelSpec:
    """One kernel to export from a set: ExecuTorch operator name, its torch
    FunctionSchema and the C++ function implementing it (None for a source that
    already defines the boxed function ``boxed``)."""

    name: str
    schema: object
    function: str
    boxed: bool = False


#: What a kernel source can call: the kernel its override replaced (set by etops
#: before the override is installed; nullptr for a kernel registered anew).
PREVIOUS_DECL = """namespace etops {
using BoxedKernel = void (*)(KernelRuntimeContext&, Span<EValue*>);
// The kernel the override of operator `name` (e.g. "aten::add.out") replaced, boxed:
// call it with the EValue stack (arguments, then the return slot). nullptr when the
// operator had no kernel, or `name` is not one of this build's operators.
BoxedKernel previous_kernel(const char* name);
}  // namespace etops
"""


def _previous_table(kernels: list[KernelSpec]) -> list[str]:
    """The table etops::previous_kernel reads and the setter etops calls."""
    n = max(1, len(kernels))
    names = ", ".join(json.dumps(k.name) for k in kernels) or "nullptr"
    return [
        f"static etops::BoxedKernel etops_previous_table[{n}] = {{}};",
        f"static const char* const etops_previous_names[{n}] = {{{names}}};",
        "ETOPS_EXPORT void etops_set_previous(int index, void* fn) {",
        f"  if (index >= 0 && index < {len(kernels)}) etops_previous_table[index] = reinterpret_cast<etops::BoxedKernel>(fn);",
        "}",
        "etops::BoxedKernel etops::previous_kernel(const char* name) {",
        f"  for (int i = 0; i < {len(kernels)}; ++i)",
        "    if (name != nullptr && std::strcmp(name, etops_previous_names[i]) == 0) return etops_previous_table[i];",
        "  return nullptr;",
        "}",
        "",
    ]


def _wrap_namespace(qualified: str, decl: str) -> str:
    parts = qualified.split("::")
    if len(parts) == 1:
        return decl
    ns = parts[:-1]
    return "".join(f"namespace {p} {{ " for p in ns) + decl + " " + "}" * len(ns)


def generate(kernels: list[KernelSpec]) -> tuple[str, str]:
    """(decls.h, wrappers.cpp) for a kernel set."""
    decls = ["#pragma once", "// after the prelude (force-included first)", "", PREVIOUS_DECL]
    wrappers = ['#include "decls.h"', "#include <cstring>", "", "#define ETOPS_EXPORT extern \"C\" __attribute__((visibility(\"default\")))", ""]
    wrappers += _previous_table(kernels)
    for i, k in enumerate(kernels):
        if k.boxed:
            decls.append(_wrap_namespace(k.function, f"void {k.function.rsplit('::', 1)[-1]}(KernelRuntimeContext& ctx, Span<EValue*> stack);"))
            wrappers.append(f"ETOPS_EXPORT void etops_boxed_{i}(KernelRuntimeContext& ctx, Span<EValue*> stack) {{ {k.function}(ctx, stack); }}")
            continue
        args, ret = cpp_args(k.name, k.schema)
        decls.append(f"// {k.name}: {k.schema}")
        decls.append(_wrap_namespace(k.function, signature(k.name, k.schema, k.function) + ";"))
        n = len(args)
        body = [
            f"// {k.name}: {k.schema}",
            f"ETOPS_EXPORT void etops_boxed_{i}(KernelRuntimeContext& ctx, Span<EValue*> stack) {{",
            f"  static constexpr const char* kName = {json.dumps(k.name)};",
            f"  if (stack.size() != {n + 1}) {{",
            f'    ET_LOG(Error, "%s: expected {n + 1} values on the stack ({n} arguments and the return slot), got %zu", kName, stack.size());',
            "    ctx.fail(Error::InvalidArgument);",
            "    return;",
            "  }",
        ]
        for j, a in enumerate(args):
            cond = a.check.format(v=f"(*stack[{j}])")
            body += [
                f"  if (!{cond}) {{",
                f'    ET_LOG(Error, "%s: argument \'{a.name}\' is not a {a.type_str}", kName);',
                "    ctx.fail(Error::InvalidType);",
                "    return;",
                "  }",
            ]
        call_args = ", ".join(["ctx"] + [a.convert.format(v=f"(*stack[{j}])") for j, a in enumerate(args)])
        if ret is not None:
            body.append(f"  {ret} result = static_cast<{ret}>({k.function}({call_args}));")
            body.append(f"  *stack[{n}] = EValue(result);")
        else:
            body.append(f"  (void){k.function}({call_args});")
        body.append("}")
        wrappers += body + [""]
    return "\n".join(decls) + "\n", "\n".join(wrappers) + "\n"

