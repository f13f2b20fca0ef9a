"""``etops dev --changed [REV]``: the kernel files a change touches: every kernel
source changed since REV in the git checkout (committed since, staged, unstaged or
new), and every kernel source including (directly or through other headers) a
header changed since REV."""

from __future__ import annotations

from pathlib import Path

from .checkout import SOURCE_SUFFIXES, YAML_NAMES, CheckoutError, checkout_headers

HEADER_SUFFIXES = (".h", ".hpp", ".hh", ".cuh")


def _has_yaml_above(path: Path, top: Path) -> bool:
    for folder in path.parents:
        if any((folder / n).is_file() for n in YAML_NAMES):
            return True
        if folder == top:
            return False
    return False


def changed_kernel_files(anchor, rev: str, root=None) -> tuple[list[Path], list[str]]:
    """(kernel sources to check, notes) for the change since `rev` of the git
    checkout holding `anchor` (a path in it, or `root`)."""
    from .base import git_toplevel, changed_since

    top = git_toplevel(Path(root or anchor).resolve())
    if top is None:
        raise CheckoutError(f"--changed: {root or anchor} is not in a git checkout")
    changed = changed_since(top, rev)
    sources = [p for p in changed if p.suffix in SOURCE_SUFFIXES and _has_yaml_above(p, top)]
    headers = {p for p in changed if p.suffix in HEADER_SUFFIXES}
    notes = [f"--changed {rev}: {len(changed)} changed file{'s' if len(changed) != 1 else ''}, "
             f"{len(sources)} kernel source{'s' if len(sources) != 1 else ''}, {len(headers)} header{'s' if len(headers) != 1 else ''}"]
    if headers:
        from ..custom import cache_dir
        from .checkout import include_root

        roots = [include_root(top, cache_dir()), top]
        including = []
        for source in sorted(top.rglob("*")):
            if source.suffix not in SOURCE_SUFFIXES or source in sources or not _has_yaml_above(source, top):
                continue
            if headers & checkout_headers(source, roots):
                including.append(source.resolve())
        if including:
            notes.append(f"including a changed header: {', '.join(p.name for p in including)}")
        sources += including
    return sources, notes
