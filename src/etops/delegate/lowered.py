"""Finding lowered modules in a program, and the pieces of one a backend needs.

A ``LoweredBackendModule`` (executorch.exir) holds what ``to_backend`` /
``to_edge_transform_and_lower`` produced for one delegated subgraph: the backend's
name, its processed blob, the compile specs, the named data (weights a backend
stores outside the blob) and the original subgraph as an ExportedProgram. A graph
calls it through an ``executorch_call_delegate`` node: ``(lowered, *inputs)``.
"""

from __future__ import annotations

import threading
import weakref

import torch


def is_delegate_call(node) -> bool:
    """Whether an fx node calls a lowered module (``executorch_call_delegate``)."""
    if node.op != "call_function":
        return False
    target = node.target
    return type(target).__name__ == "ExecutorchCallDelegate" or getattr(target, "__name__", "") == "executorch_call_delegate"


def graph_module_of(program, method: str = "forward") -> torch.fx.GraphModule:
    """The graph module of `method` in an EdgeProgramManager / ExecutorchProgramManager,
    or of an ExportedProgram, or `program` itself if it is a GraphModule."""
    if isinstance(program, torch.fx.GraphModule):
        return program
    if isinstance(program, torch.export.ExportedProgram):
        return program.graph_module
    exported = getattr(program, "exported_program", None)
    if callable(exported):
        return exported(method).graph_module
    raise TypeError(
        f"program must be an EdgeProgramManager, ExecutorchProgramManager, ExportedProgram or GraphModule, not {type(program).__name__}"
    )


def delegate_calls(graph_module: torch.fx.GraphModule):
    """(attribute name, LoweredBackendModule, call node) of every delegate call in
    `graph_module` and the graphs nested in it (control-flow branches), in graph order."""
    found = []
    for node in graph_module.graph.nodes:
        if is_delegate_call(node):
            attr = node.args[0].target
            found.append((attr, getattr(graph_module, attr), node))
        elif node.op == "get_attr":
            sub = getattr(graph_module, node.target, None)
            if isinstance(sub, torch.fx.GraphModule):
                found.extend(delegate_calls(sub))
    return found


def lowered_modules(program, method: str = "forward") -> list:
    """The LoweredBackendModules `program` calls (see graph_module_of for what it
    may be), in the order its graph calls them."""
    return [lowered for _, lowered, _ in delegate_calls(graph_module_of(program, method))]


def named_data(lowered) -> list[tuple[str, bytes, int]]:
    """(key, bytes, alignment) of every named-data entry of `lowered` (stored in
    the program or meant for an external .ptd: a delegate loaded here gets both)."""
    store = lowered.named_data_store_output
    if store is None:
        return []
    entries = dict(store.pte_data)
    for per_file in store.external_data.values():
        entries.update(per_file)
    out = []
    for key, entry in entries.items():
        buffer = store.buffers[entry.buffer_index]
        if hasattr(buffer, "to_bytes"):  # FileBackedData: bytes exir spilled to a file
            buffer = buffer.to_bytes()
        out.append((key, buffer, int(entry.alignment)))
    return out


def compile_specs(lowered) -> list[tuple[str, bytes]]:
    """(key, value bytes) of each compile spec of `lowered`."""
    return [(spec.key, bytes(spec.value)) for spec in lowered.compile_specs]


_references_lock = threading.Lock()
_references: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def reference_module(lowered) -> torch.nn.Module:
    """The subgraph `lowered` replaced, as a module that runs it on ATen (what
    ``executorch_call_delegate`` runs eagerly), unlifted once per original program.
    `lowered` is a LoweredBackendModule or its ``original_module``."""
    program = getattr(lowered, "original_module", lowered)
    with _references_lock:
        module = _references.get(program)
        if module is None:
            module = program.module()
            _references[program] = module
        return module
