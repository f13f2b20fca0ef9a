"""``etops.gtest(paths)``: find each test file's checkout and kernel set, generate its
headers, build every binary in one Ninja run, then run each in its own fork of this
process and collect the results."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..custom import cache_dir
from ..checkout.layout import checkout_headers, find_checkout, include_root
from ..errors import CheckoutError, EtopsError
from ..registry import registry
from . import glue, layout
from .build import NO_GOOGLETEST, Build, failure, find_googletest
from .report import FileResult, GtestResult
from .run import run_binary


@dataclass(frozen=True)
class CompiledSources:
    """The self-registering checkout sources a test calls (op_sdpa.cpp for
    op_sdpa_test.cpp), compiled into its binary instead of calling the library that
    registered them: etops dev's runs of such a test on an edit and on its base.
    `sources`: (checkout source, the file compiled for it) pairs (a base: its copy in
    an overlay; a source not named is compiled as it is); `include_first`: flags
    first on their include path (the base's overlay). Their registrations are
    captured (etops.custom.capture, hidden in the binary: the library registered the
    names already) and the binary binds its calls to its own definitions. `objects`:
    (checkout source, an object compiled from it already) pairs, linked instead of
    compiling the source again (etops dev's kernel library's object of the edit, or
    of the base: the code its judge ran, with the same flags on both sides)."""

    sources: tuple = ()
    include_first: tuple = ()
    objects: tuple = ()

    def source_of(self, path: Path) -> Path:
        return Path(dict((Path(a).resolve(), b) for a, b in self.sources).get(path.resolve(), path))

    def object_of(self, path: Path) -> Path | None:
        """The object compiled from `path` already, when one is given and exists."""
        found = dict((Path(a).resolve(), Path(b)) for a, b in self.objects).get(Path(path).resolve())
        return found if found is not None and found.is_file() else None


class _Checkout:
    """What every test of one checkout and kernel set shares (read once)."""

    def __init__(self, checkout: Path, kernel_set: str | None):
        self.path = checkout
        self.kernel_set = kernel_set
        self.include_root = include_root(checkout, cache_dir())
        self.googletest = find_googletest(checkout)
        self._features: tuple[str, str] | BaseException | None = None

    def features(self) -> tuple[str, str]:
        """(supported_features.h, .cpp) of the kernel set; raises what generating them raised."""
        if self._features is None:
            try:
                self._features = glue.supported_features(*layout.features_inputs(self.path, self.kernel_set))
            except EtopsError as exc:
                self._features = exc
        if isinstance(self._features, BaseException):
            raise self._features
        return self._features


def gtest(paths, *, kernel_set: str | None = None, test_filter: str | None = None, root=None, jobs: int | None = None,
          timeout: float = 300.0, total: float | None = None, progress=None,
          compiled: CompiledSources | None = None) -> GtestResult:
    """Builds and runs ExecuTorch kernel test files (``kernels/test/op_add_test.cpp``,
    or a folder of ``op_*_test.cpp``) against the kernels registered in this
    process. `kernel_set` picks the ``supported_features_def.yaml`` (default: the
    test folder's set, ``optimized`` for upstream's ``kernels/test/``);
    `test_filter` is gtest's (``Suite.Name``, ``*`` wildcards, ``-`` exclusions);
    `timeout` bounds each run of a binary (seconds), `total` all the runs of one
    binary together (None: no bound; run.run_binary); `progress(done, total, text)`
    is called as files finish; `compiled`: the self-registering sources a test
    calls compiled into its binary (CompiledSources), not the library's. Never raises for a test file that does not build:
    its result carries the reason."""
    started = time.monotonic()
    files = layout.test_files(paths if isinstance(paths, (list, tuple)) else [paths])
    registered = sorted(registry().operator_names)
    checkouts: dict[tuple[Path, str | None], _Checkout] = {}
    results: list[FileResult] = []
    plans: list[tuple[FileResult, Path, list[Path]]] = []
    builds: dict[Path, Build] = {}
    for path in files:
        res = FileResult(layout.relative(path))
        results.append(res)
        try:
            checkout = find_checkout(path, root, provided=layout.is_generated)
            ks = kernel_set or layout.default_kernel_set(path, checkout)
            co = checkouts.get((checkout, ks)) or checkouts.setdefault((checkout, ks), _Checkout(checkout, ks))
            layout.features_inputs(checkout, kernel_set)  # an unknown --kernel-set is an error of every file
            res.kernel_set = ks
            if co.googletest is None:
                res.build_error = NO_GOOGLETEST
                continue
            res.googletest = co.googletest.describe()
            build = builds.get(co.googletest.root) or builds.setdefault(co.googletest.root, Build(co.googletest))
            binary, objects = _queue(build, co, path, registered, res, compiled)
            plans.append((res, binary, objects))
        except EtopsError as exc:
            res.build_error = str(exc)
    t0 = time.monotonic()
    for build in builds.values():
        build.run(jobs)
    build_seconds = time.monotonic() - t0
    total = len(plans)  # the files queued for a build (the others failed before it, reported already)
    for i, (res, binary, objects) in enumerate(plans):
        res.build_error = failure(binary, objects)
        if res.built:
            run = run_binary(binary, test_filter, timeout, total)
            res.tests, res.problem, res.run_seconds = run.tests, run.problem, run.seconds
        if progress is not None:
            progress(i + 1, total, res.path)
    return GtestResult(results, time.monotonic() - started, build_seconds)


def _queue(build: Build, co: _Checkout, path: Path, registered: list[str], res: FileResult,
           compiled: CompiledSources | None = None) -> tuple[Path, list[Path]]:
    """Queues the objects and the binary of test `path`; (binary, its objects)."""
    test = layout.describe(path, co.path, co.include_root)
    entries = layout.yaml_entries(co.path, path)
    header, notes = glue.functions_header(test.functions, entries, registered)
    headers = {layout.FUNCTIONS_HEADER: header}
    natives: dict[str, str] = {}  # a kernel folder's NativeFunctions.h: folder -> the include naming it
    for include, folder, kind in test.generated:
        if kind == "Functions":  # a kernel folder's Functions.h: the <op>_outf functions
            headers[include] = f"#pragma once\n#include <{layout.FUNCTIONS_HEADER}>\n"
        else:
            natives[folder] = include
    if natives:
        texts, more = glue.native_headers(test.natives, {f: layout.folder_entries(co.path, f) for f in natives}, entries)
        headers.update({natives[f]: text for f, text in texts.items()})
        notes = notes + more
    res.notes = notes
    features_dir = None
    objects: list[Path] = []
    key = ""
    if test.uses_features:
        fh, fcpp = co.features()
        features_dir = build.generated({layout.FEATURES_HEADER: fh})
        source = build.generated({"supported_features.cpp": fcpp}) / "supported_features.cpp"
        objects.append(build.checkout_object(source, [], [f"-I{features_dir}"], fh))
        key = fh
    shared = ([f"-I{features_dir}"] if features_dir else []) + [f"-idirafter{co.include_root}"]
    for helper in test.helpers:
        deps = checkout_headers(helper, [co.include_root, co.path])
        objects.append(build.checkout_object(helper, deps, shared, key))
    functions_dir = build.generated(headers)
    generated = "".join(headers[k] for k in sorted(headers))
    objects.insert(0, build.checkout_object(path, test.headers, [f"-I{functions_dir}", *shared], key + generated))
    objects += [build.support_object(), *build.googletest_objects()]
    if compiled is not None and test.registering:
        objects += _registering_objects(build, co, test, compiled, shared)
    return build.link(objects, path.stem, registering_libraries_of(test), own_first=compiled is not None), objects


def _registering_objects(build: Build, co: _Checkout, test: layout.TestFile, compiled: CompiledSources, shared) -> list[Path]:
    """The objects of `test`'s self-registering sources as `compiled` names them, with
    the flags etops dev builds them with (the wheel's, torch's and the checkout's
    third-party headers), and the source capturing their registrations."""
    from ..checkout.install import CHECKOUT_CFLAGS, CHECKOUT_THIRD_PARTY, WHEEL_CFLAGS, torch_include_dir
    from ..checkout.self_registering import registrations
    from ..custom.capture import capture_source

    third_party = [f"-idirafter{co.path / d}" for d in CHECKOUT_THIRD_PARTY if (co.path / d).is_dir()]
    objects, names = [], []
    for source in test.registering:
        built = compiled.source_of(source)
        names += [r.op for r in registrations(built.read_text())]
        ready = compiled.object_of(source)
        if ready is not None:
            objects.append(ready)
            continue
        flags = [*compiled.include_first, f"-iquote{source.parent}", *shared, *CHECKOUT_CFLAGS, *WHEEL_CFLAGS,
                 f"-idirafter{torch_include_dir()}", *third_party]
        roots = [Path(f[2:]) for f in compiled.include_first if f.startswith("-I")] + [co.include_root, co.path]
        objects.append(build.checkout_object(built, checkout_headers(built, roots), flags))
    text = "#include <executorch/runtime/kernel/kernel_includes.h>\n" + capture_source(names)  # the context's type, whole
    capture = build.generated({"etops_capture.cpp": text}) / "etops_capture.cpp"
    objects.append(build.checkout_object(capture, [], list(shared)))
    return objects


def registering_libraries_of(test: layout.TestFile) -> list[str]:
    """The shared libraries holding the kernels the test's self-registering checkout
    sources register (``test.registering``: op_sdpa.cpp for op_sdpa_test.cpp), which
    the test binary links instead of compiling those sources: the test calls the
    kernels' functions of the library that registered them (the wheel's LLM library,
    loaded first here when those are its kernels). CheckoutError when none holds them."""
    if not test.registering:
        return []
    from ..llm_library import LLM_NAMESPACES, load_llm_custom_ops
    from ..custom.capture import registering_libraries
    from ..checkout.self_registering import registrations

    names = [r.op for source in test.registering for r in registrations(source.read_text())]
    sources = ", ".join(layout.relative(s) for s in test.registering)
    if any(n.startswith(LLM_NAMESPACES) and n not in registry() for n in names):
        try:
            load_llm_custom_ops()
        except ImportError as exc:
            raise CheckoutError(f"{sources} register {', '.join(names)} themselves; their library (upstream's LLM "
                                f"custom ops) cannot be imported here: {exc}") from None
    found = registering_libraries(names)
    if not found:
        raise CheckoutError(f"{sources} register {', '.join(names)} themselves, and no library loaded here holds those "
                            "kernels (the test calls their functions): load the library first (--load LIB.so)")
    return found
