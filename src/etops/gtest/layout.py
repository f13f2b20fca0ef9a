"""A kernel test file of an ExecuTorch checkout (or an out-of-tree folder laid out
the same way; etops.checkout finds the checkout, ``is_generated`` telling it
which includes etops makes): the ``<op>_outf`` and ``native::`` functions it calls, the headers a build of ExecuTorch
would generate for it, the checkout sources its headers need compiled with it, the
kernel set whose ``supported_features_def.yaml`` applies; and the test files of a
kernel file with the kernel set of its folder.

Nothing here compiles or touches the registry; it reads files.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..checkout.layout import YAML_NAMES, YamlKernel, checkout_headers, includes, read_yaml, wheel_include_dir
from ..checkout.self_registering import registrations
from ..errors import CheckoutError

#: Headers etops generates for every test (never looked for in the checkout).
FUNCTIONS_HEADER = "executorch/kernels/test/FunctionHeaderWrapper.h"
FEATURES_HEADER = "executorch/kernels/test/supported_features.h"
GENERATED = (FUNCTIONS_HEADER, FEATURES_HEADER)
#: A kernel folder's generated declarations: ``executorch/kernels/<folder>/Functions.h``
#: (the ``<op>_outf`` functions) and ``NativeFunctions.h`` (the kernels' own C++ names,
#: ``torch::executor::native::<kernel>``), made by upstream's codegen from the folder's YAML
_FOLDER_HEADER = re.compile(r"^executorch/(kernels/(?:\w+/)*\w+)/(NativeFunctions|Functions)\.h$")

#: What a folder contributes: upstream's op test files.
TEST_GLOB = "op_*_test.cpp"

#: A call of a generated function: torch::executor::<namespace>::<name>_outf (an out
#: variant) or torch::executor::<namespace>::<name>_ (an in-place variant)
_CALL = re.compile(r"\btorch::executor::(\w+)::(\w+?(?:_outf|_))\s*\(")
#: A use of a kernel by its C++ name: torch::executor::native::<kernel> (a call or a using-declaration)
_NATIVE = re.compile(r"\btorch::executor::native::(\w+)\b")


def is_generated(include: str) -> bool:
    """Whether etops generates `include` (``executorch/...``) for a test rather than
    finding it in the checkout: FunctionHeaderWrapper.h, supported_features.h, and a
    kernel folder's Functions.h / NativeFunctions.h."""
    return include in GENERATED or _FOLDER_HEADER.match(include) is not None


def folder_header(include: str) -> tuple[str, str] | None:
    """(kernel folder relative to the checkout, "Functions" or "NativeFunctions") of a
    generated folder header (``executorch/kernels/quantized/NativeFunctions.h`` ->
    ("kernels/quantized", "NativeFunctions")), else None."""
    m = _FOLDER_HEADER.match(include)
    return (m.group(1), m.group(2)) if m else None


@dataclass(frozen=True)
class TestFile:
    """One test source and what building it needs."""

    path: Path
    checkout: Path  #: the folder ``executorch/...`` includes resolve into
    functions: tuple[tuple[str, str], ...]  #: (namespace, C++ name) of each ``<op>_outf`` / ``<op>_`` called
    natives: tuple[str, ...]  #: C++ names of kernels used as ``torch::executor::native::<name>``
    #: the kernel folders' generated headers included: (include, folder, kind), e.g.
    #: ("executorch/kernels/quantized/NativeFunctions.h", "kernels/quantized", "NativeFunctions")
    generated: tuple[tuple[str, str, str], ...]
    helpers: tuple[Path, ...]  #: checkout sources next to included checkout headers (X.h -> X.cpp), compiled with it
    headers: tuple[Path, ...]  #: checkout headers the file includes, directly or not
    uses_features: bool  #: whether supported_features.h is included (directly or through a header)
    #: such sources that register their kernels themselves (extension/llm/custom_ops/op_sdpa.cpp):
    #: not compiled; the test calls the functions of the library that registered those kernels
    registering: tuple[Path, ...] = ()


