"""Custom kernels (issue 4), side by side in one run:

  * cold build + registration of a small elementwise kernel from a source string
    (empty kernel cache: Ninja, the compiler, dlopen, registry edit) against
    torch.utils.cpp_extension.load_inline of the same kernel (empty build dir);
  * cached registration of that kernel in a fresh process, beyond `import etops`;
  * the call cost of the custom kernel against the built-in aten::add.out (same
    schema, 2x3 float32, out given), interleaved plain loops.

    python benchmarks/bench_custom.py [--cold 3] [--inline 1] [--fresh 5] [--calls 10000] [--repeats 30] [--json PATH]
"""

from __future__ import annotations

import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

import torch  # noqa: E402
import etops  # noqa: E402

ADD_SCHEMA = "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)"

ET_SOURCE = r"""
// UNIQUE
Tensor& my_add_out(KernelRuntimeContext& ctx, const Tensor& self, const Tensor& other,
                   const Scalar& alpha, Tensor& out) {
  ET_KERNEL_CHECK(ctx, self.scalar_type() == ScalarType::Float && self.numel() == other.numel() &&
                  out.numel() == self.numel(), InvalidArgument, out);
  const float a = alpha.isFloatingPoint() ? (float)alpha.to<double>() : (float)alpha.to<int64_t>();
  const float* x = self.const_data_ptr<float>();
  const float* y = other.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < out.numel(); i++) o[i] = x[i] + a * y[i];
  return out;
}
"""

TORCH_SOURCE = r"""
// UNIQUE
torch::Tensor my_add_out(torch::Tensor self, torch::Tensor other, double alpha, torch::Tensor out) {
  const float* x = self.data_ptr<float>();
  const float* y = other.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); i++) o[i] = x[i] + alpha * y[i];
  return out;
}
"""


def _register_new(i: int, tag: str):
    src = ET_SOURCE.replace("UNIQUE", f"{tag} {i} {time.time_ns()}")
    t = time.perf_counter()
    h = etops.register_kernel(f"bench{tag}::add{i}.out", src, schema=ADD_SCHEMA.replace("add.out", f"add{i}.out"))
    dt = time.perf_counter() - t
    assert h.origin["compiled"]
    a = torch.rand(2, 3)
    torch.testing.assert_close(h(a, a, out=torch.empty(2, 3)), 2 * a)
    h.deregister()
    return dt


def cold_etops(rounds: int) -> dict:
    """'empty': each kernel into an empty cache (nothing etops ever built: no
    precompiled prelude either). 'warm': new sources into a cache whose precompiled
    prelude exists (any earlier build on the machine made it)."""
    empty, warm = [], []
    for i in range(rounds):
        with tempfile.TemporaryDirectory() as cache:
            etops.custom.set_cache_dir(cache)
            empty.append(_register_new(i, "cold"))
            # let the background precompile of the prelude finish before the next round
            gch = [p for p in glob.glob(os.path.join(cache, "prelude", "*", "prelude.h.gch"))]
            deadline = time.time() + 120
            while not gch and time.time() < deadline and glob.glob(os.path.join(cache, "prelude", "*", "building")):
                time.sleep(0.1)
                gch = glob.glob(os.path.join(cache, "prelude", "*", "prelude.h.gch"))
            for j in range(2):
                warm.append(_register_new(10 * i + j, "warm"))
    etops.custom.set_cache_dir(None)
    return {"empty": _common.summary(empty), "warm": _common.summary(warm)}


def cold_load_inline(rounds: int) -> list[float]:
    from torch.utils.cpp_extension import load_inline

    times = []
    for i in range(rounds):
        with tempfile.TemporaryDirectory() as build:
            t = time.perf_counter()
            mod = load_inline(name=f"bench_custom_inline_{i}_{os.getpid()}", cpp_sources=[TORCH_SOURCE.replace("UNIQUE", f"{time.time_ns()}")],
                              functions=["my_add_out"], build_directory=build, verbose=False)
            times.append(time.perf_counter() - t)
            a = torch.rand(2, 3)
            torch.testing.assert_close(mod.my_add_out(a, a, 1.0, torch.empty(2, 3)), 2 * a)
    return times


FRESH = r"""
import time, sys
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import etops
t2 = time.perf_counter()
h = etops.register_kernel("benchfresh::add.out", sys.argv[1], schema=sys.argv[2])
t3 = time.perf_counter()
assert not h.origin["compiled"]
print(t1 - t0, t2 - t1, t3 - t2)
"""


