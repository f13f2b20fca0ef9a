"""The baseline of ``etops dev``: the kernel file as it was before the edit.

``Base`` is the base asked for: the file at git ``HEAD`` (``Base.HEAD``, the
default), at a revision (``Base.revision("v1.0")``, ``--base REV``) or the wheel's
built-in kernel (``Base.BUILT_IN``, ``--base none``). ``FoundBase`` is what was
found for one file. In a git checkout the base is the file (and every checkout header it includes
that changed) at ``HEAD`` or ``--base REV``, written to an overlay folder in the
cache and compiled with the same flags as the edit (the overlay goes first on the
include path, so a changed header is its REV version too). Outside a git
checkout, or for a file that did not exist at REV, the base is the wheel's
built-in kernel (``FoundBase.kind == "built-in"``) and the report says so.

Reads git (``git show``, ``git diff --name-only``); compiles through
``install.build_target``; never touches the working tree.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from ..custom import cache_dir
from ..errors import CheckoutError


def _git(cwd: Path, *args: str, binary: bool = False):
    proc = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=not binary)
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace") if binary else proc.stderr
        raise CheckoutError(f"git {' '.join(args)}: {(err.strip().splitlines() or ['failed'])[0]}")
    return proc.stdout


def git_toplevel(path: Path) -> Path | None:
    """The top of the git work tree holding `path`, or None (not in one, or no git)."""
    folder = path if path.is_dir() else path.parent
    try:
        return Path(_git(folder, "rev-parse", "--show-toplevel").strip()).resolve()
    except (CheckoutError, OSError):
        return None


def resolve_rev(top: Path, rev: str) -> str:
    """The commit `rev` names (CheckoutError when it names none)."""
    try:
        return _git(top, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()
    except CheckoutError:
        raise CheckoutError(f"{rev!r} names no commit of the git checkout {top}") from None


def files_at(top: Path, commit: str, paths: list) -> list:
    """Each of `paths`' contents at `commit` (None where it did not exist there),
    read by one git process (``git cat-file --batch``), not one per file: a file
    includes about fifty checkout headers."""
    names = [f"{commit}:{Path(p).resolve().relative_to(top).as_posix()}" for p in paths]
    if any("\n" in n for n in names):
        raise CheckoutError("a path with a newline cannot be read from git")
    proc = subprocess.run(["git", "-C", str(top), "cat-file", "--batch"], input="".join(n + "\n" for n in names).encode(),
                          capture_output=True)
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines() or ["failed"]
        raise CheckoutError(f"git cat-file --batch: {err[0]}")
    out: list[bytes | None] = []
    at = 0
    data = proc.stdout
    for _name in names:  # "<object> <type> <size>\n<content>\n", or "<name> missing\n"
        end = data.index(b"\n", at)
        header = data[at:end].split()
        at = end + 1
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            out.append(data[at:at + size])
            at += size + 1
        else:  # missing, ambiguous, or not a file (a tree): as git show's failure
            if len(header) == 3:
                at += int(header[2]) + 1
            out.append(None)
    return out


def changed_since(top: Path, rev: str) -> list[Path]:
    """Files of the work tree that differ from `rev` (committed since, staged or
    not) or are new and untracked, as absolute paths that exist."""
    commit = resolve_rev(top, rev)
    names = _git(top, "diff", "--name-only", commit, "--").splitlines()
    names += _git(top, "ls-files", "--others", "--exclude-standard").splitlines()
    out = []
    for n in dict.fromkeys(names):
        p = (top / n).resolve()
        if p.is_file():
            out.append(p)
    return out


@dataclass(frozen=True)
class Base:
    """The base asked for: ``kind`` "head" (the file at git HEAD; the built-in when
    there is no git checkout or no commit), "revision" (the file at ``rev``: an error
    when git cannot give it) or "built-in" (the wheel's kernel). A value: use
    ``Base.HEAD``, ``Base.revision(rev)``, ``Base.BUILT_IN`` or ``Base.parse(text)``."""

    kind: str
    rev: str | None = None

    KINDS: ClassVar[tuple] = ("head", "revision", "built-in")
    HEAD: ClassVar["Base"]
    BUILT_IN: ClassVar["Base"]

    def __post_init__(self) -> None:
        if self.kind not in self.KINDS:
            raise ValueError(f"Base: argument 'kind' must be one of {self.KINDS}, got {self.kind!r}")
        if self.kind == "revision":
            if not isinstance(self.rev, str) or not self.rev.strip() or "\n" in self.rev:
                raise ValueError(f"Base.revision: argument 'rev' must name a git revision, got {self.rev!r}")
        elif self.rev is not None:
            raise ValueError(f"Base: argument 'rev' goes with kind 'revision' only, got {self.rev!r} for {self.kind!r}")

    @classmethod
    def revision(cls, rev: str) -> "Base":
        """The file at git revision `rev` (a commit, a tag, ``HEAD~2``)."""
        return cls("revision", rev)

    @classmethod
    def parse(cls, text: str | None) -> "Base":
        """The base ``--base TEXT`` asks for: None (not given) is HEAD, ``none`` the built-in, else a revision."""
        if text is None:
            return cls.HEAD
        if text == "none":
            return cls.BUILT_IN
        return cls.revision(text)

    @classmethod
    def of(cls, value, name: str = "base") -> "Base":
        """`value` as a Base, or a TypeError naming the argument `name`."""
        if isinstance(value, cls):
            return value
        raise TypeError(f"argument '{name}' must be an etops.dev.Base (Base.HEAD, Base.revision('REV'), Base.BUILT_IN), "
                        f"got {type(value).__name__} {value!r}")

    @property
    def git_rev(self) -> str | None:
        """The revision git is asked for (HEAD for ``head``), None for the built-in."""
        return {"head": "HEAD", "revision": self.rev}.get(self.kind)

    def __str__(self) -> str:
        return {"head": "HEAD", "built-in": "the built-in"}.get(self.kind, self.rev or "")


Base.HEAD = Base("head")
Base.BUILT_IN = Base("built-in")


@dataclass
class FoundBase:
    """What the edit is compared with: ``kind`` "git" (the file at ``commit``) or
    "built-in" (the wheel's kernel; ``why`` says why there is no git base);
    ``path``: the base source compiled (git); ``headers``: the checkout headers
    taken at ``commit`` because they differ from the work tree."""

    kind: str
    rev: str = ""
    commit: str = ""
    why: str = ""
    path: Path | None = None
    headers: list = field(default_factory=list)
    overlay: Path | None = None
    unchanged: bool = False  #: the file, its headers and its helpers are as at ``commit``
    helpers: list = field(default_factory=list)  #: the target's helper sources at ``commit``, in the overlay (git)

    def describe(self) -> str:
        if self.kind == "git":
            what = f"{self.rev} ({self.commit[:10]})"
            extra = f", with {len(self.headers)} header{'s' if len(self.headers) != 1 else ''} at {self.rev}" if self.headers else ""
            if self.helpers:
                extra += f", with {len(self.helpers)} helper source{'s' if len(self.helpers) != 1 else ''} at {self.rev}"
            return f"the file at {what}{extra}" + ("; unchanged since" if self.unchanged else "")
        return f"the wheel's built-in kernel ({self.why})"


def find_base(target, base: Base = Base.HEAD) -> FoundBase:
    """The base of `target` (an install.Target) `base` asks for: the built-in for
    Base.BUILT_IN; else the file at its revision when it lies in a git checkout and
    existed there, else the built-in (CheckoutError: a Base.revision git cannot
    resolve)."""
    base = Base.of(base)
    if base.kind == "built-in":
        return FoundBase("built-in", why="no git base asked for")
    top = git_toplevel(target.path)
    if top is None:
        return FoundBase("built-in", why="not a git checkout")
    wanted = base.git_rev
    assert wanted is not None  # not the built-in (returned above)
    try:
        commit = resolve_rev(top, wanted)
    except CheckoutError as exc:
        if base.kind == "revision":
            raise
        return FoundBase("built-in", why=f"no commit at HEAD ({exc})")
    headers = []
    for header in sorted(target.headers):
        try:
            header.relative_to(top)
        except ValueError:
            continue
        headers.append(header)
    helpers = list(target.helpers)
    original, *olds = files_at(top, commit, [target.path, *helpers, *headers])
    if original is None:
        return FoundBase("built-in", rev=wanted, commit=commit, why=f"{target.path.name} is new since {wanted}")
    # a helper new since `commit` has no base: the base links the wheel's copy of what it declares
    old_helpers = [(helper, old) for helper, old in zip(helpers, olds) if old is not None]
    olds = olds[len(helpers):]
    changed_headers = [(header, old) for header, old in zip(headers, olds) if old is not None and old != header.read_bytes()]
    unchanged = (original == target.path.read_bytes() and not changed_headers and len(old_helpers) == len(helpers)
                 and all(old == helper.read_bytes() for helper, old in old_helpers))
    digest = hashlib.sha256(commit.encode() + str(target.path).encode() + original
                            + b"".join(str(h).encode() + o for h, o in changed_headers)
                            + b"".join(b"helper:" + str(h).encode() + o for h, o in old_helpers)).hexdigest()[:16]
    overlay = cache_dir() / "dev-base" / digest
    inside = overlay / "executorch"
    base_path = inside / target.path.relative_to(target.checkout)
    _write(base_path, original)
    base_helpers = []
    for helper, old in old_helpers:
        base_helpers.append(inside / helper.relative_to(target.checkout))
        _write(base_helpers[-1], old)
    for header, old in changed_headers:
        try:
            _write(inside / header.relative_to(target.checkout), old)
        except ValueError:  # a header of the top outside the checkout: its own path under the top
            _write(inside / header.relative_to(top), old)
    return FoundBase("git", rev=wanted, commit=commit, path=base_path, headers=[str(h) for h, _ in changed_headers],
                overlay=overlay, unchanged=unchanged, helpers=base_helpers)


def _write(path: Path, data: bytes) -> None:
    if path.exists() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def build_base(target, base: FoundBase, cflags=()):
    """The base's kernel library: `target`'s operators compiled from the base
    source (and its helpers at the base) with the edit's flags (the overlay first
    on the include path, the file's and the helpers' own folders for their quoted
    includes)."""
    from dataclasses import replace

    from ..checkout.install import build_target

    based = replace(target, path=base.path, helpers=tuple(base.helpers))
    quoted = [f"-iquote{folder}" for folder in dict.fromkeys(p.parent for p in (target.path, *target.helpers))]
    return build_target(based, (*quoted, *cflags), include_first=(f"-I{base.overlay}",))
