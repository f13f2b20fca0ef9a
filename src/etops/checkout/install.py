"""One kernel file built against the installed wheel and swapped in: the operators it
implements (from the checkout's YAML, or the registrations of a file that registers
its kernels itself: self_registering, built with them captured: etops.custom.capture),
one kernel set for all of them (etops.custom's cache and Ninja), each operator
overridden (or registered, when it has no kernel) for the session.
``Installed.restore()`` puts the registry back."""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .. import _native
from ..custom import cache_dir, toolchain
from ..custom.build import KernelLibrary, Source, build
from ..errors import BuildError
from ..custom.codegen import KernelSpec
from ..custom.capture import CAPTURE_LABEL, capture_source, check_captured, function_name, registering_libraries
from .self_registering import refusal, registrations
from ..custom.registration import Built, KernelHandle, Override, custom_origin, override, register_kernel
from ..registry import registry
from ..schemas import find_schema, set_schema
from . import layout as co

#: The wheel's kernel libraries a kernel file may use symbols of (the portable util
#: functions, other kernels); linked --as-needed: only those it uses are recorded.
KERNEL_LIBRARIES = ("executorch_kernels_optimized", "executorch_kernels_quantized")
#: Checkout kernels are written against deprecated aliases the wheel's headers flag.
CHECKOUT_CFLAGS = ("-Wno-deprecated-declarations",)
#: The flags the wheel's kernels were built with: ExecuTorch's CMakeLists.txt sets
#: CMAKE_CXX_FLAGS_RELEASE to "-O2 -ffunction-sections -fdata-sections" before
#: CMake's Release default "-O3 -DNDEBUG" (the later -O3 wins) and the wheel is a
#: Release build (setup.py); -fPIC and -fvisibility=hidden come from etops' build.
WHEEL_CFLAGS = ("-O3", "-DNDEBUG", "-ffunction-sections", "-fdata-sections")
#: A checkout's header-only third-party folders (git submodules) that its kernel
#: CMake files put on the include path, each with the include path it provides (for
#: the hint of a build that misses it): pocketfft for kernels/optimized's FFT kernels,
#: torchao's for the LLM kernels of extension/llm/custom_ops (op_sdpa_impl.h, op_moe.cpp).
CHECKOUT_THIRD_PARTY = {"third-party/pocketfft": "pocketfft", "third-party/ao": "torchao/"}


def torch_include_dir() -> str:
    """The installed torch's headers: the optimized kernels use ATen's header-only
    vectorization (``ATen/cpu/vec``), which ExecuTorch's build takes from its PyTorch
    submodule. Searched after the checkout and the wheel, so ExecuTorch's own c10
    wins where both have a header."""
    import torch

    return str(Path(torch.__file__).resolve().parent / "include")


@dataclass
class Target:
    """What etops worked out about one kernel file."""

    path: Path
    checkout: Path
    include_root: Path
    yamls: list[Path]
    ops: list[co.Implemented]
    headers: set[Path] = field(default_factory=set)  #: checkout headers it (and its helpers) include (--watch)
    helpers: tuple = ()  #: checkout helper sources compiled with it (--changed: the changed ones it uses)
    #: the file registers its kernels itself (no YAML): built with its registrations captured
    self_registering: bool = False

    @property
    def names(self) -> list[str]:
        return [i.entry.op for i in self.ops]


