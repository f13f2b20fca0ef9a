"""Building kernel test binaries against the installed wheel: googletest (the
checkout's ``third-party/googletest`` sources, else a system googletest's sources,
``/usr/src/googletest``), etops' glue, the checkout's testing utilities and each
test file, compiled with the toolchain custom kernels use and linked into one
shared library per test file (``etops_gtest_main`` its entry point, libexecutorch
its one dependency: it shares the registry of the process that loads it).

Every object is named by a hash of what decides it (source and the checkout headers
it includes, generated headers, flags, compiler, versions) under the cache's
``gtest/`` folder and reused while it exists: googletest and the testing utilities
are compiled once, a test file again only when it or a header changed. What is
missing is built by one Ninja run (parallel, ``-k 0``: a test that does not compile
costs only itself); each output is renamed into place, so concurrent etops
processes share the cache without a lock.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..custom import cache_dir, toolchain
from ..custom.build import compile_flags
from . import runtime_source

#: Bumped whenever the generated code or the build recipe changes.
RECIPE_VERSION = "1"
#: Test code is compiled for build speed: kernels run from the wheel's own binaries.
OPT_FLAGS = ("-O0", "-g0")
#: Checkout code is written against deprecated aliases the wheel's headers flag.
EXTRA_FLAGS = ("-Wno-deprecated-declarations", "-pthread")
SYSTEM_GOOGLETEST = (Path("/usr/src/googletest"),)


@dataclass(frozen=True)
class Googletest:
    """googletest sources: the folder holding ``googletest/`` and ``googlemock/``."""

    root: Path
    origin: str  #: "checkout" or "system"

    def describe(self) -> str:
        return f"googletest from the {'checkout' if self.origin == 'checkout' else 'system'} ({self.root})"


def find_googletest(checkout: Path | None) -> Googletest | None:
    """The checkout's third-party/googletest when its sources are there (a
    submodule checked out), else $ETOPS_GOOGLETEST, else the system's; None when
    none has both gtest-all.cc and gmock-all.cc."""
    options: list[tuple[Path, str]] = []
    if checkout is not None:
        options.append((checkout / "third-party" / "googletest", "checkout"))
    if os.environ.get("ETOPS_GOOGLETEST"):
        options.append((Path(os.environ["ETOPS_GOOGLETEST"]), "system"))
    options += [(p, "system") for p in SYSTEM_GOOGLETEST]
    for root, origin in options:
        if (root / "googletest/src/gtest-all.cc").is_file() and (root / "googlemock/src/gmock-all.cc").is_file():
            return Googletest(root.resolve(), origin)
    return None


NO_GOOGLETEST = ("no googletest to build the tests with: neither the checkout's third-party/googletest "
                 "(git submodule update --init third-party/googletest) nor a system one "
                 "(apt-get install googletest, or set ETOPS_GOOGLETEST to its source folder)")


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _write(path: Path, text: str) -> Path:
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path


@dataclass
class Build:
    """One build of several test binaries. ``compile`` and ``link`` name outputs and
    queue the missing ones; ``run`` builds what is queued."""

    googletest: Googletest
    root: Path = field(default_factory=lambda: cache_dir() / "gtest")
    edges: dict[str, str] = field(default_factory=dict)  #: output -> ninja build line (missing outputs only)

    def __post_init__(self):
        from .. import __version__

        tc = toolchain()
        self.tc = tc
        self.base = [*compile_flags(tc), *EXTRA_FLAGS]
        self.base = [f for f in self.base if not f.startswith("-O")] + list(OPT_FLAGS)
        g = self.googletest.root
        self.gtest_includes = [f"-isystem {g / 'googletest/include'}", f"-isystem {g / 'googlemock/include'}"]
        self.salt = _digest(RECIPE_VERSION, __version__, tc.executorch_version, tc.cxx_id, self.base)
        self.support_dir = self.root / "support" / _digest(self.salt, runtime_source.HEADER)
        _write(self.support_dir / "etops_gtest.h", runtime_source.HEADER)

    # -- objects ------------------------------------------------------------------------

    def _object(self, source: Path, flags: list[str], key: str) -> Path:
        out = self.root / "obj" / f"{source.stem}-{key}.o"
        if not out.exists() and str(out) not in self.edges:
            self.edges[str(out)] = f"build {_esc(out)}: cxx {_esc(source)}\n  flags = {' '.join(flags)}"
        return out

    def googletest_objects(self) -> list[Path]:
        """gtest-all.o and gmock-all.o (compiled once per googletest and toolchain)."""
        g = self.googletest.root
        key = _digest(self.salt, g, (g / "googletest/src/gtest.cc").stat().st_mtime_ns)
        gtest = self._object(g / "googletest/src/gtest-all.cc", [*self.base, *self.gtest_includes, f"-I{g / 'googletest'}"], key)
        gmock = self._object(g / "googlemock/src/gmock-all.cc", [*self.base, *self.gtest_includes, f"-I{g / 'googlemock'}"], key)
        return [gtest, gmock]

    def support_object(self) -> Path:
        """etops' glue: the Stack, the entry point, the event listener."""
        source = _write(self.support_dir / "etops_gtest.cpp", runtime_source.SOURCE)
        return self._object(source, [*self.base, *self.gtest_includes, f"-I{self.support_dir}"],
                            _digest(self.salt, runtime_source.SOURCE, runtime_source.HEADER))

    def generated(self, files: dict[str, str]) -> Path:
        """A folder holding `files` (path under it -> text), named by their content:
        generated headers go on the include path first."""
        folder = self.root / "gen" / _digest(*sorted(files.items()))
        for rel, text in files.items():
            _write(folder / rel, text)
        return folder

    def checkout_object(self, source: Path, headers, include_dirs: list[str], key_text: str = "") -> Path:
        """An object of a checkout (or generated) source: `headers` are the files
        whose content it depends on besides itself; `include_dirs` flags in order."""
        flags = [*include_dirs, f"-I{self.support_dir}", *self.base, *self.gtest_includes]
        # the flags name the glue's header folder, itself named by the header's content
        parts = [self.salt, source, source.read_bytes(), key_text, flags]
        parts += [p.read_bytes() for p in sorted(headers)]
        return self._object(source, flags, _digest(*parts))

    def link(self, objects: list[Path], name: str, libraries=(), own_first: bool = False) -> Path:
        """The test binary (a shared library) of `objects`, linked to `libraries`
        (shared library paths) too; `own_first`: its calls of functions it defines
        bind to its own definitions (-Bsymbolic-functions), never to a library's of
        the same name loaded before it."""
        out = self.root / "bin" / f"{name}-{_digest(self.salt, *objects, *libraries, own_first)}.so"
        if not out.exists() and str(out) not in self.edges:
            edge = f"build {_esc(out)}: link {' '.join(_esc(o) for o in objects)}"
            if libraries or own_first:
                flags = [f for lib in map(Path, libraries) for f in (f"-L{lib.parent}", f"-l:{lib.name}", f"-Wl,-rpath,{lib.parent}")]
                flags += ["-Wl,-Bsymbolic-functions"] if own_first else []
                edge += f"\n  libraries = {' '.join(flags)}"
            self.edges[str(out)] = edge
        return out

    # -- running ------------------------------------------------------------------------

    def run(self, jobs: int | None = None) -> None:
        """Builds every queued output (Ninja -k 0); each output's log is ``<output>.log``."""
        if not self.edges:
            return
        tc = self.tc
        link = ["-shared", f"-L{tc.lib_dir}", f"-Wl,-rpath,{tc.lib_dir}", "-pthread", *[f"-l{lib}" for lib in tc.libs]]
        lines = [
            "# generated by etops gtest",
            "ninja_required_version = 1.3",
            f"cxx = {tc.cxx}",
            f"ldflags = {' '.join(link)}",
            "rule cxx",
            "  command = $cxx $flags -c $in -o $out.$$$$ > $out.log 2>&1 && mv -f $out.$$$$ $out || (rm -f $out.$$$$; exit 1)",
            "  description = compile $in",
            "rule link",
            "  command = $cxx $in -o $out.$$$$ $ldflags $libraries > $out.log 2>&1 && mv -f $out.$$$$ $out || (rm -f $out.$$$$; exit 1)",
            "  description = link $out",
            *self.edges.values(),
        ]
        for sub in ("obj", "bin"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        # No lock: every output is written under a name of its own (the shell's pid) and
        # renamed into place, so two processes building the same object both succeed.
        folder = self.root / "ninja" / str(os.getpid())
        _write(folder / "build.ninja", "\n".join(lines) + "\n")
        jobs = jobs or os.cpu_count() or 1
        todo = [o for o in self.edges if not Path(o).exists()]
        if todo:
            subprocess.run([tc.ninja, "-C", str(folder), "-k", "0", "-j", str(jobs), *todo],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()
        self.edges.clear()


def failure(output: Path, inputs: list[Path]) -> str | None:
    """Why `output` was not built: the first errors of its log, or of the log of the
    first of `inputs` that failed; None when it exists."""
    if output.exists():
        return None
    for p in [*inputs, output]:
        if p.exists():
            continue
        log = p.with_name(p.name + ".log")
        text = log.read_text(errors="replace") if log.exists() else ""
        errors = [ln for ln in text.splitlines() if " error: " in ln or "error:" in ln[:60] or "undefined reference" in ln]
        head = "\n".join(errors[:8]) or "\n".join(text.splitlines()[:12]) or "(no compiler output)"
        return f"{p.name}: {head}"
    return f"{output.name}: not built"


def _esc(p) -> str:
    return str(p).replace("$", "$$").replace(":", "$:").replace(" ", "$ ")
