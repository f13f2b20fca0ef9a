"""One reproducer of each crash class the fuzzer's adversarial classes found
(issue 33; docs/reliability.md): an integer division trap (INT_MIN / -1, SIGFPE),
a segfault on a zero-size dim, heap corruption after an out of another dtype than
the kernel writes, an out that partially overlaps its input.

Each call runs in a process of its own under glibc's malloc checking (when libc6's
debug library is there): a fork (etops.child_process.Child) of one fresh
interpreter that imported torch and etops under the checking (it takes effect at
a process's start only) and made no kernel call, so the suite pays torch's import
once, not once a reproducer. The process must survive the call: the call raises
an etops error (KernelCrashed, a KernelError) or refuses as torch does (a
TypeError or ValueError), or returns exactly torch's result where torch has one;
then the heap is walked, and the next call in the same process returns the right
values."""

from __future__ import annotations

import json
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


#: the one fresh interpreter: torch and etops imported, then each script run in a fork
#: of it, its exit code (negative: the signal that killed it), stdout and stderr sent
#: back as JSON
_HARNESS = r"""
import json, os, sys, tempfile, traceback
import ctypes, gc, torch, etops
import torch._dynamo  # what a first call imports (torch's decompositions do): once here, not in every fork
from etops.child_process import Child
from etops.process_end import exit_code
etops.registry()
gc.freeze()  # what every fork inherits: its gc.collect scans what its call made
results = {}
for name, script in json.loads(sys.argv[1]).items():
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()

    def body():
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            exec(compile(script, name, "exec"), {"__name__": "__main__"})
        except BaseException:
            traceback.print_exc()
            return 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        return 0

    child = Child(body)
    timed_out = child.wait(300)
    texts = []
    for f in (out, err):
        f.seek(0)
        texts.append(f.read().decode(errors="replace"))
    results[name] = [exit_code(child.wait_status), texts[0], ("timed out after 300 s\n" if timed_out else "") + texts[1]]
print("RESULTS " + json.dumps(results))
"""


@pytest.fixture(scope="module")
def outcomes() -> dict[str, subprocess.CompletedProcess]:
    """name -> its script's process: exit code, stdout, stderr."""
    scripts = {name: _SCRIPT.format(setup=textwrap.dedent(setup), call=call, expected=expected)
               for name, (setup, call, expected) in REPRODUCERS.items()}
    env = dict(os.environ)
    if os.path.exists(MALLOC_DEBUG) and "libasan" not in env.get("LD_PRELOAD", ""):
        env.update(LD_PRELOAD=MALLOC_DEBUG, GLIBC_TUNABLES="glibc.malloc.check=3")
    done = subprocess.run([sys.executable, "-c", _HARNESS, json.dumps(scripts)], capture_output=True, text=True, env=env,
                          timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    assert done.returncode == 0 and lines, f"exit status {done.returncode}\n{done.stdout[-1500:]}\n{done.stderr[-3000:]}"
    return {name: subprocess.CompletedProcess(name, code, out, err)
            for name, (code, out, err) in json.loads(lines[0][len("RESULTS "):]).items()}


@pytest.mark.parametrize("name", list(REPRODUCERS))
def test_the_process_survives_and_the_next_call_works(outcomes, name):
    proc = outcomes[name]
    what = f"exit status {proc.returncode}\nstdout: {proc.stdout[-1500:]}\nstderr: {proc.stderr[-1500:]}"
    assert proc.returncode == 0, f"{name} killed the process: {what}"
    assert "RAISED" in proc.stdout or "RETURNED torch's result" in proc.stdout, what
    assert "NEXT CALL OK" in proc.stdout, what
