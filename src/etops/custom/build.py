"""Compiling kernel sources against the installed executorch wheel.

A *kernel set* is one or more user sources plus the kernels to export from them
(operator name, schema, C++ function). etops generates, per set:

- ``decls.h`` (force-included into every source): ExecuTorch's kernel headers,
  short type names (Tensor, Scalar, KernelRuntimeContext, ...) and a declaration of
  each kernel function with the C++ signature derived from its schema;
- ``wrappers.cpp``: one boxed wrapper per kernel that checks and unpacks the
  EValue stack by the schema (arguments, then the one return slot, as ExecuTorch's
  codegen does) and calls the typed function; tags are checked, never ET_CHECKed;
- ``build.ninja``: one compile edge per source, one link edge, run by Ninja.

The set's directory under the cache is named by a hash of everything that decides
the binary (sources, generated code, flags, compiler, executorch and etops
versions); a set whose ``manifest.json`` exists is reused without starting Ninja.
A compile error raises BuildError with the diagnostics mapped to the user's own
sources (string sources are written verbatim, so their line numbers are the
user's; force-including keeps them so).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EtopsError, SchemaError

#: Bumped whenever the generated code or the build recipe changes.
GENERATOR_VERSION = "3"


class BuildError(EtopsError, RuntimeError):
    """A kernel source did not compile or link. ``diagnostics`` holds the compiler's
    messages as ``(source, line, column, severity, message)`` with source the user's
    label ('<source>' for a string source, the path for a file) and line the user's
    own line; ``log`` is the whole compiler output, paths mapped the same way."""

    def __init__(self, message: str, diagnostics=(), log: str = "", build_dir: str = ""):
        super().__init__(message)
        self.diagnostics = list(diagnostics)
        self.log = log
        self.build_dir = build_dir


# ---- toolchain -----------------------------------------------------------------------


def executorch_root() -> Path:
    from .. import _native

    return Path(_native.executorch_lib_dir()).parent


_cache_dir: Path | None = None


def cache_dir() -> Path:
    """Where compiled kernel sets live: ``set_cache_dir()``, else $ETOPS_CACHE_DIR,
    else $XDG_CACHE_HOME/etops/kernels (~/.cache/etops/kernels)."""
    if _cache_dir is not None:
        return _cache_dir
    env = os.environ.get("ETOPS_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "etops" / "kernels"


def set_cache_dir(path) -> None:
    """Sets the kernel cache directory for this process (None: back to the default)."""
    global _cache_dir
    _cache_dir = Path(path) if path is not None else None


@dataclass(frozen=True)
class Toolchain:
    cxx: str
    cxx_id: str  #: path + size + mtime of the real compiler binary
    ninja: str
    defines: tuple[str, ...]
    include_dirs: tuple[str, ...]
    lib_dir: str
    libs: tuple[str, ...]
    executorch_version: str


_toolchain: Toolchain | None = None
_toolchain_lock = threading.Lock()


def _cmake_defines(config: Path, lib_dir: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The compile definitions the wheel's CMake config gives its consumers, and the
    libraries that go with them (the thread pool library with ET_USE_THREADPOOL)."""
    text = config.read_text()
    defines: list[str] = []
    m = re.search(r"set\(\s*EXECUTORCH_COMPILE_DEFINITIONS\s+([^)]*)\)", text)
    if m:
        defines += [t.strip('"') for t in m.group(1).split()]
    for m in re.finditer(r'INTERFACE_COMPILE_DEFINITIONS\s*\n?\s*"([^"]*)"', text):
        defines += [d for d in m.group(1).split(";") if d and "$" not in d]
    libs = ["executorch"]
    # The config turns ET_USE_THREADPOOL on exactly when the thread pool library shipped.
    if "ET_USE_THREADPOOL" in text and (lib_dir / "libexecutorch_threadpool.so").exists():
        defines.append("ET_USE_THREADPOOL")
        libs.append("executorch_threadpool")
    else:
        defines = [d for d in defines if d != "ET_USE_THREADPOOL"]
    return tuple(dict.fromkeys(defines)), tuple(libs)


def _find_ninja() -> str:
    try:
        import ninja  # the PyPI package

        path = os.path.join(ninja.BIN_DIR, "ninja")
        if os.path.exists(path):
            return path
    except ImportError:
        pass
    path = shutil.which("ninja")
    if path is None:
        raise BuildError("etops needs Ninja to compile kernels: pip install ninja")
    return path


