"""Instructions per call, counted by callgrind (repeatable on a loaded machine).

Runs `--calls` calls of one candidate in the loop bench_call_overhead.py times
(`op(a, b, out=c)` with op = etops.registry().aten.add.out on 2x3 float32, or the
floor, or `op(a, b)`; `alternate`: `op(a, b, out=c)` and a 3x2 call in turn, each
call counted; `number`: `op(a, 2.0, out=c)`), inside `operator.call`, so callgrind can count that loop alone:

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=_operator_call \\
        .venv/bin/python benchmarks/call_instructions.py etops 20000

The instructions collected divided by the calls are the figure (the loop's own
few dozen included, as in the timed benchmark). `callgrind_annotate` on the output
file says where they go (build unstripped to see etops' own functions:
`pip install --config-settings=install.strip=false ...`).
"""

from __future__ import annotations

import operator
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

import torch  # noqa: E402
import etops  # noqa: E402


def main(which: str, n: int) -> None:
    floor = _common.build_floor()
    op = etops.registry().aten.add.out
    a, b, c = torch.rand(2, 3), torch.rand(2, 3), torch.empty(2, 3)
    add_floor = floor.add_floor

    def etops_loop(n):
        for _ in range(n):
            op(a, b, out=c)

    def floor_loop(n):
        for _ in range(n):
            add_floor(a, b, c)

    def alloc_loop(n):
        for _ in range(n):
            op(a, b)

    def empty_loop(n):
        for _ in range(n):
            pass

    x, y, z = torch.rand(3, 2), torch.rand(3, 2), torch.empty(3, 2)

    def alternate_loop(n):  # two signatures in turn: a kernel's call memo never matches
        for _ in range(n // 2):
            op(a, b, out=c)
            op(x, y, out=z)

    def number_loop(n):  # a Python number for `other`: never remembered
        for _ in range(n):
            op(a, 2.0, out=c)

    loops = {"etops": etops_loop, "floor": floor_loop, "alloc": alloc_loop, "empty": empty_loop,
             "alternate": alternate_loop, "number": number_loop}
    for warm in (etops_loop, floor_loop, alloc_loop, alternate_loop, number_loop):
        warm(200)  # signatures met, caches filled
    operator.call(loops[which], n)
    assert torch.equal(c, a + b)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("etops", "floor", "alloc", "empty", "alternate", "number"):
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]))
