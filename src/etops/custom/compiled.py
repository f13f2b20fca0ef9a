"""A kernel compiled from C++ source for one registration (register_kernel or
override given source text or files): the kernel set built (etops.custom.build),
its function's address and origin record (``custom_origin``, the record every
compiled kernel of etops.custom and etops.checkout carries); the function an
override replaces told to the compiled kernel (``tell_previous``). Imports the core's
errors and this package's build and codegen."""

from __future__ import annotations

import os

from ..errors import RegistrationError


def compile_kernel(name, schema, source, sources, function, cflags, ldflags):
    """(function address, origin) of kernel `function` of `name` compiled from C++
    `source` and `sources` (strings or paths); the function found in them when
    `function` is None, RegistrationError when there is not exactly one."""
    from .build import Source, build, find_functions
    from .codegen import KernelSpec

    srcs = []
    if source is not None:
        srcs.append(Source("<source>", source))
    for p in sources or ():
        p = os.fspath(p)
        if os.path.exists(p):
            srcs.append(Source(os.path.abspath(p), None, os.path.abspath(p)))
        else:
            srcs.append(Source(f"<source {len(srcs)}>", p))
    if len(srcs) > 1:
        for i, s in enumerate(srcs):
            if s.label == "<source>":
                srcs[i] = Source("<source 0>", s.text)
    boxed = False
    if function is None:
        found = []
        for s in srcs:
            found += find_functions(s.text if s.text is not None else open(s.path).read())
        if len(found) != 1:
            names = ", ".join(f for f, _ in found) or "none"
            raise RegistrationError(
                f"{name}: say which function implements the kernel (function='...'); the sources define {names}"
            )
        function, boxed = found[0]
    else:
        for s in srcs:
            for f, b in find_functions(s.text if s.text is not None else open(s.path).read()):
                if f == function:
                    boxed = b
    lib = build(srcs, [KernelSpec(name, schema, function, boxed)], cflags, ldflags)
    fn = lib.function(0)
    return fn, custom_origin(lib, 0, function)


def custom_origin(lib, index: int, function: str) -> dict:
    """The origin record of kernel `index` of compiled kernel set `lib`."""
    return {"kind": "custom", "source_hash": lib.source_hash, "build_dir": lib.build_dir, "library": lib.library_path,
            "function": function, "compiled": lib.compiled, "kernel_index": index}


def looks_like_source(text: str) -> bool:
    """Whether a string given as a kernel is C++ source (not ``library:symbol``)."""
    return "\n" in text or "(" in text or "{" in text


def tell_previous(origin: dict, address: int) -> None:
    """A compiled kernel learns the function its override replaces
    (``etops::previous_kernel(name)`` in its C++ source)."""
    if origin.get("kind") == "custom" and "kernel_index" in origin:
        from .build import set_previous

        set_previous(origin["library"], origin["kernel_index"], address)