def toolchain() -> Toolchain:
    global _toolchain
    if _toolchain is not None:
        return _toolchain
    with _toolchain_lock:
        if _toolchain is not None:
            return _toolchain
        root = executorch_root()
        lib_dir = root / "lib"
        config = lib_dir / "cmake" / "executorch" / "executorch-config.cmake"
        defines, libs = _cmake_defines(config, lib_dir)
        cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
        if cxx is None:
            raise BuildError("etops needs a C++17 compiler to compile kernels (set CXX or install g++)")
        real = os.path.realpath(shutil.which(cxx) or cxx)
        st = os.stat(real)
        try:
            from importlib.metadata import version

            et_version = version("executorch")
        except Exception:  # noqa: BLE001
            et_version = "unknown"
        include = root / "include"
        _toolchain = Toolchain(
            cxx=cxx,
            cxx_id=f"{real}:{st.st_size}:{st.st_mtime_ns}",
            ninja=_find_ninja(),
            defines=defines,
            include_dirs=(str(include), str(include / "executorch/runtime/core/portable_type/c10")),
            lib_dir=str(lib_dir),
            libs=libs,
            executorch_version=et_version,
        )
        return _toolchain


# ---- schema -> C++ -------------------------------------------------------------------

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


PRELUDE = """// etops prelude: what every custom kernel source sees first (force-included).
#pragma once
#include <executorch/runtime/kernel/kernel_includes.h>
#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/core/evalue.h>
#include <cstdint>
#include <optional>
#include <string_view>
#include <tuple>

using ::executorch::aten::ArrayRef;
using ::executorch::aten::IntArrayRef;
using ::executorch::aten::Layout;
using ::executorch::aten::MemoryFormat;
using ::executorch::aten::Scalar;
using ::executorch::aten::ScalarType;
using ::executorch::aten::Tensor;
using ::executorch::aten::TensorList;
using ::executorch::runtime::Error;
using ::executorch::runtime::EValue;
using ::executorch::runtime::KernelRuntimeContext;
using ::executorch::runtime::Span;
using string_view = std::string_view;
"""


@dataclass
class KernelSpec:
    """One kernel to export from a set: ExecuTorch operator name, its torch
    FunctionSchema and the C++ function implementing it (None for a source that
    already defines the boxed function ``boxed``)."""

    name: str
    schema: object
    function: str
    boxed: bool = False


def _wrap_namespace(qualified: str, decl: str) -> str:
    parts = qualified.split("::")
    if len(parts) == 1:
        return decl
    ns = parts[:-1]
    return "".join(f"namespace {p} {{ " for p in ns) + decl + " " + "}" * len(ns)


def generate(kernels: list[KernelSpec]) -> tuple[str, str]:
    """(decls.h, wrappers.cpp) for a kernel set."""
    decls = ["#pragma once", "// after the prelude (force-included first)", ""]
    wrappers = ['#include "decls.h"', "", "#define ETOPS_EXPORT extern \"C\" __attribute__((visibility(\"default\")))", ""]
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


# ---- build and cache -----------------------------------------------------------------


@dataclass
class Source:
    label: str  #: '<source>' or the user's path, as diagnostics name it
    text: str | None  #: the source (None: compile `path` in place)
    path: str | None = None


@dataclass
class KernelLibrary:
    """A compiled kernel set: the shared library and its boxed functions."""

    build_dir: str
    library_path: str
    source_hash: str
    names: list[str]
    compiled: bool  #: whether this call started the compiler (False: cache hit)
    _handle: object = field(default=None, repr=False)

    def function(self, index: int) -> int:
        """Address of kernel `index`'s boxed function."""
        import ctypes

        if self._handle is None:
            self._handle = _open(self.library_path)
        return ctypes.cast(getattr(self._handle, f"etops_boxed_{index}"), ctypes.c_void_p).value


_opened: dict[str, object] = {}


def _open(path: str):
    import ctypes

    handle = _opened.get(path)
    if handle is None:
        handle = _opened[path] = ctypes.CDLL(path)
    return handle


def _base_flags(tc: Toolchain) -> list[str]:
    flags = ["-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-fdiagnostics-color=never"]
    flags += [f"-D{d}" for d in tc.defines]
    flags += [f"-isystem {d}" for d in tc.include_dirs]
    return flags


