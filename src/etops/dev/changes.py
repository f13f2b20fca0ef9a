"""``etops dev --changed [REV]``: the kernel files a change touches, and the helper
sources to build with each.

A kernel file implements an operator of its folder's kernel YAML, or registers
its kernels itself (the LLM custom ops' ``op_*.cpp``: no YAML,
checkout.self_registering). Every other
changed source under a kernel YAML (``util/*.cpp``, ``pattern/*.cpp``) is a
*helper*: never judged itself, it leads to the kernel files that use it, those
including its own header (the header of the same name next to it, else the
headers of its folder it includes: where its functions are declared). A changed
header leads to the kernel files including it, directly or through other headers,
and to the helpers including it. The kernels are then built with the helpers of
theirs the change touches (``Changes.helpers``): the wheel's copy of a helper is
the unchanged one. Sources in a ``test`` folder are neither.

Reads files and git (base.changed_since); imports only this package's checkout
and base modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..checkout.layout import SOURCE_SUFFIXES, YAML_NAMES, CheckoutError, checkout_headers, find_yamls, implemented, read_yaml

HEADER_SUFFIXES = (".h", ".hpp", ".hh", ".cuh")
#: folders whose sources are tests, not kernels nor helpers
TEST_FOLDERS = ("test", "tests")


@dataclass
class Changes:
    """What a change touches: the kernel files to judge, per kernel file the
    helper sources (changed, or including a changed header) it uses, to build
    with it, and what the report says about it (``notes``)."""

    files: list = field(default_factory=list)  #: kernel files (absolute), changed ones first
    helpers: dict = field(default_factory=dict)  #: kernel file -> helper sources it uses that the change touches
    notes: list = field(default_factory=list)


def _has_yaml_above(path: Path, top: Path) -> bool:
    for folder in path.parents:
        if any((folder / n).is_file() for n in YAML_NAMES):
            return True
        if folder == top:
            return False
    return False


def _in_test_folder(path: Path, top: Path) -> bool:
    return any(part in TEST_FOLDERS for part in path.relative_to(top).parts[:-1])


def registers_itself(path: Path) -> bool:
    """Whether the source `path` registers kernels itself at load (read or not:
    etops dev says why it cannot swap in one it cannot read)."""
    from ..checkout.self_registering import static_registrations

    try:
        return bool(static_registrations(path.read_text(errors="replace")))
    except OSError:
        return False


def _is_source(path: Path, top: Path) -> bool:
    """A kernel file or a helper: a source under a kernel YAML, or one registering
    kernels itself, outside a test folder."""
    return (path.suffix in SOURCE_SUFFIXES and not _in_test_folder(path, top)
            and (_has_yaml_above(path, top) or registers_itself(path)))


def is_kernel_file(path: Path) -> bool:
    """Whether `path` implements an operator of the kernel YAMLs above it, or
    registers kernels itself."""
    if registers_itself(path):
        return True
    try:
        entries = [e for y in find_yamls(path) for e in read_yaml(y)]
    except CheckoutError:
        return False
    return bool(implemented(path, entries))


def own_headers(helper: Path, top: Path, roots: list[Path]) -> set[Path]:
    """The headers declaring helper source `helper`'s functions: the header of the
    same name in its folder when it includes it, else the headers of its own folder
    it includes (a checkout header it includes from elsewhere declares nothing of it)."""
    included = checkout_headers(helper, roots, depth=1)
    same_folder = {h for h in included if h.parent == helper.parent.resolve()}
    named = {h for h in same_folder if h.stem == helper.stem}
    return named or same_folder


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _relative(paths, top: Path) -> str:
    return ", ".join(str(p.relative_to(top)) for p in paths)


def changed_kernel_files(anchor, rev: str, root=None) -> Changes:
    """The Changes since `rev` of the git checkout holding `anchor` (a path in it,
    or `root`): each changed kernel file, each kernel file including a changed
    header, each kernel file using a helper source that changed or includes a
    changed header; never a helper itself."""
    from ..custom import cache_dir
    from .base import changed_since, git_toplevel
    from ..checkout.layout import include_root

    top = git_toplevel(Path(root or anchor).resolve())
    if top is None:
        raise CheckoutError(f"--changed: {root or anchor} is not in a git checkout")
    changed = changed_since(top, rev)
    under_yaml = [p for p in changed if p.is_file() and _is_source(p, top)]
    kernels = [p for p in under_yaml if is_kernel_file(p)]
    helpers = [p for p in under_yaml if p not in kernels]
    headers = {p for p in changed if p.suffix in HEADER_SUFFIXES}
    notes = [f"--changed {rev}: {_plural(len(changed), 'changed file')}, {_plural(len(kernels), 'kernel file')}, "
             f"{_plural(len(helpers), 'helper source')}, {_plural(len(headers), 'header')}"]
    if not headers and not helpers:
        return Changes(kernels, {}, notes)
    roots = [include_root(top, cache_dir()), top]
    memo: dict = {}
    sources = [s.resolve() for s in sorted(top.rglob("*")) if s.is_file() and _is_source(s, top)]
    included = {s: checkout_headers(s, roots, memo=memo) for s in sources}
    touched_helpers = list(helpers) + [s for s in sources if s not in helpers and included[s] & headers and not is_kernel_file(s)]
    declared = {h: own_headers(h, top, roots) for h in touched_helpers}
    for h, own in declared.items():
        if not own:
            notes.append(f"{h.relative_to(top)}: a helper source no header of its folder declares; no kernel file found using it")
    wanted = headers | {x for own in declared.values() for x in own}
    using: dict = {}
    found = []
    for s in sources:
        if not (s in kernels or included[s] & wanted) or not is_kernel_file(s):
            continue
        uses = [h for h in touched_helpers if declared[h] & included[s]]
        if uses:
            using[s] = uses
        if s not in kernels:
            found.append(s)
    if headers:
        by_header = [s for s in found if included[s] & headers]
        notes.append(f"including a changed header: {', '.join(p.name for p in by_header) or 'no kernel file'}")
    if touched_helpers:
        notes.append(f"helper sources (not judged; built with the kernel files using them): {_relative(touched_helpers, top)}; "
                     f"kernel files using them: {', '.join(p.name for p in using) or 'none'}")
    return Changes(kernels + found, using, notes)
