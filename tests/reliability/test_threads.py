"""Threads: eight threads calling kernels on their own tensors (big enough that the
GIL is released inside the kernel) get correct results, and so do small calls
interleaved with them. (A ninth thread registering and overriding custom kernels
meanwhile comes with the custom-kernel issue.)"""

from __future__ import annotations

import threading

import torch

import etops

THREADS = 8


def _work(seed: int, rounds: int, errors: list) -> None:
    reg = etops.registry()
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(192, 192, generator=g)
    b = torch.randn(192, 192, generator=g)
    idx = torch.randint(0, 192, (4096,), generator=g)
    out = torch.empty(192, 192)
    mm_out = torch.empty(192, 192)
    cat_out = torch.empty(384, 192)
    sel_out = torch.empty(4096, 192)
    sum_out = torch.empty(192)
    small = torch.full((3,), float(seed))
    checks = [
        (lambda: reg.aten.mul.out(a, b, out=out), lambda: a * b),
        (lambda: reg.aten.mm.out(a, b, out=mm_out), lambda: a @ b),
        (lambda: reg.aten.cat.out([a, b], 0, out=cat_out), lambda: torch.cat([a, b], 0)),
        (lambda: reg.aten.index_select.out(a, 0, idx, out=sel_out), lambda: a.index_select(0, idx)),
        (lambda: reg.aten.sum.IntList_out(a, [0], out=sum_out), lambda: a.sum(0)),
        (lambda: reg.aten.add.out(small, small), lambda: small * 2),
        (lambda: reg.aten.tanh.out(a, out=out), lambda: torch.tanh(a)),
    ]
    for r in range(rounds):
        for i, (run, want) in enumerate(checks):
            got = run()
            if not torch.allclose(got, want(), rtol=1e-4, atol=1e-4):
                errors.append((seed, r, i))
                return


def test_eight_threads_calling_kernels_get_correct_results():
    errors: list = []
    threads = [threading.Thread(target=_work, args=(i + 1, 20, errors)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_the_gil_is_released_inside_big_kernels():
    """A pure-Python thread keeps running while another thread is inside a big kernel."""
    reg = etops.registry()
    a = torch.randn(600, 600)
    out = torch.empty(600, 600)
    reg.aten.mm.out(a, a, out=out)
    ticks = []
    done = threading.Event()

    def counter():
        while not done.is_set():
            ticks.append(1)

    def kernels():
        for _ in range(5):
            reg.aten.mm.out(a, a, out=out)
        done.set()

    t1, t2 = threading.Thread(target=counter), threading.Thread(target=kernels)
    t1.start()
    t2.start()
    t2.join()
    t1.join()
    assert len(ticks) > 0