def locate(path, root=None, yaml=None, helpers=()) -> Target:
    """The checkout, YAML and operators of kernel file `path`; CheckoutError when
    the file implements none of the YAML's operators. `helpers`: helper sources of
    the checkout (``util/*.cpp``) to compile with it instead of linking the wheel's
    copy of their functions."""
    path = Path(path).resolve()
    text = path.read_text() if path.is_file() else ""
    why = refusal(path, text)
    if why is not None:  # registrations etops cannot capture and swap in
        raise co.CheckoutError(why)
    own = registrations(text)
    if own and yaml:
        raise co.CheckoutError(f"--yaml {yaml}: {path.name} registers its kernels itself ({', '.join(r.op for r in own)}); "
                               "no kernel YAML is read for it")
    checkout = co.find_checkout(path, root)
    yamls = [] if own else co.find_yamls(path, yaml)
    ops = _registered_ops(path, own) if own else co.implemented(path, [e for y in yamls for e in co.read_yaml(y)])
    if not ops:
        defined = ", ".join(sorted(co.defined_functions(path.read_text()))) or "no kernel function"
        raise co.NoOperators(f"{path.name} implements none of the operators of {', '.join(y.name for y in yamls)} "
                               f"(it defines {defined})")
    root_dir = co.include_root(checkout, cache_dir())
    helpers = tuple(Path(h).resolve() for h in helpers)
    for helper in helpers:
        if not helper.is_file():
            raise co.CheckoutError(f"helpers: {helper}: no such file")
    headers = set().union(*(co.checkout_headers(p, [root_dir, checkout]) for p in (path, *helpers)))
    return Target(path, checkout, root_dir, yamls, ops, headers, helpers, bool(own))


def _registered_ops(path: Path, own) -> list[co.Implemented]:
    """The operators a self-registering file registers, as the entries of a YAML
    would give them: kernel ``i`` is the capturing source's ``etops_captured_<i>``
    (the kernel the file registered), ``function`` the C++ function it names. The
    operators' library is loaded first when they are the LLM kernels (their schemas
    and the kernels the file's replace); CheckoutError for an operator with no
    schema known."""
    from ..llm_library import LLM_NAMESPACES, load_llm_custom_ops

    if any(r.op.startswith(LLM_NAMESPACES) and r.op not in registry() for r in own):
        try:
            load_llm_custom_ops()
        except ImportError as exc:
            raise co.CheckoutError(f"{path}: registers {', '.join(r.op for r in own)}, whose library (upstream's LLM "
                                   f"custom ops) cannot be imported here: {exc}") from None
    ops = []
    for index, r in enumerate(own):
        schema, why = find_schema(r.op)
        if schema is None:
            raise co.CheckoutError(f"{path}: registers {r.op} (line {r.line}), whose schema etops does not know ({why}); "
                                   "load the library defining it first (--load)")
        ops.append(co.Implemented(co.YamlKernel(r.op, function_name(index), str(schema), False, str(path)), r.function))
    return ops


def schema_of(entry: co.YamlKernel):
    """The operator's schema: torch's, else the YAML's ``func:``."""
    found, why = find_schema(entry.op)
    if found is not None:
        return found
    if entry.schema is None:
        raise co.CheckoutError(f"{entry.op}: {why}")
    return set_schema(entry.op, entry.schema)


def headers_digest(target: Target) -> str:
    """A digest of the checkout headers the file includes: a header edit makes a
    new kernel set (the build cache is keyed by the sources and flags)."""
    h = hashlib.sha256()
    for header in sorted(target.headers):
        h.update(str(header).encode() + b"\0")
        try:
            h.update(header.read_bytes())
        except OSError:
            pass
    return h.hexdigest()[:16]


