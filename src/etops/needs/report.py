"""``Needs``: what a program needs and what this process has, as a table, text and
JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .. import dtypes
from . import selected_ops
from .selection import DelegateNeed, KernelNeed

#: columns of ``Needs.rows()`` (the CLI's table)
HEADERS = ["method", "call", "operator", "tensors (dtype, dim order)", "kernel", "origin"]


def _tensors_text(tensors) -> str:
    return ", ".join(f"{dtypes.dtype_name(d)} ({','.join(map(str, o))})" for d, o in tensors) or "-"


def _origin_text(need: KernelNeed) -> str:
    if need.origin is None:
        return "-"
    text = need.origin.kind
    return text + (f", overridden by {' then '.join(need.origin.overrides)}" if need.origin.overridden else "")


def _kernel_text(need: KernelNeed) -> str:
    if need.how == "exact":
        return f"exact {need.key}"
    return "fallback" if need.how == "fallback" else "MISSING"


@dataclass(frozen=True)
class Needs:
    """Every kernel call and delegate call of a program against this process's
    registry (``etops.needs(program)``)."""

    HEADERS = HEADERS  #: the columns of rows()

    source: str  #: the file, or '<bytes>' / '<ExecutorchProgramManager>'
    methods: tuple[str, ...]  #: the program's methods (execution plans)
    kernels: tuple[KernelNeed, ...]  #: one per KernelCall instruction
    delegates: tuple[DelegateNeed, ...]  #: one per DelegateCall instruction

    @property
    def missing(self) -> list:
        """The kernel and delegate calls this process cannot run."""
        return [n for n in self.kernels if n.missing] + [d for d in self.delegates if d.missing]

    @property
    def ok(self) -> bool:
        """Whether every call resolves here (the program loads)."""
        return not self.missing

    @property
    def operators(self) -> dict[str, list[str]]:
        """operator -> the kernel keys its call sites use (selected_operators.yaml's
        keys without the dtype-only entries)."""
        out: dict[str, set] = {}
        for n in self.kernels:
            out.setdefault(n.site.operator, set()).add(n.key or "v1")
        return {op: sorted(keys) for op, keys in sorted(out.items())}

    def rows(self) -> list[list[str]]:
        rows = []
        for n in self.kernels:
            s = n.site
            rows.append([s.method, f"{s.chain}:{s.instruction}", s.operator, _tensors_text(s.tensors), _kernel_text(n), _origin_text(n)])
        for d in self.delegates:
            ds = d.site
            state = "available" if not d.missing else ("MISSING (not registered)" if not d.registered else "MISSING (not available)")
            rows.append([ds.method, f"{ds.chain}:{ds.instruction}", f"delegate {ds.backend}", "-", state, "backend"])
        return rows

    def summary(self) -> str:
        counts = {how: sum(1 for n in self.kernels if n.how == how) for how in ("exact", "fallback", "missing")}
        text = (f"{len(self.kernels)} kernel calls ({counts['exact']} exact key, {counts['fallback']} fallback, "
                f"{counts['missing']} missing), {len(self.delegates)} delegate calls "
                f"({sum(1 for d in self.delegates if d.missing)} missing) in {', '.join(self.methods)}")
        return text + (": runs here" if self.ok else ": will NOT load here")

    def text(self) -> str:
        """The table, the summary, and why each missing call is missing."""
        rows = self.rows()
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(HEADERS)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [HEADERS] + rows]
        lines.append(self.summary())
        lines.extend(f"missing: {m.site.method} {m.site.chain}:{m.site.instruction}: {m.reason}" for m in self.missing)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "methods": list(self.methods),
            "ok": self.ok,
            "kernel_calls": [_kernel_dict(n) for n in self.kernels],
            "delegate_calls": [_delegate_dict(d) for d in self.delegates],
            "operators": self.operators,
            "missing": len(self.missing),
        }

    def to_json(self, path) -> None:
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")

    def selected_operators(self) -> dict:
        """selected_operators.yaml's content (see etops.needs.selected_ops)."""
        return selected_ops.selected_operators(self)

    def write_selected_operators(self, path) -> None:
        selected_ops.write_selected_operators(self, path)


def _argument_dict(a) -> dict:
    d = {"value_index": a.index, "kind": a.kind, "describe": a.describe()}
    if a.kind == "Tensor":
        d.update(dtype=dtypes.dtype_name(a.dtype), dim_order=list(a.dim_order), sizes=list(a.sizes), dynamic=a.dynamic)
    elif a.value is not None:
        d["value"] = list(a.value) if isinstance(a.value, tuple) else a.value
    return d


def _kernel_dict(n: KernelNeed) -> dict:
    s = n.site
    origin = None
    if n.origin is not None:
        origin = {"kind": n.origin.kind, "library": n.origin.library, "source_hash": n.origin.source_hash,
                  "build_dir": n.origin.build_dir, "overridden": n.origin.overridden, "overrides": list(n.origin.overrides)}
    return {
        "method": s.method, "chain": s.chain, "instruction": s.instruction, "operator": s.operator,
        "arguments": [_argument_dict(a) for a in s.arguments],
        "tensors": [[dtypes.dtype_name(d), list(o)] for d, o in s.tensors],
        "key": n.key, "how": n.how,
        "kernel": None if n.kernel is None else {"key": n.kernel.key, "library": n.kernel.library},
        "origin": origin, "reason": n.reason,
        "extra_dtypes": [dtypes.dtype_name(d) for d in selected_ops.extra_dtypes(s)],
    }


def _delegate_dict(d: DelegateNeed) -> dict:
    s = d.site
    return {"method": s.method, "chain": s.chain, "instruction": s.instruction, "backend": s.backend,
            "delegate_index": s.delegate_index, "registered": d.registered, "available": d.available,
            "reason": d.reason, "arguments": [_argument_dict(a) for a in s.arguments]}
