"""Rules of ExecuTorch's prim operators (executorch_prim::, aten::sym_size)."""

from __future__ import annotations

from . import guards as g
from .parts import Direct, Safety
from .rules import Rule

RULES = [
    # the prim op ET_CHECKs 0 <= dim < self.dim() (negative dims abort too)
    Rule(("aten::sym_size.int",), direct=Direct(guards=(g.dim_in_range("self", "dim", scalar_has_one_dim=False),))),
    # integer division by zero raises SIGFPE inside the kernel
    Rule(
        ("executorch_prim::floordiv.Scalar", "executorch_prim::floordiv.int", "executorch_prim::mod.Scalar", "executorch_prim::mod.int"),
        safety=Safety(guards=(g.divisor_nonzero("b", "a"),)),
    ),
]
