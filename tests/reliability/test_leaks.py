"""Leaks: a million calls of a small kernel and ten thousand failing calls grow the
resident set by at most 1 MB (each in a fresh interpreter, so nothing else the
suite does moves the figure)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import etops

SRC = str(Path(etops.__file__).resolve().parent.parent)

LEAK_SCRIPT = r"""
import gc, json, os, sys, time, warnings
import torch, etops

N_SMALL, N_FAIL = int(sys.argv[1]), int(sys.argv[2])

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

def measure(fn, n):
    for _ in range(max(n // 20, 2000)):  # warm up: caches, free lists, allocator arenas
        fn()
    gc.collect()
    before = rss()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    seconds = time.perf_counter() - t
    gc.collect()
    return {"calls": n, "growth_bytes": rss() - before, "seconds": round(seconds, 2)}

reg = etops.registry()
add, mm, cat = reg.aten.add.out, reg.aten.mm.out, reg.aten.cat.out
a, b, out = torch.ones(4), torch.ones(4), torch.empty(4)
xb, ob = torch.ones(2, 2, dtype=torch.bool), torch.empty(2, 2, dtype=torch.bool)

def small():
    add(a, b, out=out)

def kernel_error():  # the kernel runs and fails: KernelError with its log
    try:
        mm(xb, xb, out=ob)
    except etops.KernelError:
        pass

def type_error():  # refused before the kernel
    try:
        add(a, "x", out=out)
    except TypeError:
        pass

def shape_error():  # the kernel fails, the slow path asks torch's meta kernels, ValueError
    try:
        cat([torch.ones(2, 3), torch.ones(3, 2)], 0)
    except ValueError:
        pass

results = {
    "small_calls": measure(small, N_SMALL),
    "kernel_errors": measure(kernel_error, N_FAIL),
    "type_errors": measure(type_error, N_FAIL),
    "shape_errors": measure(shape_error, N_FAIL),
}
print("RESULT " + json.dumps(results))
"""

MB = 1 << 20


def run_leak_check(n_small: int, n_fail: int) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", LEAK_SCRIPT, str(n_small), str(n_fail)], capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")


@pytest.mark.skipif(UNDER_ASAN, reason="ASan keeps freed memory in quarantine (hundreds of MB): RSS says nothing there")
def test_a_million_small_calls_and_ten_thousand_failing_calls_do_not_grow_rss():
    results = run_leak_check(1_000_000, 10_000)
    for name, r in results.items():
        assert r["growth_bytes"] <= 1 * MB, f"{name}: RSS grew by {r['growth_bytes'] / 1024:.0f} KiB over {r['calls']} calls"
