"""One reproducer of each crash class the fuzzer's adversarial classes found
(issue 33; docs/reliability.md): an integer division trap (INT_MIN / -1, SIGFPE),
a segfault on a zero-size dim, heap corruption after an out of another dtype than
the kernel writes, an out that partially overlaps its input.

Each call runs in a fresh interpreter under glibc's malloc checking (when libc6's
debug library is there). The process must survive it: the call raises an etops
error (KernelCrashed, a KernelError) or refuses as torch does (a TypeError or
ValueError), or returns exactly torch's result where torch has one; then the heap
is walked, and the next call in the same process returns the right values."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

MALLOC_DEBUG = "/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"

_SCRIPT = """
import ctypes, gc, torch, etops
reg = etops.registry()
{setup}
try:
    result = {call}
except (etops.EtopsError, TypeError, ValueError) as exc:
    print("RAISED", type(exc).__name__, str(exc)[:300].replace("\\n", " "))
else:
    expected = {expected}
    if expected is None:
        print("RETURNED without raising (torch refuses this call):", result)
    else:
        got = result if isinstance(result, (tuple, list)) else (result,)
        want = expected if isinstance(expected, (tuple, list)) else (expected,)
        same = len(got) == len(want) and all(torch.equal(torch.as_tensor(g), torch.as_tensor(w)) for g, w in zip(got, want))
        print("RETURNED torch's result" if same else f"RETURNED {{got}}, torch {{want}}")
gc.collect()
junk = [bytearray(64 * (k % 97 + 1)) for k in range(20000)]  # allocations that meet a corrupted chunk
del junk
ctypes.CDLL(None).malloc_trim(0)  # walks every free chunk
out = reg.aten.add.out(torch.arange(4.0), torch.ones(4), out=torch.empty(4))
assert out.tolist() == [1.0, 2.0, 3.0, 4.0], out
print("NEXT CALL OK")
"""

#: name -> (setup, the call, torch's result or None when torch refuses the call)
REPRODUCERS = {
    # SIGFPE: INT64_MIN / -1 traps in idiv; torch wraps to INT64_MIN
    "floor_divide_int64_min_by_minus_one": (
        "",
        "reg.aten.floor_divide.out(torch.tensor([-2**63]), torch.tensor([-1]), out=torch.empty(1, dtype=torch.long))",
        "torch.tensor([-2**63])",
    ),
    "remainder_int32_min_by_minus_one": (
        "",
        "reg.aten.remainder.Tensor_out(torch.tensor([-2**31], dtype=torch.int32), torch.tensor([-1], dtype=torch.int32), "
        "out=torch.empty(1, dtype=torch.int32))",
        "torch.tensor([0], dtype=torch.int32)",
    ),
    # SIGFPE in executorch_prim's Scalar floor division: 2**63 does not fit its int64 result
    "prim_floordiv_int64_min_by_minus_one": (
        "",
        "reg.executorch_prim.floordiv.Scalar(-2**63, -1)",
        "None",
    ),
    # SIGFPE in div with rounding_mode="trunc" by a Scalar -1 (torch's own CPU kernel traps there too: no reference)
    "div_scalar_trunc_int64_min_by_minus_one": (
        "",
        "reg.aten.div.Scalar_mode_out(torch.tensor([-2**63]), -1, rounding_mode='trunc', out=torch.empty(1, dtype=torch.long))",
        "None",
    ),
    # SIGSEGV: a zero-size spatial dim (torch: "Input and output sizes should be greater than 0")
    "upsample_bilinear2d_zero_size_spatial_dim": (
        "",
        "reg.aten.upsample_bilinear2d.vec_out(torch.randn(1, 2, 0, 5), [3, 3], False, None, out=torch.empty(1, 2, 3, 3))",
        "None",
    ),
    # heap corruption: out0 float64 where the kernel writes float32 (torch: "Expected out tensor to have dtype float")
    "var_mean_out0_float64": (
        "",
        "reg.aten.var_mean.correction_out(torch.tensor(2.82), out0=torch.empty((), dtype=torch.float64), "
        "out1=torch.empty((), dtype=torch.float32))",
        "None",
    ),
    # partial overlap: out starts one element into the input (torch: "unsupported operation: some elements of the
    # input tensor and the written-to tensor refer to a single memory location")
    "abs_out_overlaps_input": (
        "buf = torch.tensor([1.0, -2.0, 3.0, -4.0, 5.0])\nx, out = buf[:4], buf[1:]",
        "reg.aten.abs.out(x, out=out)",
        "None",
    ),
}


def _run(setup: str, call: str, expected: str) -> subprocess.CompletedProcess:
    script = _SCRIPT.format(setup=textwrap.dedent(setup), call=call, expected=expected)
    env = dict(os.environ)
    if os.path.exists(MALLOC_DEBUG) and "libasan" not in env.get("LD_PRELOAD", ""):
        env.update(LD_PRELOAD=MALLOC_DEBUG, GLIBC_TUNABLES="glibc.malloc.check=3")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("name", list(REPRODUCERS))
def test_the_process_survives_and_the_next_call_works(name):
    setup, call, expected = REPRODUCERS[name]
    proc = _run(setup, call, expected)
    what = f"exit status {proc.returncode}\nstdout: {proc.stdout[-1500:]}\nstderr: {proc.stderr[-1500:]}"
    assert proc.returncode == 0, f"{name} killed the process: {what}"
    assert "RAISED" in proc.stdout or "RETURNED torch's result" in proc.stdout, what
    assert "NEXT CALL OK" in proc.stdout, what
