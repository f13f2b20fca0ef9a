"""A kernel file in an ExecuTorch checkout (or an out-of-tree folder laid out the
same way): its source root, the YAML mapping operators to kernel functions, the
operators the file implements and the checkout headers it includes.

Nothing here compiles or touches the registry; it reads files.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import CheckoutError, NoOperators

#: The YAML files ExecuTorch's kernel folders register their kernels in.
YAML_NAMES = ("functions.yaml", "custom_ops.yaml", "optimized.yaml", "quantized.yaml")
#: Kernel sources etops dev picks from a folder.
SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx")


@dataclass(frozen=True)
class YamlKernel:
    """One operator of a kernel YAML: its full name ('aten::add.out'), the kernel
    function the YAML names, the schema a ``func:`` entry gives (None for ``op:``
    entries, whose schema is ATen's) and whether it is registered for specific
    dtypes / dim orders (``arg_meta``) rather than as the fallback."""

    op: str
    function: str
    schema: str | None
    keyed: bool
    yaml: str


@dataclass(frozen=True)
class Implemented:
    """An operator a source file implements: the YAML entry and the qualified C++
    function the file defines for it."""

    entry: YamlKernel
    function: str


_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def _strip_comments(text: str) -> str:
    """The source without comments and string contents (same line numbers)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def includes(text: str) -> list[str]:
    """The paths a source #includes, in order."""
    return _INCLUDE.findall(text)


def wheel_include_dir() -> Path:
    from ..custom import toolchain

    return Path(toolchain().include_dirs[0])


def find_checkout(path: Path, root: str | os.PathLike | None = None, *, provided=None) -> Path:
    """The checkout folder of `path`, a kernel file or a kernel test file: `root`
    when given, else the nearest folder above the file where every
    ``executorch/...`` include resolves that the wheel lacks and that is not
    `provided` (``provided(include)``: whether etops makes it, as gtest does a test's
    generated headers). A file including none of those: the nearest folder above
    it holding a kernel YAML (its parent's parent when that folder is
    ``kernels/<name>``) or a ``kernels`` folder. CheckoutError when there is none."""
    if root is not None:
        found = Path(root).resolve()
        if not found.is_dir():
            raise CheckoutError(f"--root {root}: no such folder")
        return found
    text = path.read_text()
    wheel = wheel_include_dir()
    local = [inc[len("executorch/"):] for inc in includes(text)
             if inc.startswith("executorch/") and not (provided is not None and provided(inc)) and not (wheel / inc).exists()]
    parents = list(path.resolve().parents)
    if local:
        for folder in parents:
            if all((folder / rel).exists() for rel in local):
                return folder
        raise CheckoutError(f"{path}: no folder above it holds {'executorch/' + local[0]} (give the checkout with --root)")
    for folder in parents:
        if any((folder / name).exists() for name in YAML_NAMES):
            return folder.parent.parent if folder.parent.name == "kernels" else folder
        if (folder / "kernels").is_dir():
            return folder
    raise CheckoutError(f"{path}: no kernel YAML ({', '.join(YAML_NAMES)}) in any folder above it (give one with --yaml)")


def include_root(checkout: Path, cache: Path) -> Path:
    """The folder to put on the include path so that ``executorch/...`` resolves
    into `checkout`: its parent when it is named executorch, else a folder in the
    cache holding a link named executorch to it."""
    if checkout.name == "executorch":
        return checkout.parent
    digest = hashlib.sha256(str(checkout).encode()).hexdigest()[:16]
    folder = cache / "roots" / digest
    link = folder / "executorch"
    if not link.exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"executorch.{os.getpid()}"
        os.symlink(checkout, tmp)
        os.replace(tmp, link)
    return folder


def find_yamls(path: Path, given=None) -> list[Path]:
    """The kernel YAMLs for kernel file `path`: those `given`, else the ones in the
    nearest folder above the file that has any."""
    if given:
        paths = [Path(g).resolve() for g in ([given] if isinstance(given, (str, os.PathLike)) else given)]
        for p in paths:
            if not p.is_file():
                raise CheckoutError(f"--yaml {p}: no such file")
        return paths
    for folder in path.resolve().parents:
        found = [folder / name for name in YAML_NAMES if (folder / name).is_file()]
        if found:
            return found
    raise CheckoutError(f"{path}: no kernel YAML ({', '.join(YAML_NAMES)}) in any folder above it (give one with --yaml)")


#: (path, mtime, size) -> its entries: a --watch round reads the same YAML again
_READ: dict = {}


def read_yaml(path: Path) -> list[YamlKernel]:
    """Every operator `path` registers a kernel for. ``op: add.out`` entries are
    aten operators; ``func: ns::name.overload(...) -> ...`` entries carry their
    schema (namespace aten when none is written). Read again only when the file
    changed (its modification time or size)."""
    try:
        stat = path.stat()
        key = (str(path), stat.st_mtime_ns, stat.st_size)
    except OSError:
        key = None
    if key is not None and key in _READ:
        return list(_READ[key])
    entries = _parse_yaml(path)
    if key is not None:
        _READ[key] = tuple(entries)
    return entries


def _parse_yaml(path: Path) -> list[YamlKernel]:
    import yaml

    try:  # libyaml's loader when PyYAML has it: the portable functions.yaml in 7 ms, not 56
        data = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or []
    except yaml.YAMLError as exc:
        raise CheckoutError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, list):
        raise CheckoutError(f"{path}: a kernel YAML is a list of '- op:' / '- func:' entries")
    out = []
    for entry in data:
        if not isinstance(entry, dict) or not ("op" in entry or "func" in entry):
            continue
        schema = None
        if "func" in entry:
            schema = str(entry["func"]).strip()
            head = schema.split("(", 1)[0].strip()
        else:
            head = str(entry["op"]).strip()
        op = head if "::" in head else f"aten::{head}"
        if schema is not None and "::" not in schema.split("(", 1)[0]:
            schema = "aten::" + schema
        for kernel in entry.get("kernels") or ():
            name = (kernel or {}).get("kernel_name")
            if name:
                out.append(YamlKernel(op, str(name), schema, kernel.get("arg_meta") is not None, str(path)))
    return out


