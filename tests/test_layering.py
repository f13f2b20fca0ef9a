"""The layering rules of docs/architecture.md: the core never imports an extension
(at module level or inside a function), no module imports another module's
underscore names, no import cycle between modules nor between packages (each
package imports only the layers below it, LAYERS), and importing the core in a
fresh interpreter loads no extension."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import etops
from fresh_python import run_python

PACKAGE = Path(etops.__file__).resolve().parent

#: The extensions: subpackages (and modules) the core may not import.
EXTENSIONS = ("custom", "delegate", "edge", "conformance", "bench", "fuzz", "cli", "testing", "needs", "guard", "dev", "gtest", "upstream",
              "checkout")


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, parts


def _is_core(parts) -> bool:
    return not parts or parts[0] not in EXTENSIONS and parts[0] != "__main__"


def _imports(path: Path, parts):
    """(line, imported module relative to the etops package or None, names) for
    every import in the file, function-level ones included."""
    tree = ast.parse(path.read_text(), str(path))
    package = parts if path.name == "__init__.py" else parts[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level + 1])
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "etops":
                target = node.module.split(".")[1:]
            else:
                continue
            yield node.lineno, tuple(target), [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "etops":
                    yield node.lineno, tuple(alias.name.split(".")[1:]), []
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).lstrip(".").split(".")[0] in EXTENSIONS:
                yield node.lineno, tuple(str(node.args[0].value).lstrip(".").split(".")), []


def _is_extension_target(target, names) -> bool:
    if target and target[0] in EXTENSIONS:
        return True
    return not target and any(n in EXTENSIONS for n in names)  # from . import custom


def test_the_core_never_imports_an_extension():
    found = []
    for path, parts in _modules():
        if not _is_core(parts) or parts == ():  # the package __init__ maps lazy names to extensions
            continue
        for line, target, names in _imports(path, parts):
            if _is_extension_target(target, names):
                found.append(f"{path.relative_to(PACKAGE)}:{line} imports etops.{'.'.join(target) or names}")
    assert found == []


def test_the_package_init_names_extensions_only_in_its_lazy_table():
    init = PACKAGE / "__init__.py"
    found = [f"line {line}" for line, target, names in _imports(init, ()) if _is_extension_target(target, names)]
    assert found == []
    assert {"custom_op", "register_kernel", "delegate", "bench", "edge"} <= set(etops._LAZY)


def test_no_module_imports_another_modules_underscore_names():
    found = []
    for path, parts in _modules():
        for line, target, names in _imports(path, parts):
            private = [i for i, part in enumerate(target) if part.startswith("_")]
            # a private module may be imported from inside its own package only
            if private and tuple(parts[: private[0]]) != target[: private[0]]:
                found.append(f"{path.relative_to(PACKAGE)}:{line} imports module etops.{'.'.join(target)}")
            for name in names:
                if name.startswith("_") and name != "__version__" and name not in ("_native", "_logs", "_runtime_patch"):
                    found.append(f"{path.relative_to(PACKAGE)}:{line} imports {name} from etops.{'.'.join(target)}")
    assert found == []


def test_every_exception_class_lives_in_errors():
    from etops import errors

    found = []
    for path, parts in _modules():
        if parts == ("errors",):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if any(b.endswith("Error") or b == "Exception" for b in bases):
                    found.append(f"{'/'.join(parts)}.{node.name}")
    # Control flow inside one module, never raised to a user's code: the command
    # line's usage errors (printed as usage) and a fuzz worker's crash record.
    internal = {"cli/usage.UsageError", "fuzz/runner.Crash"}
    assert sorted(set(found) - internal) == []
    public = [v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, Exception) and v.__module__ == errors.__name__]
    assert all(issubclass(v, errors.EtopsError) for v in public)
    for name in ("RegistrationError", "DuplicateKernelError", "RegistryFullError", "BuildError", "UnsupportedNodeError"):
        assert getattr(etops, name) is getattr(errors, name)


@pytest.mark.parametrize("module", ["etops", "etops.registry", "etops.kernel"])
def test_importing_the_core_loads_no_extension(module):
    result = run_python(
        f"""
        import json, sys
        import {module}
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("etops."))))
        """
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert [m for m in loaded if m.split(".")[1] in EXTENSIONS] == []


def test_lazy_names_load_on_first_use_and_bench_stays_the_function():
    result = run_python(
        """
        import sys, etops
        assert "etops.custom" not in sys.modules
        import etops.bench.core          # binds the subpackage on etops: etops.bench stays the function
        assert callable(etops.bench) and etops.bench.__name__ == "bench", etops.bench
        assert etops.register_kernel.__module__ == "etops.custom.registration"
        assert "etops.custom" in sys.modules
        assert {"custom_op", "delegate", "backends", "set_num_threads"} <= set(dir(etops))
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("ok")


def test_origins_are_answered_by_the_core_before_custom_loads():
    result = run_python(
        """
        import sys, etops
        origins = etops.registry().aten.add.out.origins
        assert "etops.custom" not in sys.modules
        assert [o.kind for o in origins] == ["built-in"], origins
        import etops.custom
        assert etops.registry().aten.add.out.origins == origins
        print("ok")
        """
    )
    assert result.returncode == 0, result.stderr