def _companions(headers, roots) -> list[Path]:
    """The checkout sources next to `headers` (X.h -> X.cpp), and the C sources next
    to the headers those sources include, transitively (X.h -> X.c: the FFHT
    transform a spinquant test helper calls); in order, each once."""
    found: list[Path] = [h.with_suffix(".cpp") for h in headers if h.suffix == ".h" and h.with_suffix(".cpp").is_file()]
    seen = set(headers)
    todo = list(found)
    while todo:
        for header in sorted(checkout_headers(todo.pop(0), roots) - seen):
            seen.add(header)
            source = header.with_suffix(".c")
            if header.suffix == ".h" and source.is_file() and source not in found:
                found.append(source)
                todo.append(source)
    return found


def test_files(paths) -> list[Path]:
    """The test sources `paths` name: files as given, folders' ``op_*_test.cpp``
    (not recursive), sorted; CheckoutError for a path that does not exist or a
    folder without tests."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob(TEST_GLOB))
            if not found:
                raise CheckoutError(f"{p}: no test files ({TEST_GLOB}) in this folder")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise CheckoutError(f"{p}: no such file or folder")
    return [p.resolve() for p in dict.fromkeys(out)]


def describe(path: Path, checkout: Path, include_root: Path) -> TestFile:
    """What building test `path` of `checkout` needs (`include_root`: the folder
    whose ``executorch`` is the checkout, ``etops.checkout.layout.include_root``)."""
    headers = sorted(checkout_headers(path, [include_root, checkout]))
    texts = [path.read_text()] + [h.read_text() for h in headers]
    functions = tuple(dict.fromkeys(m for t in texts for m in _CALL.findall(t)))
    natives = tuple(dict.fromkeys(m for t in texts for m in _NATIVE.findall(t)))
    generated = tuple(dict.fromkeys((inc, *found) for t in texts for inc in includes(t)
                                    if (found := folder_header(inc)) is not None))
    sources = _companions(headers, [include_root, checkout])
    registering = tuple(s for s in sources if registrations(s.read_text()))
    helpers = tuple(s for s in sources if s not in registering)
    uses = any(FEATURES_HEADER in includes(t) for t in texts)
    return TestFile(path, checkout, functions, natives, generated, helpers, tuple(headers), uses, registering)


def kernel_yamls(checkout: Path, test: Path | None = None) -> list[Path]:
    """Every kernel YAML of the checkout (``kernels/*/<functions|custom_ops|optimized|quantized>.yaml``)
    and those in the folders above `test` inside the checkout."""
    found = sorted(p for name in YAML_NAMES for p in checkout.glob(f"kernels/*/{name}"))
    if test is not None:
        for folder in test.resolve().parents:
            found += [folder / n for n in YAML_NAMES if (folder / n).is_file()]
            if folder == checkout:
                break
    return list(dict.fromkeys(p.resolve() for p in found))


def yaml_entries(checkout: Path, test: Path | None = None) -> list[YamlKernel]:
    """The operators the checkout's kernel YAMLs register."""
    return [e for y in kernel_yamls(checkout, test) for e in read_yaml(y)]


def folder_entries(checkout: Path, folder: str) -> list[YamlKernel]:
    """The operators of the kernel YAMLs in `folder` of the checkout (``kernels/quantized``:
    quantized.yaml), what its generated headers declare."""
    return [e for n in YAML_NAMES if (checkout / folder / n).is_file() for e in read_yaml(checkout / folder / n)]


def feature_sets(checkout: Path) -> dict[str, Path]:
    """Kernel set name -> its ``kernels/<set>/test/supported_features_def.yaml``."""
    return {p.parent.parent.name: p for p in sorted(checkout.glob("kernels/*/test/supported_features_def.yaml"))}


def default_kernel_set(path: Path, checkout: Path) -> str | None:
    """The set of the folder the test lives in (``kernels/<set>/test/``); for
    upstream's shared ``kernels/test/``, the wheel's aten kernels are its optimized
    set (optimized kernels, portable ones for the rest): ``optimized`` when the
    checkout defines it, else ``portable``; None when the checkout defines none."""
    sets = feature_sets(checkout)
    parent = path.resolve().parent
    if parent.name == "test" and parent.parent.parent.name == "kernels" and parent.parent.name in sets:
        return parent.parent.name
    for name in ("optimized", "portable"):
        if name in sets:
            return name
    return next(iter(sets), None)


def kernel_set_of(kernel_file: Path, checkout: Path) -> str | None:
    """The kernel set of the folder a kernel source lives in: ``kernels/<set>/...``
    (``kernels/portable/cpu/op_add.cpp`` -> portable, ``kernels/quantized/cpu/`` ->
    quantized) when the checkout defines that set (its
    ``kernels/<set>/test/supported_features_def.yaml``); None otherwise (the test's
    own default then applies)."""
    try:
        parts = kernel_file.resolve().relative_to(checkout.resolve()).parts
    except ValueError:
        return None
    if len(parts) > 2 and parts[0] == "kernels" and parts[1] in feature_sets(checkout):
        return parts[1]
    return None


def tests_of_kernel(kernel_file: Path, checkout: Path) -> list[Path]:
    """Where upstream keeps the tests of kernel file ``op_<name>.cpp``, found or not:
    the shared ``kernels/test/op_<name>_test.cpp``, then its own folder's
    ``kernels/<folder>/test/op_<name>_test.cpp`` (``kernels/quantized/test/``,
    ``kernels/portable/test/``)."""
    name = f"{kernel_file.stem}_test.cpp"
    places = [checkout / "kernels" / "test" / name]
    try:
        parts = kernel_file.resolve().relative_to(checkout.resolve()).parts
    except ValueError:
        parts = ()
    if len(parts) > 2 and parts[0] == "kernels":
        places.append(checkout / "kernels" / parts[1] / "test" / name)
    return list(dict.fromkeys(places))


def calls_any(test: TestFile, operators: dict[str, str]) -> bool:
    """Whether `test` calls one of `operators` (operator name -> its kernel's C++
    name, the YAML's kernel_name): ``torch::executor::<namespace>::<op>_outf`` (or
    ``<op>_``) of the operator's namespace and name, or the kernel by its name
    (``torch::executor::native::<kernel>``)."""
    called = {(ns, operator_base(fn)) for ns, fn in test.functions}
    natives = set(test.natives)
    for op, kernel in operators.items():
        namespace, _, rest = op.partition("::")
        if (namespace, rest.split(".", 1)[0]) in called or kernel.rsplit("::", 1)[-1] in natives:
            return True
    return False


def operator_base(function: str) -> str:
    """The operator name a generated C++ function is named after: ``add_outf`` ->
    ``add``, ``copy_`` -> ``copy_``."""
    return function[: -len("_outf")] if function.endswith("_outf") else function


def features_inputs(checkout: Path, kernel_set: str | None) -> tuple[Path | None, Path | None, Path | None]:
    """(supported_features.yaml, the set's def YAML, gen_supported_features.py) of the
    checkout, each None when absent. CheckoutError for a set the checkout lacks."""
    sets = feature_sets(checkout)
    if kernel_set is not None and kernel_set not in sets:
        known = ", ".join(sets) or "none"
        raise CheckoutError(f"--kernel-set {kernel_set}: the checkout has no kernels/{kernel_set}/test/supported_features_def.yaml (it has: {known})")
    test = checkout / "kernels" / "test"
    spec = test / "supported_features.yaml"
    gen = test / "gen_supported_features.py"
    return (spec if spec.is_file() else None, sets.get(kernel_set) if kernel_set else None, gen if gen.is_file() else None)


def relative(path: Path) -> str:
    """`path` relative to the working directory when below it, else absolute."""
    try:
        return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
    except ValueError:
        return str(path)
