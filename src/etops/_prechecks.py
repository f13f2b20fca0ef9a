"""Argument checks for the few kernels that abort or crash the process, instead of
failing, on inputs their schema allows. Each check raises a Python exception naming
the argument; the C call path runs it before the kernel (only for these kernels).

Every entry is a finding about ExecuTorch worth reporting upstream.
"""

from __future__ import annotations

import torch


def _check_sym_size(bound: dict) -> None:
    # prim op: ET_CHECKs 0 <= dim < self.dim() (negative dims abort too)
    self, dim = bound["self"], bound["dim"]
    ndim = self.dim() if isinstance(self, torch.Tensor) else len(self.shape)
    if not isinstance(dim, int) or not 0 <= dim < ndim:
        raise IndexError(f"aten::sym_size.int: argument 'dim' is {dim!r}; ExecuTorch's kernel needs 0 <= dim < {ndim}")


def _check_int_divisor(op: str):
    def check(bound: dict) -> None:
        # prim op: integer division by zero raises SIGFPE inside the kernel
        a, b = bound["a"], bound["b"]
        if isinstance(a, int) and isinstance(b, int) and not isinstance(b, bool) and b == 0:
            raise ZeroDivisionError(f"{op}: argument 'b' is an integer zero")

    return check


#: operator name -> check(bound arguments)
PRECHECKS = {
    "aten::sym_size.int": _check_sym_size,
    "executorch_prim::floordiv.Scalar": _check_int_divisor("executorch_prim::floordiv.Scalar"),
    "executorch_prim::floordiv.int": _check_int_divisor("executorch_prim::floordiv.int"),
    "executorch_prim::mod.Scalar": _check_int_divisor("executorch_prim::mod.Scalar"),
    "executorch_prim::mod.int": _check_int_divisor("executorch_prim::mod.int"),
}