def _module_graph() -> dict:
    """module (a tuple of names under etops) -> the modules of etops it imports,
    at module level or inside a function: ``from . import x`` names module x when
    there is one, the package otherwise; a module's own package is not counted
    (importing etops.a.b runs etops/a/__init__.py, which is no choice of b's)."""
    modules = {parts: path for path, parts in _modules()}
    graph: dict = {parts: set() for parts in modules}
    for parts, path in modules.items():
        for _line, target, names in _imports(path, parts):
            found = [target + (n,) for n in names if target + (n,) in modules]
            if len(found) < len(names) or not names:
                found.append(target)
            graph[parts] |= {t for t in found if t in modules and t != parts}
    return graph


def _cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan's), each
    sorted: every import cycle lies inside one of them."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    found = []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(".".join(m) or "etops" for m in component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles():
    """No module of etops imports, directly or through others, a module that
    imports it back (function-level imports included): each layer can be read,
    tested and changed on top of the ones below it."""
    graph = _module_graph()
    assert ("kernel",) in graph[("registry",)]  # a module-level import
    assert ("checkout", "install") in graph[("checkout", "load")]  # one inside a function
    assert _cycles(graph) == []


#: The packages of etops, as docs/architecture.md draws them, each with the
#: packages it may import (function-level imports included) besides the core: the
#: top-level modules, ops/ and _native/ (every package may import the core, which
#: imports none). A package imports only the layers below its own.
LAYERS = {
    # 1: on the core only
    "custom": set(),
    "delegate": set(),
    "guard": set(),
    # 2
    "checkout": {"custom"},
    "edge": {"delegate"},
    "needs": {"delegate"},
    # 3: the tools on a checkout, each from below
    "conformance": {"checkout", "guard"},
    "gtest": {"checkout", "custom"},
    "fuzz": {"checkout", "guard"},
    "bench": {"checkout", "delegate", "edge"},
    # 4
    "testing": {"conformance"},
    "dev": {"bench", "checkout", "conformance", "custom", "gtest", "guard"},
    "upstream": {"checkout", "conformance", "custom", "gtest"},
    # 5: the command line
    "cli": {"bench", "checkout", "conformance", "custom", "dev", "fuzz", "gtest", "upstream"},
    "__main__": {"cli"},
}


def _package_of(module: tuple) -> str:
    """The package a module (a tuple of names under etops) belongs to: its
    subpackage of etops, ``testing`` and ``__main__`` (extensions of one module),
    or ``core`` (the top-level modules, the package's __init__, ops/ and _native/)."""
    if not module or module[0] in ("ops", "_native"):
        return "core"
    if module[0] in ("testing", "__main__") or len(module) > 1 or (PACKAGE / module[0]).is_dir():
        return module[0]
    return "core"


def _package_graph(graph: dict) -> dict:
    """package -> {package it imports: ["importing module -> imported module", ...]}
    from the module graph (function-level imports included)."""
    packages: dict = {}
    for module, targets in graph.items():
        edges = packages.setdefault((_package_of(module),), {})
        for target in targets:
            if _package_of(target) != _package_of(module):
                edges.setdefault((_package_of(target),), []).append(f"{'.'.join(module)} -> {'.'.join(target) or 'etops'}")
    return packages


def test_no_import_cycles_between_packages():
    """No package imports, directly or through others, a package that imports it
    back, function-level imports included: one package is read, tested and changed
    on top of the ones below it (etops.bench -> bench.runall -> dev.load -> dev.loop
    -> ... -> dev.timing -> etops.bench was such a cycle)."""
    packages = _package_graph(_module_graph())
    assert ("checkout",) in packages[("bench",)]  # bench.runall's --load, imported inside a function
    assert _cycles({p: set(targets) for p, targets in packages.items()}) == []


def test_each_package_imports_only_the_layers_below_it():
    packages = _package_graph(_module_graph())
    assert sorted(p for (p,) in packages if p != "core") == sorted(LAYERS), "a package to place in LAYERS (and docs/architecture.md)"
    found = [f"{edge} ({package} may import {sorted(LAYERS[package]) or 'the core only'})"
             for (package,), targets in packages.items() if package != "core"
             for (target,), edges in targets.items() if target != "core" and target not in LAYERS[package]
             for edge in edges]
    assert found == []
    assert packages[("core",)] == {}  # the core imports no package


def test_the_layers_have_no_cycle_and_the_checkout_is_below_its_tools():
    assert _cycles({(p,): {(t,) for t in targets} for p, targets in LAYERS.items()}) == []
    for tool in ("dev", "gtest", "conformance", "bench", "fuzz", "upstream"):
        assert "checkout" in LAYERS[tool] and tool not in LAYERS["checkout"]
    assert "dev" not in LAYERS["gtest"] | LAYERS["conformance"] | LAYERS["bench"]  # dev is a tool, no supplier


def test_the_package_graph_sees_a_cycle_through_a_function_level_import():
    graph = {("bench", "runall"): {("dev", "load")}, ("dev", "load"): {("dev", "timing")}, ("dev", "timing"): {("bench",)},
             ("bench",): set()}
    packages = _package_graph(graph)
    assert _cycles({p: set(t) for p, t in packages.items()}) == [["bench", "dev"]]


def test_the_cycle_finder_finds_a_cycle():
    graph = {("a",): {("b",)}, ("b",): {("c",)}, ("c",): {("a",)}, ("d",): {("a",)}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({("a",): {("b",)}, ("b",): set()}) == []