def cached_fresh(rounds: int) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, ETOPS_CACHE_DIR=cache, PYTHONPATH=os.path.join(_common.ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        src = ET_SOURCE.replace("UNIQUE", "fresh")
        schema = ADD_SCHEMA.replace("add.out", "add.out")
        # first run fills the cache
        subprocess.run([sys.executable, "-c", FRESH.replace("assert not", "assert 1 or not"), src, schema], check=True, env=env, capture_output=True)
        register, imports = [], []
        for _ in range(rounds):
            out = subprocess.run([sys.executable, "-c", FRESH, src, schema], check=True, env=env, capture_output=True, text=True)
            t_torch, t_etops, t_reg = map(float, out.stdout.split()[-3:])
            register.append(t_reg)
            imports.append(t_etops)
    return {"register_s": _common.summary(register), "import_etops_s": _common.summary(imports)}


def call_overhead(calls: int, repeats: int) -> dict:
    h = etops.register_kernel("benchcall::add.out", ET_SOURCE.replace("UNIQUE", "call"), schema=ADD_SCHEMA)
    custom = h.kernel
    builtin = etops.registry().aten.add.out
    # The built-in's own function registered as a custom kernel: same code, so the
    # difference is etops' dispatch alone.
    same_fn = [k.address for k in builtin.kernels if k.key is None][0]
    h2 = etops.register_kernel("benchsame::add.out", same_fn, schema=ADD_SCHEMA)
    same = h2.kernel
    a, b = torch.rand(2, 3), torch.rand(2, 3)
    c = torch.empty(2, 3)
    torch.testing.assert_close(custom(a, b, out=c), a + b)
    torch.testing.assert_close(builtin(a, b, out=c), a + b)
    torch.testing.assert_close(same(a, b, out=c), a + b)
    res = {"custom": [], "builtin": [], "same": []}
    rng = range(calls)
    for r in range(repeats + 2):
        names = ["custom", "builtin", "same"]
        for name in names[r % 3:] + names[: r % 3]:  # every order position in turn
            op = {"custom": custom, "builtin": builtin, "same": same}[name]
            t = time.perf_counter()
            for _ in rng:
                op(a, b, out=c)
            dt = (time.perf_counter() - t) / calls * 1e6
            if r >= 2:
                res[name].append(dt)
    paired = statistics.median(x / y for x, y in zip(res["custom"], res["builtin"]))
    paired_same = statistics.median(x / y for x, y in zip(res["same"], res["builtin"]))
    h.deregister()
    h2.deregister()
    return {"custom_us": _common.summary(res["custom"]), "builtin_us": _common.summary(res["builtin"]),
            "same_us": _common.summary(res["same"]), "ratio_paired": paired, "ratio_min": min(res["custom"]) / min(res["builtin"]),
            "same_ratio_paired": paired_same, "same_ratio_min": min(res["same"]) / min(res["builtin"])}


def run(cold: int = 3, inline: int = 1, fresh: int = 5, calls: int = 10000, repeats: int = 30) -> dict:
    out = {"cold_etops_s": cold_etops(cold)}
    if inline:
        out["cold_load_inline_s"] = _common.summary(cold_load_inline(inline))
    out["cached_fresh"] = cached_fresh(fresh)
    out["call"] = call_overhead(calls, repeats)
    return out


def report(res: dict) -> str:
    ce, cw = res["cold_etops_s"]["empty"], res["cold_etops_s"]["warm"]
    lines = ["| measurement | min | median | goal | met |", "|---|---:|---:|---|---|"]
    lines.append(f"| new kernel, empty cache: build + register, etops (s) | {ce['min']:.2f} | {ce['median']:.2f} | | |")
    lines.append(f"| new kernel, precompiled prelude cached: build + register (s) | {cw['min']:.2f} | {cw['median']:.2f} | | |")
    if "cold_load_inline_s" in res:
        li = res["cold_load_inline_s"]
        lines.append(f"| new kernel, load_inline, empty build dir (s) | {li['min']:.2f} | {li['median']:.2f} | | |")
        for label, e in (("empty cache", ce), ("prelude cached", cw)):
            speedup = li["median"] / e["median"]
            lines.append(f"| load_inline / etops, {label} (medians) | | {speedup:.1f}x | >= 10x | {'yes' if speedup >= 10 else '**no**'} |")
    cf = res["cached_fresh"]
    reg = cf["register_s"]
    lines.append(f"| cached registration in a fresh process (ms, beyond import etops) | {reg['min'] * 1e3:.1f} | {reg['median'] * 1e3:.1f} | <= 50 | {'yes' if reg['median'] <= 0.05 else '**no**'} |")
    lines.append(f"| (import etops after torch, same processes, ms) | {cf['import_etops_s']['min'] * 1e3:.1f} | {cf['import_etops_s']['median'] * 1e3:.1f} | | |")
    call = res["call"]
    lines.append(f"| call: custom add.out (us) | {call['custom_us']['min']:.3f} | {call['custom_us']['median']:.3f} | | |")
    lines.append(f"| call: built-in aten::add.out (us) | {call['builtin_us']['min']:.3f} | {call['builtin_us']['median']:.3f} | | |")
    lines.append(f"| call: built-in's function registered as a custom kernel (us) | {call['same_us']['min']:.3f} | {call['same_us']['median']:.3f} | | |")
    lines.append(f"| custom source / built-in (paired median; of mins {call['ratio_min']:.3f}) | | {call['ratio_paired']:.3f} | <= 1.05 | {'yes' if call['ratio_paired'] <= 1.05 else '**no**'} |")
    lines.append(f"| same function, custom / built-in registration (paired median; of mins {call['same_ratio_min']:.3f}) | | {call['same_ratio_paired']:.3f} | <= 1.05 | {'yes' if call['same_ratio_paired'] <= 1.05 else '**no**'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    _common.standalone_main(__doc__, {"cold": 3, "inline": 1, "fresh": 5, "calls": 10000, "repeats": 30}, run, report)