def _prelude(tc: Toolchain) -> tuple[str, bool]:
    """(path of the prelude header, whether it is precompiled). ExecuTorch's headers
    are most of a small kernel's compile time, so GCC gets a precompiled prelude,
    made once per toolchain in the cache. Making it takes several times one kernel's
    compile, so the first build does not wait for it: it starts the precompile in the
    background and compiles without; later builds use it. (Set ETOPS_PCH=0 to never
    precompile. Without a usable .gch GCC reads the header itself, so a stale or
    missing one only costs time.)"""
    flags = _base_flags(tc)
    key = hashlib.sha256("\0".join([GENERATOR_VERSION, tc.cxx_id, PRELUDE] + flags).encode()).hexdigest()[:16]
    folder = cache_dir() / "prelude" / key
    header = folder / "prelude.h"
    gch = folder / "prelude.h.gch"
    if not header.exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"prelude.h.{os.getpid()}"
        tmp.write_text(PRELUDE)
        os.replace(tmp, header)
    if gch.exists():
        return str(header), True
    if os.environ.get("ETOPS_PCH", "1") != "0" and "clang" not in tc.cxx_id:
        marker = folder / "building"
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.close(fd)
        except FileExistsError:
            return str(header), False  # another build is making it
        tmp = folder / f"prelude.h.gch.{os.getpid()}"
        command = " ".join([shlex.quote(tc.cxx)] + flags + ["-x", "c++-header", shlex.quote(str(header)), "-o", shlex.quote(str(tmp))])
        command = f"{command} && mv {shlex.quote(str(tmp))} {shlex.quote(str(gch))}; rm -f {shlex.quote(str(tmp))} {shlex.quote(str(marker))}"
        subprocess.Popen(["sh", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    return str(header), False


def _ninja_file(tc: Toolchain, sources: list[str], cflags: list[str], ldflags: list[str], prelude: str, pch: bool = False) -> str:
    """The first source is compiled as part of wrappers.cpp (one translation unit
    for the common one-source set: the headers are parsed once); each further source
    is its own compile edge, run in parallel by Ninja."""
    def esc(s: str) -> str:
        return s.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")

    flags = _base_flags(tc) + ["-I."]
    flags += ["-include", prelude, "-include", "decls.h"]
    flags += cflags
    link = ["-shared", f"-L{tc.lib_dir}", f"-Wl,-rpath,{tc.lib_dir}", "-Wl,-z,defs"]
    link += [f"-l{lib}" for lib in tc.libs] + ldflags
    lines = [
        "# generated by etops: one kernel set",
        "ninja_required_version = 1.3",
        f"cxx = {tc.cxx}",
        f"cflags = {' '.join(flags)}",
        f"ldflags = {' '.join(link)}",
        "rule cxx",
        "  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = compile $in",
        "rule link",
        "  command = $cxx $in -o $out $ldflags",
        "  description = link $out",
    ]
    objects = []
    for i, src in enumerate(sources):
        if i == 0:
            continue
        obj = f"obj_{i}.o"
        objects.append(obj)
        lines.append(f"build {obj}: cxx {esc(src)} | decls.h")
    first = " " + esc(sources[0]) if sources else ""
    lines.append(f"build wrappers.o: cxx wrappers.cpp | decls.h{first}")
    lines.append(f"build kernels.so: link {' '.join(objects + ['wrappers.o'])}")
    lines.append("default kernels.so")
    return "\n".join(lines) + "\n"


_DIAG = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning|note): (?P<msg>.*)$")


def _map_log(log: str, mapping: dict[str, str], build_dir: str) -> tuple[str, list]:
    """Compiler output with generated paths replaced by the user's labels, and the
    diagnostics on the user's sources."""
    for path, label in sorted(mapping.items(), key=lambda kv: -len(kv[0])):
        log = log.replace(path, label)
    log = log.replace(build_dir + "/", "")
    diags = []
    for line in log.splitlines():
        m = _DIAG.match(line.strip())
        if m and m.group("file") in mapping.values():
            diags.append((m.group("file"), int(m.group("line")), int(m.group("col") or 0), m.group("sev"), m.group("msg")))
    return log, diags


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def source_hash(sources: list[Source], kernels: list[KernelSpec], cflags, ldflags) -> tuple[str, str, str]:
    """(hash, decls.h, wrappers.cpp) of a kernel set."""
    from .. import __version__

    tc = toolchain()
    decls, wrappers = generate(kernels)
    h = hashlib.sha256()
    for part in (
        GENERATOR_VERSION,
        __version__,
        tc.executorch_version,
        tc.cxx_id,
        repr(tc.defines),
        repr(tc.libs),
        PRELUDE,
        decls,
        wrappers,
        repr(list(cflags)),
        repr(list(ldflags)),
    ):
        h.update(part.encode())
        h.update(b"\0")
    for s in sources:
        text = s.text if s.text is not None else Path(s.path).read_text()
        h.update(s.label.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest(), decls, wrappers


def build(sources: list[Source], kernels: list[KernelSpec], cflags=(), ldflags=()) -> KernelLibrary:
    """Compiles (or finds in the cache) a kernel set."""
    tc = toolchain()
    digest, decls, wrappers = source_hash(sources, kernels, cflags, ldflags)
    root = cache_dir()
    build_dir = root / digest[:24]
    manifest = build_dir / "manifest.json"
    names = [k.name for k in kernels]
    if manifest.exists():
        return KernelLibrary(str(build_dir), str(build_dir / "kernels.so"), digest, names, compiled=False)
    with _locked(root / f".{digest[:24]}.lock"):
        if manifest.exists():
            return KernelLibrary(str(build_dir), str(build_dir / "kernels.so"), digest, names, compiled=False)
        build_dir.mkdir(parents=True, exist_ok=True)
        (build_dir / "prelude.h").write_text(PRELUDE)
        (build_dir / "decls.h").write_text(decls)
        compile_paths, mapping = [], {}
        for i, s in enumerate(sources):
            if s.text is not None:
                name = f"source_{i}.cpp"
                (build_dir / name).write_text(s.text)
                compile_paths.append(name)
                mapping[str(build_dir / name)] = s.label
                mapping[name] = s.label
            else:
                compile_paths.append(os.path.abspath(s.path))
                mapping[os.path.abspath(s.path)] = s.label
        if compile_paths:
            # The first source is part of the wrappers' translation unit; #include keeps its
            # file name and line numbers in diagnostics.
            wrappers = wrappers.replace('#include "decls.h"\n', f'#include "decls.h"\n#include {json.dumps(compile_paths[0])}\n', 1)
        (build_dir / "wrappers.cpp").write_text(wrappers)
        prelude, pch = _prelude(tc)
        (build_dir / "build.ninja").write_text(_ninja_file(tc, compile_paths, list(cflags), list(ldflags), prelude, pch))
        proc = subprocess.run([tc.ninja, "-C", str(build_dir)], capture_output=True, text=True)
        log = proc.stdout + proc.stderr
        with open(build_dir / "build.log", "a") as f:
            f.write(log)
        if proc.returncode != 0:
            mapped, diags = _map_log(log, mapping, str(build_dir))
            raise _build_error(mapped, diags, kernels, str(build_dir))
        manifest.write_text(json.dumps({"hash": digest, "kernels": names, "sources": [s.label for s in sources]}))
    return KernelLibrary(str(build_dir), str(build_dir / "kernels.so"), digest, names, compiled=True)


def _build_error(log: str, diags: list, kernels: list[KernelSpec], build_dir: str) -> BuildError:
    errors = [d for d in diags if d[3] in ("error", "fatal error")]
    lines = []
    for src, line, col, sev, msg in errors[:20]:
        lines.append(f"{src}:{line}:{col}: {sev}: {msg}")
    undefined = re.findall(r"undefined reference to `([^']+)'", log)
    for k in kernels:
        if k.boxed:
            continue
        short = k.function.rsplit("::", 1)[-1]
        if any(u.split("(")[0].endswith(short) for u in undefined):
            lines.append(
                f"no definition of {k.function} with the signature the schema of {k.name} gives:\n"
                f"    {signature(k.name, k.schema, k.function)}\n"
                "(a function with external linkage; a different parameter type makes it another overload)"
            )
    if not lines:
        # Something outside the user's sources failed (generated code, linking): show it all.
        lines = [ln for ln in log.splitlines() if not ln.startswith("[")][:40]
    return BuildError("kernel build failed:\n" + "\n".join(lines), errors, log, build_dir)


#: (type name, function) of kernel functions in a source: `name(KernelRuntimeContext& ...`
_FUNCTION = re.compile(r"([A-Za-z_][\w:]*)\s*\(\s*(?:(?:::)?executorch::runtime::|(?:::)?torch::executor::)?KernelRuntimeContext\s*&\s*\w*\s*,\s*([^)]*)")


def find_functions(text: str) -> list[tuple[str, bool]]:
    """(function name, is boxed) for each kernel function a source defines."""
    found = []
    for m in _FUNCTION.finditer(text):
        boxed = re.match(r"(?:::)?(?:executorch::runtime::)?Span\s*<\s*(?:::)?(?:executorch::runtime::)?EValue\s*\*\s*>", m.group(2).strip()) is not None
        if (m.group(1), boxed) not in found:
            found.append((m.group(1), boxed))
    return found
