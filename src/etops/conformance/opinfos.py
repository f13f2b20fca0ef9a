"""PyTorch's OpInfo database as the conformance sweep reads it: OpInfos by id,
their CPU dtypes and the tolerance their decorators give a dtype.

May import: torch (its OpInfo database, loaded on first use) and etops.compare.
"""

from __future__ import annotations

from typing import Any

import warnings

import torch

from ..compare import TORCH as _TORCH_TOLERANCE

_OPS: dict[str, Any] | None = None


def opinfo_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def opinfos() -> dict[str, Any]:
    """OpInfo id ('add', 'nn.functional.conv2d', 'max.reduction_with_dim') -> OpInfo."""
    global _OPS
    if _OPS is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torch.testing._internal.common_methods_invocations import op_db
        _OPS = {opinfo_id(op): op for op in op_db}
    return _OPS


def dtype_from_name(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dtype


def opinfo_dtypes(op) -> list[torch.dtype]:
    """The dtypes OpInfo lists for CPU, in a stable order."""
    return sorted(op.supported_dtypes("cpu"), key=str)


def tolerance(op, dtype: torch.dtype) -> tuple[float | None, float | None]:
    """(atol, rtol) for `dtype`: the largest override OpInfo's decorators give
    (toleranceOverride / precisionOverride, any test), else (None, None): the
    defaults of torch.testing.assert_close."""
    atol = rtol = None
    for info in getattr(op, "decorators", ()) or ():
        for dec in getattr(info, "decorators", (info,)):
            table = getattr(dec, "d", None)
            if not isinstance(table, dict) or dtype not in table:
                continue
            value = table[dtype]
            if hasattr(value, "atol"):
                atol = max(atol or 0.0, value.atol)
                rtol = max(rtol or 0.0, value.rtol)
            elif isinstance(value, (int, float)):
                atol = max(atol or 0.0, float(value))
    if atol is None and rtol is None:
        return None, None
    default_rtol, default_atol = _TORCH_TOLERANCE.pair(dtype)
    return max(atol or 0.0, default_atol), max(rtol or 0.0, default_rtol)
