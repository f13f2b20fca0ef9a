"""Where a finding lives in an ExecuTorch checkout: the kernel the wheel ships for an
operator (the optimized set's YAML entry when it has one, else the portable or
quantized one), the source file and line defining its function, upstream's test
file of that source (``kernels/test/op_<name>_test.cpp``) and the ``OperatorTest``
fixture of that file that calls the operator.

Reads files only. May import: the core, etops.checkout.layout, etops.gtest.layout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..checkout.layout import defined_functions, read_yaml
from ..gtest.layout import tests_of_kernel

#: the kernel YAMLs, in the order the wheel prefers their kernels
_YAMLS = ("kernels/optimized/optimized.yaml", "kernels/portable/functions.yaml", "kernels/portable/custom_ops.yaml",
          "kernels/quantized/quantized.yaml")
_FIXTURE = re.compile(r"^class\s+(\w+)\s*(?:final\s*)?:\s*public\s+(?:::)?OperatorTest\b", re.M)


@dataclass(frozen=True)
class Location:
    """The kernel of an operator in a checkout and its upstream test."""

    kernel: str  #: "aten::sum.IntList_out"
    yaml: Path
    function: str  #: the YAML's kernel_name
    source: Path | None  #: the file defining it
    line: int | None  #: its definition's line
    test: Path | None  #: upstream's test file of that source (when it exists)
    fixture: str | None  #: the test file's OperatorTest fixture calling the operator

    def where(self, checkout: Path) -> str:
        """``kernels/optimized/cpu/op_sum.cpp:24`` (the YAML when no source is found)."""
        if self.source is None:
            return str(self.yaml.relative_to(checkout))
        return f"{self.source.relative_to(checkout)}:{self.line}"


def _entry(checkout: Path, kernel: str):
    for rel in _YAMLS:
        path = checkout / rel
        if path.is_file():
            for e in read_yaml(path):
                if e.op == kernel:
                    return path, e
    return None, None


def _source(folder: Path, function: str, op_base: str) -> tuple[Path | None, int | None]:
    """The file of `folder` (and its subfolders) defining `function` and the line of
    that definition; the likely names (op_<base>.cpp) are read first."""
    short = function.rsplit("::", 1)[-1]
    guesses = [folder / f"op_{op_base}.cpp", folder / f"op_{op_base.lstrip('_')}.cpp"]
    for path in list(dict.fromkeys(guesses)) + sorted(folder.rglob("*.cpp")):
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if short not in text or short not in defined_functions(text):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if re.search(rf"\b{re.escape(short)}\s*\(", line) and not line.rstrip().endswith(";"):
                return path, n
        return path, None
    return None, None


def fixture_of(test_text: str, op_base: str) -> str | None:
    """The OperatorTest fixture of a test file calling ``<op_base>_outf`` (the
    first fixture when none names it; None when the file has no OperatorTest fixture)."""
    found = list(_FIXTURE.finditer(test_text))
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(test_text)
        if re.search(rf"\b{re.escape(op_base)}_outf\s*\(", test_text[m.start():end]):
            return m.group(1)
    return found[0].group(1) if found else None


def locate(checkout, kernel: str) -> Location | None:
    """Where `kernel` ("aten::sum.IntList_out") lives in `checkout`; None when no
    kernel YAML of the checkout registers it."""
    checkout = Path(checkout)
    yaml, entry = _entry(checkout, kernel)
    if entry is None:
        return None
    op_base = kernel.split("::", 1)[-1].split(".", 1)[0]
    folder = yaml.parent / "cpu"
    source, line = _source(folder, entry.function, op_base) if folder.is_dir() else (None, None)
    if source is None and yaml.parent.name == "optimized":  # an optimized entry served by the portable kernel
        source, line = _source(checkout / "kernels/portable/cpu", entry.function, op_base)
    test = fixture = None
    candidates = tests_of_kernel(source, checkout) if source is not None else []
    candidates.append(checkout / "kernels/test" / f"op_{op_base}_test.cpp")
    candidates.append(checkout / "kernels/test" / f"op_{op_base.lstrip('_')}_test.cpp")
    for path in dict.fromkeys(candidates):
        if path.is_file():
            test = path
            fixture = fixture_of(path.read_text(errors="replace"), op_base)
            break
    return Location(kernel, yaml, entry.function, source, line, test, fixture)