_TOKEN = re.compile(r"\bnamespace\s+([\w:]+)\s*\{|\bnamespace\s*\{|[{}]")
_FUNCTION = re.compile(r"([A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)\s*\(\s*(?:::)?(?:(?:executorch::runtime|torch::executor)::)?(?:KernelRuntimeContext|RuntimeContext)\s*&")


#: a kernel defined by a macro at namespace scope: DEFINE_UNARY_UFUNC_...(acos_out, std::acos)
_MACRO = re.compile(r"\b[A-Z][A-Z0-9_]*\s*\(\s*([a-z_]\w*_out)\s*[,)]")


def _namespaces_at(code: str, position: int) -> list[str] | None:
    """The namespaces open at `position`; None when inside a function or class body."""
    stack: list[str | None] = []
    for t in _TOKEN.finditer(code, 0, position):
        if t.group(0) == "}":
            if stack:
                stack.pop()
        elif t.group(0) == "{":
            stack.append(None)
        else:
            stack.append(t.group(1) or "")
    if any(s is None for s in stack):
        return None
    return [s for s in stack if s]


def defined_functions(text: str) -> dict[str, str]:
    """Unqualified name -> qualified name of every kernel function the source
    defines: with a body and a KernelRuntimeContext& first parameter, or by a macro
    invoked at namespace scope whose first argument is a name ending in ``_out``."""
    code = _strip_comments(text)
    found: dict[str, str] = {}
    for m in _FUNCTION.finditer(code):
        # a definition: the parameter list closes and a body opens before any ';'
        depth, j = 0, m.end(1)
        while j < len(code):
            if code[j] == "(":
                depth += 1
            elif code[j] == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        rest = code[j + 1:j + 400].lstrip()
        if not rest.startswith("{") and not re.match(r"(const\s*)?(noexcept\s*)?(->[^{;]*)?\{", rest):
            continue
        namespaces = _namespaces_at(code, m.start())
        if namespaces is None:  # inside a function or class body: a call, not a definition
            continue
        name = m.group(1)
        found.setdefault(name.rsplit("::", 1)[-1], "::".join(namespaces + [name]))
    for m in _MACRO.finditer(code):
        namespaces = _namespaces_at(code, m.start())
        if namespaces is not None and not code[:m.start()].rstrip().endswith("#define"):
            found.setdefault(m.group(1), "::".join(namespaces + [m.group(1)]))
    return found


def implemented(path: Path, entries: list[YamlKernel]) -> list[Implemented]:
    """The operators of `entries` whose kernel function `path` defines (matched by
    the function's unqualified name; the file's namespaces give the qualified one)."""
    functions = defined_functions(path.read_text())
    out = []
    for e in entries:
        short = e.function.rsplit("::", 1)[-1]
        if short in functions:
            out.append(Implemented(e, functions[short]))
    return out


def checkout_headers(path: Path, roots: list[Path], *, depth: int | None = None, memo: dict | None = None) -> set[Path]:
    """The headers `path` includes, directly or through each other (`depth` 1:
    directly only), that lie in one of `roots` (what --watch rebuilds on besides
    the file itself). `memo`: a dict kept across calls on the same roots, holding
    each file's direct includes (--changed reads every source of a checkout)."""
    seen: set[Path] = set()
    todo = [(path, 0)]
    while todo:
        current, level = todo.pop()
        if depth is not None and level >= depth:
            continue
        for c in _direct_headers(current, roots, memo):
            if c not in seen:
                seen.add(c)
                todo.append((c, level + 1))
    return seen


def _direct_headers(current: Path, roots: list[Path], memo: dict | None) -> list[Path]:
    """The headers in `roots` that `current` #includes itself (resolved)."""
    if memo is not None and current in memo:
        return memo[current]
    found = []
    try:
        text = current.read_text()
    except OSError:
        text = ""
    for inc in includes(text):
        for c in [current.parent / inc] + [r / inc for r in roots]:
            if c.is_file():
                c = c.resolve()
                if any(_within(c, r) for r in roots):
                    found.append(c)
                break
    if memo is not None:
        memo[current] = found
    return found


def _within(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root.resolve())
        return True
    except ValueError:
        return False


def kernel_files(paths) -> list[Path]:
    """The kernel sources `paths` name: files as given, folders' sources (not
    recursive), sorted."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            out += sorted(q for q in p.iterdir() if q.suffix in SOURCE_SUFFIXES and q.is_file())
        elif p.is_file():
            out.append(p)
        else:
            raise CheckoutError(f"{p}: no such file or folder")
    if not out:
        raise CheckoutError(f"no kernel sources ({', '.join(SOURCE_SUFFIXES)}) in {', '.join(map(str, paths))}")
    return [p.resolve() for p in out]
