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
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BuildError
from .codegen import PRELUDE, PRELUDE_INCLUDES, KernelSpec, generate, signature
from .toolchain import Toolchain, cache_dir, toolchain

#: Bumped whenever the generated code or the build recipe changes.
GENERATOR_VERSION = "4"



# ---- build and cache -----------------------------------------------------------------


@dataclass
class Source:
    label: str  #: '<source>' or the user's path, as diagnostics name it
    text: str | None  #: the source (None: compile `path` in place)
    path: str | None = None

    def in_place(self) -> str:
        """The path of a source compiled in place (one given as a file, no text)."""
        if self.path is None:
            raise ValueError(f"source {self.label}: neither text nor a path")
        return self.path


@dataclass
class KernelLibrary:
    """A compiled kernel set: the shared library and its boxed functions."""

    build_dir: str
    library_path: str
    source_hash: str
    names: list[str]
    compiled: bool  #: whether this call started the compiler (False: cache hit)
    _handle: object = field(default=None, repr=False)

    def object_of(self, index: int) -> str | None:
        """The object file of source `index` when it was compiled on its own (a
        checkout's kernel files: each its own compile edge), else None."""
        path = Path(self.build_dir) / f"obj_{index}.o"
        return str(path) if path.is_file() else None

    def function(self, index: int) -> int:
        """Address of kernel `index`'s boxed function."""
        import ctypes

        if self._handle is None:
            self._handle = _open(self.library_path)
        address = ctypes.cast(getattr(self._handle, f"etops_boxed_{index}"), ctypes.c_void_p).value
        assert address is not None, f"etops_boxed_{index} is a null symbol"  # a dlsym'd function is never NULL
        return address


_opened: dict[str, object] = {}


def set_previous(library_path: str, index: int, address: int) -> None:
    """Tells kernel `index` of a compiled set the function its override replaces
    (what ``etops::previous_kernel`` gives its C++ source)."""
    import ctypes

    setter = _open(library_path).etops_set_previous
    setter.argtypes = [ctypes.c_int, ctypes.c_void_p]
    setter(index, address)


def _open(path: str):
    import ctypes

    handle = _opened.get(path)
    if handle is None:
        handle = _opened[path] = ctypes.CDLL(path)
    return handle


def compile_flags(tc: Toolchain) -> list[str]:
    """The flags every source built against the wheel gets: C++17, PIC, hidden
    visibility, the wheel's compile definitions and headers (etops.gtest uses them too)."""
    flags = ["-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-fdiagnostics-color=never"]
    flags += [f"-D{d}" for d in tc.defines]
    flags += [f"-isystem {d}" for d in tc.include_dirs]
    return flags


def _prelude(tc: Toolchain, extra=(), text: str = PRELUDE) -> tuple[str, bool]:
    """(path of the prelude header, whether it is precompiled). ExecuTorch's headers
    are most of a small kernel's compile time, so GCC gets a precompiled prelude,
    made once per toolchain in the cache. Making it takes several times one kernel's
    compile, so the first build does not wait for it: it starts the precompile in the
    background and compiles without; later builds use it. (Set ETOPS_PCH=0 to never
    precompile. Without a usable .gch GCC reads the header itself, so a stale or
    missing one only costs time.) `extra`: flags of the build that a precompiled
    header must have been made with too (a macro such as NDEBUG: GCC will not use a
    .gch made without it); each set of them has its own prelude. `text`: the
    prelude (PRELUDE, or PRELUDE_INCLUDES for a checkout's kernel files)."""
    flags = compile_flags(tc) + list(extra)
    key = hashlib.sha256("\0".join([GENERATOR_VERSION, tc.cxx_id, text] + flags).encode()).hexdigest()[:16]
    folder = cache_dir() / "prelude" / key
    header = folder / "prelude.h"
    gch = folder / "prelude.h.gch"
    if not header.exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"prelude.h.{os.getpid()}"
        tmp.write_text(text)
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


