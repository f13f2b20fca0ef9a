"""The issue's snippet, verbatim, and its import-order variants. Import order is
process-wide, so each variant runs in its own fresh interpreter (the verbatim
snippet first in the etops-first one: the same imports); they are all started at
once (module fixture) so the suite pays torch's import once in wall time, and
this process never imports executorch.runtime."""

from __future__ import annotations

import pytest

from fresh_python import start_python

SNIPPET = '''
import torch
import etops  # extends executorch.runtime's OperatorRegistry
from executorch.runtime import Runtime

reg = Runtime.get().operator_registry
op = reg.aten.add.out                      # same object as reg.get_kernel("aten::add.out")
a, b = torch.ones(2, 2), torch.ones(2, 2)
c = torch.empty_like(a)
op(a, b, out=c)                            # runs the ExecuTorch kernel, writes c in place
print(op._schema)                          # aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)
reg.aten.add.Tensor                        # raises: no ExecuTorch kernel is registered for aten::add.Tensor (did you mean aten::add.out?)
'''

SCHEMA = "aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)"

_CHECKS = '''
import sys
assert str(op._schema) == {schema!r}, op._schema
assert torch.equal(c, torch.full((2, 2), 2.0)), c
assert reg.aten.add.out is reg.get_kernel("aten::add.out")
assert reg.aten.add.out is etops.registry().aten.add.out
assert reg.aten.add.out is etops.get_kernel("aten::add.out")
print("ATTRIBUTE-PATH-OK")
try:
    reg.aten.add.Tensor
except etops.KernelNotFoundError as e:
    assert isinstance(e, AttributeError) and isinstance(e, KeyError)
    assert "aten::add.Tensor" in str(e) and "aten::add.out" in str(e), str(e)
else:
    raise SystemExit("reg.aten.add.Tensor did not raise")
print("SNIPPET-OK")

# upstream operator_names keeps its meaning
names = reg.operator_names
assert isinstance(names, set) and all(isinstance(n, str) for n in names)
assert names == {{n for n, _k, _a in etops._native.registered_kernels()}}
print("NAMES", len(names))

# a failing kernel: its messages go into the KernelError, not raw onto stderr
try:
    reg.aten.cat.out([torch.ones(2, 3, dtype=torch.uint16), torch.ones(2, 5, dtype=torch.uint16)], 1, out=torch.empty(2, 8, dtype=torch.uint16))
except etops.KernelError as e:
    assert "Unhandled dtype UInt16" in e.log, repr(e.log)
else:
    raise SystemExit("cat of uint16 tensors (no ExecuTorch kernel handles them) did not fail")
print("LOG-OK")
'''

ORDERS = {
    "etops-first": "import torch\nimport etops\nfrom executorch.runtime import Runtime",
    "runtime-first": "import torch\nfrom executorch.runtime import Runtime\nimport etops",
    "runtime-before-torch": "from executorch.runtime import Runtime\nimport etops\nimport torch",
    "etops-before-torch": "import etops\nimport torch\nfrom executorch.runtime import Runtime",
}


def _snippet_with(imports: str) -> str:
    lines = SNIPPET.strip().splitlines()
    body = [l for l in lines[:-1] if not l.startswith(("import etops", "from executorch.runtime", "import torch"))]
    return imports + "\n" + "\n".join(body) + "\n" + _CHECKS.format(schema=SCHEMA)


_NO_EXIR = """
import sys
import etops
reg = etops.registry()
import torch
reg.aten.add.out(torch.ones(2), torch.ones(2))
loaded = sorted(m for m in sys.modules if m.startswith("executorch.exir"))
assert not loaded, loaded
assert "executorch.runtime" not in sys.modules
print("NO-EXIR")
"""

#: The snippet verbatim, first thing in a fresh interpreter (before the etops-first
#: variant's checks, its own import order): its last line raises the promised error.
_VERBATIM = f"""
import sys
SNIPPET, SCHEMA = {SNIPPET!r}, {SCHEMA!r}
""" + """
lines = SNIPPET.strip().splitlines()
scope = {}
exec(compile("\\n".join(lines[:-1]), "<snippet>", "exec"), scope)
import torch, etops
torch.testing.assert_close(scope["c"], torch.full((2, 2), 2.0))
assert str(scope["op"]._schema) == SCHEMA, scope["op"]._schema
try:
    exec(compile(lines[-1], "<snippet>", "exec"), scope)
except etops.KernelNotFoundError as e:
    assert "aten::add.Tensor" in str(e) and "aten::add.out" in str(e), str(e)
    assert isinstance(e, AttributeError) and isinstance(e, KeyError)
else:
    raise SystemExit("the snippet's last line did not raise")
print("VERBATIM-OK")
"""

# Started at collection: they run in the background while other tests run.
_LAUNCHED = {f"order:{k}": start_python((_VERBATIM if k == "etops-first" else "") + _snippet_with(v)) for k, v in ORDERS.items()}
_LAUNCHED["no-exir"] = start_python(_NO_EXIR)


@pytest.fixture(scope="module")
def launched():
    return _LAUNCHED


def _printed(launched, order: str) -> str:
    """What the interpreter of import order `order` printed; it must have exited 0."""
    proc = launched[f"order:{order}"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_snippet_verbatim(launched):
    """The snippet runs (verbatim, in a fresh interpreter); its last line raises the promised error."""
    assert "VERBATIM-OK" in _printed(launched, "etops-first")


@pytest.mark.parametrize("order", list(ORDERS))
def test_attribute_path_is_get_kernel(launched, order):
    """reg.aten.add.out is reg.get_kernel, etops.registry()'s and etops.get_kernel's object."""
    assert "ATTRIBUTE-PATH-OK" in _printed(launched, order)


@pytest.mark.parametrize("order", list(ORDERS))
def test_snippet_any_import_order(launched, order):
    assert "SNIPPET-OK" in _printed(launched, order)


@pytest.mark.parametrize("order", list(ORDERS))
def test_runtime_registry_keeps_operator_names(launched, order):
    """Upstream `operator_names` keeps its meaning after etops extends the class."""
    assert "NAMES 259" in _printed(launched, order)


def test_import_etops_does_not_import_exir(launched):
    proc = launched["no-exir"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "NO-EXIR" in proc.stdout


@pytest.mark.parametrize("order", list(ORDERS))
def test_no_raw_executorch_output_on_stderr(launched, order):
    """ExecuTorch's messages go to logging or into exceptions, never raw onto stderr,
    whichever of etops and executorch.runtime comes first."""
    proc = launched[f"order:{order}"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "LOG-OK" in proc.stdout
    raw = [l for l in proc.stderr.splitlines() if "platform.cpp" in l or "register_pal" in l or "Check failed" in l]
    assert not raw, raw