def build_target(target: Target, cflags=(), ldflags=(), include_first=()) -> KernelLibrary:
    """Compiles (or finds in the cache) the file's kernels: one kernel set, the
    checkout on the include path (after `include_first`), the wheel's kernel
    libraries linked as needed, with the flags the wheel's kernels were built with
    (WHEEL_CFLAGS). Raises BuildError with the diagnostics on the user's lines."""
    tc = toolchain()
    if target.self_registering:  # kernel i: the kernel the file registered for operator i, captured
        specs = [KernelSpec(i.entry.op, schema_of(i.entry), i.entry.function, boxed=True) for i in target.ops]
    else:
        specs = [KernelSpec(i.entry.op, schema_of(i.entry), i.function) for i in target.ops]
    flags = [*include_first, f"-I{target.include_root}", *CHECKOUT_CFLAGS, *WHEEL_CFLAGS, f"-idirafter{torch_include_dir()}",
             f"-DETOPS_CHECKOUT_HEADERS={headers_digest(target)}", *cflags]
    libs = [f"-l{lib}" for lib in KERNEL_LIBRARIES if (Path(tc.lib_dir) / _native.shared_library_name(lib)).exists()]
    if sys.platform != "darwin":  # GNU ld: link only the libraries the file uses (Apple's ld has no such flag)
        libs = ["-Wl,--as-needed", *libs, "-Wl,--no-as-needed"]
    third_party = [target.checkout / d for d in CHECKOUT_THIRD_PARTY if (target.checkout / d).is_dir()]
    flags += [f"-idirafter{d}" for d in third_party]
    sources = [Source(str(p), None, str(p)) for p in (target.path, *target.helpers)]
    if target.self_registering:
        sources.append(Source(CAPTURE_LABEL, capture_source(target.names)))
        for registering in map(Path, registering_libraries(target.names)):
            libs[-1:-1] = [f"-L{registering.parent}", f"-l:{registering.name}", f"-Wl,-rpath,{registering.parent}"]
    try:
        # a file that includes ExecuTorch's headers declares what it uses (as in its own
        # CMake build); one that includes none (an out-of-tree snippet) gets etops' names
        own = any(inc.startswith("executorch/") for inc in co.includes(target.path.read_text()))
        library = build(sources, specs, flags, [*libs, *ldflags], prelude_flags=WHEEL_CFLAGS, checkout_sources=own)
        if target.self_registering:  # loads it: its registrations are captured, never made
            check_captured(library, target.names, str(target.path))
        return library
    except BuildError as exc:
        # a folder the failing includes name that is empty or absent: its submodule is not checked out
        text = f"{exc}\n{exc.log}"
        missing = [d for d, include in CHECKOUT_THIRD_PARTY.items()
                   if f"{include}" in text and "No such file" in text
                   and (not (target.checkout / d).is_dir() or not any((target.checkout / d).iterdir()))]
        if not missing:
            raise
        folders = " ".join(missing)
        raise BuildError(f"{exc}\n(the checkout's {folders} is empty or absent: its git submodule is not checked out; "
                         f"git -C {target.checkout} submodule update --init {folders})",
                         exc.diagnostics, exc.log, exc.build_dir) from None


@dataclass
class Installed:
    """A kernel file's operators, swapped in. ``replaced[name]`` is the override of
    an operator that had a kernel (``.previous`` calls that one), ``added[name]`` the
    registration of one that had none."""

    target: Target
    library: KernelLibrary
    replaced: dict[str, Override]
    added: dict[str, KernelHandle]

    def restore(self) -> None:
        """Puts back every kernel this replaced and removes those it added."""
        for o in self.replaced.values():
            o.restore()
        for h in self.added.values():
            if h.active:
                h.deregister()
        self.replaced, self.added = {}, {}


def install(target: Target, library: KernelLibrary) -> Installed:
    """Overrides each operator's fallback kernel with the file's (registers it when
    the operator has no fallback kernel: a new operator, or one with keyed kernels
    only, which keep winning for their keys)."""
    replaced: dict[str, Override] = {}
    added: dict[str, KernelHandle] = {}
    try:
        for index, impl in enumerate(target.ops):
            name = impl.entry.op
            built = Built(library.function(index), custom_origin(library, index, impl.function))
            schema = schema_of(impl.entry)
            has_fallback = name in registry() and any(k.key is None for k in registry().get_kernel(name).kernels)
            if has_fallback:
                replaced[name] = override(name, built, schema=schema)
            else:
                added[name] = register_kernel(name, built, schema=schema)
    except BaseException:
        Installed(target, library, replaced, added).restore()
        raise
    return Installed(target, library, replaced, added)