def _ninja_file(tc: Toolchain, sources: list[str], cflags: list[str], ldflags: list[str], prelude: str, pch: bool = False,
                bare_prelude: str | None = None) -> str:
    """The first source is compiled as part of wrappers.cpp (one translation unit
    for the common one-source set: the headers are parsed once); each further source
    is its own compile edge, run in parallel by Ninja. With `bare_prelude` (a
    checkout's kernel files) every source is its own compile edge that sees that
    prelude only, not the short names nor decls.h."""
    def esc(s: str) -> str:
        return s.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")

    flags = compile_flags(tc) + ["-I."]
    source_flags = [*flags, "-include", bare_prelude, *cflags] if bare_prelude is not None else None
    flags += ["-include", prelude, "-include", "decls.h"]
    flags += cflags
    # An undefined symbol fails the link (GNU ld's -z defs; ld64 refuses them by default).
    no_undefined = [] if sys.platform == "darwin" else ["-Wl,-z,defs"]
    link = ["-shared", f"-L{tc.lib_dir}", f"-Wl,-rpath,{tc.lib_dir}", *no_undefined]
    link += [f"-l{lib}" for lib in tc.libs] + ldflags
    lines = [
        "# generated by etops: one kernel set",
        "ninja_required_version = 1.3",
        f"cxx = {tc.cxx}",
        f"cflags = {' '.join(flags)}",
        f"srcflags = {' '.join(source_flags if source_flags is not None else flags)}",
        f"ldflags = {' '.join(link)}",
        "rule cxx",
        "  command = $cxx -MMD -MF $out.d $cflags -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = compile $in",
        "rule cxxsrc",
        "  command = $cxx -MMD -MF $out.d $srcflags -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = compile $in",
        "rule link",
        "  command = $cxx $in -o $out $ldflags",
        "  description = link $out",
    ]
    objects = []
    for i, src in enumerate(sources):
        if i == 0 and bare_prelude is None:
            continue
        obj = f"obj_{i}.o"
        objects.append(obj)
        lines.append(f"build {obj}: cxxsrc {esc(src)}" if bare_prelude is not None else f"build {obj}: cxx {esc(src)} | decls.h")
    first = " " + esc(sources[0]) if sources and bare_prelude is None else ""
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
        text = s.text if s.text is not None else Path(s.in_place()).read_text()
        h.update(s.label.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest(), decls, wrappers


def build(sources: list[Source], kernels: list[KernelSpec], cflags=(), ldflags=(), prelude_flags=(),
          checkout_sources: bool = False) -> KernelLibrary:
    """Compiles (or finds in the cache) a kernel set. `prelude_flags`: those of
    `cflags` the precompiled prelude is made with too (macros, optimization).
    `checkout_sources`: the sources are a checkout's kernel files, written against
    ExecuTorch's headers alone: each compiles on its own with PRELUDE_INCLUDES (no
    global short names, no decls.h; the wrappers' declarations meet the definitions
    at link time)."""
    tc = toolchain()
    digest, decls, wrappers = source_hash(sources, kernels, [*cflags, f"checkout_sources={checkout_sources}"], ldflags)
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
                compile_paths.append(os.path.abspath(s.in_place()))
                mapping[os.path.abspath(s.in_place())] = s.label
        if compile_paths and not checkout_sources:
            # The first source is part of the wrappers' translation unit; #include keeps its
            # file name and line numbers in diagnostics.
            wrappers = wrappers.replace('#include "decls.h"\n', f'#include "decls.h"\n#include {json.dumps(compile_paths[0])}\n', 1)
        (build_dir / "wrappers.cpp").write_text(wrappers)
        prelude, pch = _prelude(tc, prelude_flags)
        bare = _prelude(tc, prelude_flags, PRELUDE_INCLUDES)[0] if checkout_sources else None
        (build_dir / "build.ninja").write_text(_ninja_file(tc, compile_paths, list(cflags), list(ldflags), prelude, pch, bare))
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
