"""Upstream's own Python tests of the LLM custom ops run against the kernels
registered in ExecuTorch's registry now (the wheel's, an override, an edit
swapped in by ``etops dev``).

The tests (``executorch/extension/llm/custom_ops/test_*.py``, shipped in the
wheel) call ``torch.ops.llama.*`` / ``torch.ops.preprocess.*`` and hold their
own references. ``routed()`` gives those torch ops CPU implementations that call
the etops kernel of the same name (``llama::<op>.out``), so a test's verdict is
the registered kernel's; ``run_tests(names)`` runs test modules under it with
unittest and says per test passed / failed / skipped (why), as ``etops gtest``
does for C++ tests; ``run_test_file(path, kernels)`` runs a checkout's copy of
one (``etops dev`` on an LLM kernel file runs those calling its operators,
``files_calling``). An etops refusal reaches the test as the RuntimeError a torch
op raises. Imports torch, unittest and the core (etops.registry, errors)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import io
import unittest

import torch

from .. import _logs
from ..errors import KernelError
from ..llm_library import LIBRARY, load_llm_custom_ops
from ..registry import registry

#: upstream's Python test modules of the library (in the executorch wheel)
TEST_PACKAGE = "executorch.extension.llm.custom_ops"
TEST_MODULES = ("test_sdpa_with_kv_cache", "test_quantized_sdpa", "test_update_cache", "test_update_cross_attn_cache",
                "test_gated_delta", "test_quantized_moe", "test_preprocess_custom_ops")
#: torch op (namespace, name) -> the registry's kernel it is routed to: every llama/preprocess op with an out kernel
ROUTES = {
    ("llama", "custom_sdpa"): "llama::custom_sdpa.out",
    ("llama", "custom_quantized_sdpa"): "llama::custom_quantized_sdpa.out",
    ("llama", "sdpa_with_kv_cache"): "llama::sdpa_with_kv_cache.out",
    ("llama", "update_cache"): "llama::update_cache.out",
    ("llama", "update_cache_with_indices"): "llama::update_cache_with_indices.out",
    ("llama", "fast_hadamard_transform"): "llama::fast_hadamard_transform.out",
    ("llama", "gated_delta_rule"): "llama::gated_delta_rule.out",
    ("llama", "channelwise_gated_delta_rule"): "llama::channelwise_gated_delta_rule.out",
    ("llama", "quantized_moe_ffn"): "llama::quantized_moe_ffn.out",
    ("llama", "fallback"): "llama::fallback.out",
    ("preprocess", "tile_crop"): "preprocess::tile_crop.out",
}


@dataclasses.dataclass
class TestOutcome:
    """One upstream test: its id, "passed", "failed" (an assertion or an error)
    or "skipped", and why (the traceback's last line, the skip reason)."""

    test: str
    status: str
    why: str = ""


class Routing:
    """Counts the calls routed to each kernel while in force (what a test reached)."""

    def __init__(self) -> None:
        self.calls: dict = {}


def _as_torch_refusal(kernel_name: str, call):
    """`call` raising what a torch op raises when it refuses its arguments
    (RuntimeError, the etops refusal chained) - upstream's tests expect that type."""

    def refusing(*args, **kwargs):
        try:
            return call(*args, **kwargs)
        except (KernelError, ValueError, TypeError) as exc:
            raise RuntimeError(f"{kernel_name} (through etops): {exc}") from exc

    return refusing


def kernel_call(kernel_name: str, variant: str):
    """What the routed torch op of `kernel_name` runs ("functional": sized by etops,
    "out": the caller's out): the registry's kernel through etops, its refusals raised
    as torch's (_as_torch_refusal). The replay (llm_replay) calls kernels through it too."""
    kernel = registry().get_kernel(kernel_name)

    def call(*args, **kwargs):
        if kernel_name == "preprocess::tile_crop.out":  # its out size depends on the data: torch's sizing would call back here
            image, tile = args[0], args[1] if len(args) > 1 else kwargs["tile_size"]
            out = torch.empty((image.shape[1] // tile) * (image.shape[2] // tile), image.shape[0], tile, tile, dtype=image.dtype)
            return kernel(*args, **kwargs, out=out)
        return kernel(*args, **kwargs)

    def call_out(*args, **kwargs):
        return kernel(*args, **kwargs)

    if variant not in ("functional", "out"):
        raise ValueError(f"kernel_call: argument 'variant' must be 'functional' or 'out', got {variant!r}")
    return _as_torch_refusal(kernel_name, call if variant == "functional" else call_out)


def _routes(kernel_name: str, routing: Routing, recorder=None):
    """(functional, out variant): torch op implementations calling `kernel_name`
    through etops (kernel_call), counting their calls in `routing`, each recorded by
    `recorder` (an llm_replay.Recorder) when given."""
    def route(variant: str):
        call = kernel_call(kernel_name, variant)

        def routed_call(*args, **kwargs):
            routing.calls[kernel_name] = routing.calls.get(kernel_name, 0) + 1
            if recorder is None:
                return call(*args, **kwargs)
            return recorder.call(kernel_name, variant, call, args, kwargs)

        return routed_call

    return route("functional"), route("out")


@contextlib.contextmanager
def routed(kernels=None, recorder=None):
    """While in force, ``torch.ops.<ns>.<op>`` (and ``.out``) on CPU tensors call
    the kernel registered for ``<ns>::<op>.out`` through etops (`kernels`: the
    kernel names to route, None: all of ROUTES; `recorder`: an llm_replay.Recorder
    recording each call). Yields a Routing counting the calls. torch's own
    implementations come back on exit."""
    load_llm_custom_ops()
    wanted = set(ROUTES.values()) if kernels is None else set(kernels)
    unknown = wanted - set(ROUTES.values())
    if unknown:
        raise ValueError(f"routed: argument 'kernels' names kernels with no torch op to route: {sorted(unknown)}")
    routing, libraries = Routing(), {}
    try:
        for (namespace, op), kernel_name in ROUTES.items():
            if kernel_name not in wanted:
                continue
            lib = libraries.get(namespace)
            if lib is None:
                lib = libraries[namespace] = torch.library.Library(namespace, "IMPL")
            functional, out = _routes(kernel_name, routing, recorder)
            with _quiet_override():
                lib.impl(op, functional, "CPU")
                lib.impl(f"{op}.out", out, "CPU")
        yield routing
    finally:
        for lib in libraries.values():
            lib._destroy()


@contextlib.contextmanager
def _quiet_override():
    """torch warns when a Library overrides an implementation: here that is the point."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _outcomes(result: unittest.TestResult, ran: list) -> list[TestOutcome]:
    bad = {t.id(): ("failed", tb.strip().splitlines()[-1]) for t, tb in result.failures + result.errors}
    skipped = {t.id(): ("skipped", why) for t, why in result.skipped}
    out = []
    for test_id in ran:
        status, why = bad.get(test_id) or skipped.get(test_id) or ("passed", "")
        out.append(TestOutcome(test_id, status, why[:300]))
    return out


def _test_ids(suite) -> list[str]:
    ids: list[str] = []
    for item in suite:
        ids.extend(_test_ids(item) if isinstance(item, unittest.TestSuite) else [item.id()])
    return ids


@functools.lru_cache(maxsize=64)
def torch_ops_called(source: str) -> frozenset:
    """The (namespace, op) of every ``torch.ops.<namespace>.<op>`` the Python
    `source` names (read from its syntax tree: attribute chains, not text); kept per
    source text (a --watch round asks again for the same test files)."""
    import ast

    called = set()
    for node in ast.walk(ast.parse(source)):
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id == "torch" and len(chain) >= 3 and chain[-1] == "ops":
            called.add((chain[-2], chain[-3]))
    return frozenset(called)


def files_calling(folder, kernels) -> list:
    """The upstream test files (``test_*.py``) in `folder` that call a torch op
    routed to one of `kernels` (kernel names of ROUTES), sorted; a file that does
    not parse is left out."""
    from pathlib import Path

    wanted = {route for route, kernel in ROUTES.items() if kernel in set(kernels)}
    files = []
    for path in sorted(Path(folder).glob("test_*.py")):
        try:
            called = torch_ops_called(path.read_text())
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        if called & wanted:
            files.append(path)
    return files


def run_test_file(path, kernels=None, pattern: str | None = None, recorder=None) -> list[TestOutcome]:
    """Runs the upstream test file at `path` (a checkout's copy: imported as a module
    of TEST_PACKAGE, so its relative imports reach the wheel's package) with
    unittest, the torch ops of `kernels` (None: all of ROUTES) routed to the
    registry's kernels; `pattern` as in run_tests; `recorder` (llm_replay.Recorder)
    records each routed call, with the test making it. A file that cannot be imported
    is one failed test named after it. Returns one TestOutcome per test."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(path)
    if not path.is_file() or path.suffix != ".py":
        raise ValueError(f"run_test_file: argument 'path' must be a Python file, got {str(path)!r}")
    importlib.import_module(TEST_PACKAGE)
    name = f"{TEST_PACKAGE}.{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"run_test_file: argument 'path' cannot be imported: {str(path)!r}")
    try:
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the file's own imports (a package it needs is missing)
        return [TestOutcome(name, "failed", f"cannot import: {type(exc).__name__}: {exc}"[:300])]
    return _run_module(module, pattern, routed(kernels, recorder), recorder)


class _NamingResult(unittest.TestResult):
    """unittest's result, telling `recorder` which test runs (its ``test``)."""

    def __init__(self, recorder):
        super().__init__()
        self._recorder = recorder

    def startTest(self, test):
        self._recorder.test = test.id()
        super().startTest(test)


def _run_module(module, pattern, routing, recorder=None) -> list[TestOutcome]:
    """The tests of `module` (those whose id contains `pattern`) run with unittest
    under the context `routing`, what they print kept from the terminal."""
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    if pattern:
        suite = unittest.TestSuite(t for t in _flatten(suite) if pattern in t.id())
    ran = _test_ids(suite)
    result = unittest.TestResult() if recorder is None else _NamingResult(recorder)
    with routing, contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()), _kernel_logs_off():
        suite.run(result)
    return _outcomes(result, ran)


@contextlib.contextmanager
def _kernel_logs_off():
    """What ExecuTorch code logs while upstream's tests run stays off the terminal
    (a logging handler holds the terminal's stream, which redirect_stderr does not
    reach): the library's ATen wrappers the tests call for their expected values run
    its kernels without a temp allocator, which log an error each time. The tests'
    outcomes are the result."""
    was = _logs.logger.disabled
    _logs.logger.disabled = True
    try:
        yield
    finally:
        _logs.logger.disabled = was


def run_tests(modules=TEST_MODULES, pattern: str | None = None, route: bool = True) -> list[TestOutcome]:
    """Runs upstream's test `modules` (names in TEST_PACKAGE) with unittest, the
    torch ops routed to the registry's kernels (`route` False: torch's own
    implementations, i.e. the wheel's ATen wrappers); `pattern`: only tests
    whose id contains it. A module that cannot be imported is one failed test
    named after it. Returns one TestOutcome per test."""
    outcomes: list[TestOutcome] = []
    for name in modules:
        if name not in TEST_MODULES:
            raise ValueError(f"run_tests: argument 'modules' names {name!r}, not one of {TEST_MODULES}")
        try:
            module = importlib.import_module(f"{TEST_PACKAGE}.{name}")
        except Exception as exc:  # noqa: BLE001 - the module's own imports (a package it needs is missing)
            outcomes.append(TestOutcome(f"{TEST_PACKAGE}.{name}", "failed", f"cannot import: {type(exc).__name__}: {exc}"[:300]))
            continue
        outcomes.extend(_run_module(module, pattern, routed() if route else contextlib.nullcontext()))
    return outcomes


def _flatten(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _flatten(item)
        else:
            yield item


def summary(outcomes) -> str:
    """'N passed, M failed, K skipped' of `outcomes`."""
    counts = {s: sum(o.status == s for o in outcomes) for s in ("passed", "failed", "skipped")}
    return ", ".join(f"{n} {s}" for s, n in counts.items())


def main(argv=None) -> int:
    """``python -m etops.conformance.llm_upstream [MODULE ...] [-k TEXT] [--unrouted]``:
    one line per test that did not pass, then the counts; exit 1 when any failed."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m etops.conformance.llm_upstream", description=__doc__.split("\n\n")[0])
    p.add_argument("modules", nargs="*", default=list(TEST_MODULES), help=f"test modules (default: all of {', '.join(TEST_MODULES)})")
    p.add_argument("-k", dest="pattern", help="only tests whose id contains this")
    p.add_argument("--unrouted", action="store_true", help="torch's own implementations (the wheel's ATen wrappers), not the registry's")
    args = p.parse_args(argv)
    try:
        outcomes = run_tests(args.modules, args.pattern, route=not args.unrouted)
    except ValueError as exc:
        p.error(str(exc))
    for o in outcomes:
        if o.status != "passed":
            print(f"{o.status:8} {o.test}: {o.why}")
    print(summary(outcomes))
    return 1 if any(o.status == "failed" for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
