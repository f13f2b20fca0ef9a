"""The standalone reproducer scripts of ``etops.edge.compare``'s diverging rows.

``node_script(row)`` embeds a node's inputs and runs its op with ATen and on its
ExecuTorch kernel; ``delegate_script(row)`` embeds a delegate call's lowered module
(original subgraph, processed blob, compile specs, named data) and its inputs, and
runs the backend against the original subgraph on ATen. Both compare with the
row's tolerance.

May import torch, executorch.exir and etops.delegate.lowered; not the executor
(``_compare``) nor the report (it receives a row, a ``report.NodeResult``).
"""

from __future__ import annotations

import base64
import io
import textwrap

import torch
from executorch.exir.dialects.edge._ops import EdgeOpOverload

__all__ = ["delegate_script", "lowered_payload", "measured", "node_script", "target_expr"]


def node_script(result) -> str:
    """The script of a kernel node's row (its inputs kept)."""
    buffer = io.BytesIO()
    torch.save(result.inputs, buffer)
    data = base64.b64encode(buffer.getvalue()).decode()
    data = "\n".join(textwrap.wrap(data, 100))
    expr, imports = target_expr(result.target)
    return f'''\
"""etops.edge.compare: node {result.node} ({result.op}) diverges on ExecuTorch kernel {result.kernel}:
{result.status}{': ' + result.message if result.message else ''}
{measured(result)}{'source: ' + result.source if result.source else ''}
"""
import base64, io
{imports}
import torch
import etops, etops.edge

DATA = """
{data}
"""
args, kwargs = torch.load(io.BytesIO(base64.b64decode(DATA)), weights_only=False)
OUTS = {tuple(result.out_names)!r}


def fresh(kw):
    return {{k: (torch.empty_like(v) if k in OUTS else v) for k, v in kw.items()}}


op = {expr}
expected = op(*args, **fresh(kwargs))                    # ATen
actual = etops.edge.call(op, *args, **fresh(kwargs))     # ExecuTorch kernel {result.kernel}
print("expected:", expected)
print("actual:  ", actual)
torch.testing.assert_close(actual, expected, rtol={result.rtol!r}, atol={result.atol!r})
'''

def delegate_script(result) -> str:
    """The script of a delegate call's row (its inputs and lowered module kept);
    a script that says why when the lowered module does not serialize."""
    args = tuple(result.inputs[0])
    header = f'''\
"""etops.edge.compare: delegate call {result.node} ({result.kernel}) diverges from its original subgraph on ATen:
{result.status}{': ' + result.message if result.message else ''}
{measured(result)}ops inside: {', '.join(result.ops)}
{'source: ' + result.source + chr(10) if result.source else ''}"""
'''
    try:
        payload = lowered_payload(result.lowered, result.kernel.split("::", 1)[-1])
        buffer = io.BytesIO()
        torch.save({"inputs": args, "lowered": payload}, buffer)
    except Exception as exc:  # noqa: BLE001 - a subgraph exir cannot serialize
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return header + f'''
# This delegate call cannot be reproduced standalone: its lowered module did not
# serialize ({reason!r}).
# With the program at hand:
#     lowered = dict((name, m) for name, m, _ in etops.delegate.delegate_calls(program.exported_program().graph_module))["{result.kernel.split("::", 1)[-1]}"]
#     run = etops.delegate.load(lowered); run(*inputs) vs run._info.reference(*inputs)
raise SystemExit("etops.edge.compare: delegate call {result.node} ({result.kernel}) cannot be reproduced standalone")
'''
    data = "\n".join(textwrap.wrap(base64.b64encode(buffer.getvalue()).decode(), 100))
    return header + f'''import base64, io
import torch
import etops, etops.delegate
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.compile_spec_schema import CompileSpec
from executorch.exir.lowered_backend_module import LoweredBackendModule
from executorch.exir.serde.serialize import load as load_program

DATA = """
{data}
"""
data = torch.load(io.BytesIO(base64.b64decode(DATA)), weights_only=False)
args, spec = data["inputs"], data["lowered"]
store = NamedDataStore()
for key, blob, alignment in spec["named_data"]:
    store.add_named_data(key, blob, alignment)
lowered = LoweredBackendModule(
    load_program(io.BytesIO(spec["program"])),  # the original subgraph (edge dialect)
    spec["backend"],
    spec["processed"],
    [CompileSpec(key, value) for key, value in spec["compile_specs"]],
    store.get_named_data_store_output(),
)
run = etops.delegate.load(lowered, name=spec["name"])   # {result.kernel}
with torch.no_grad():
    expected = run._info.reference(*args)              # the original subgraph on ATen
actual = run(*args)                                     # the backend on its processed blob
actual = list(actual) if isinstance(actual, tuple) else [actual]
print("expected:", expected)
print("actual:  ", actual)
torch.testing.assert_close(actual, expected, rtol={result.rtol!r}, atol={result.atol!r})
'''

def measured(result) -> str:
    """The errors of a mismatching row, one line (empty for other statuses)."""
    if result.status != "mismatch":
        return ""
    return f"max abs error {result.max_abs:.3g}, max rel error {result.max_rel:.3g}, {result.mismatched}/{result.numel} elements beyond rtol={result.rtol:g} atol={result.atol:g}\n"


def lowered_payload(lowered, name: str) -> dict:
    """What a reproducer needs to rebuild a LoweredBackendModule: its original
    subgraph serialized by exir's serde (edge ops included) and its backend's bytes."""
    from executorch.exir.serde.serialize import save as save_program

    from ..delegate.lowered import compile_specs, named_data

    program = io.BytesIO()
    save_program(lowered.original_module, program)
    return {
        "name": name,
        "backend": lowered.backend_id,
        "program": program.getvalue(),
        "processed": bytes(lowered.processed_bytes),
        "compile_specs": compile_specs(lowered),
        "named_data": [(key, bytes(blob), alignment) for key, blob, alignment in named_data(lowered)],
    }


def target_expr(target) -> tuple[str, str]:
    if isinstance(target, EdgeOpOverload):
        aten = target._op
        dialect = "backend" if type(target).__name__ == "BackendOpOverload" else "edge"
        op = aten._schema.name.split("::")[1]
        return f"exir_ops.{dialect}.{aten.namespace}.{op}.{aten._overloadname}", "from executorch.exir.dialects._ops import ops as exir_ops"
    if isinstance(target, torch._ops.OpOverload):
        op = target._schema.name.split("::")[1]
        return f"torch.ops.{target.namespace}.{op}.{target._overloadname}", "import executorch.exir  # registers ExecuTorch's own ops with torch"
    module = getattr(target, "__module__", "") or ""
    module = {"_operator": "operator", "builtins": "builtins"}.get(module, module)
    return f"{module}.{target.__name__}", f"import {module.split('.')[0]}"
