"""Attribution runs of guarded calls (issue 38): what a guarded call that faults
costs when the fault is within a page of an argument (named from the run that
died) and when it is 120 MB before the start of its out (past the default guard
regions: the call runs again in a new guard process whose guard regions reach it,
an attribution run), interleaved, on a kernel compiled here that writes one
element, or 30 million elements, before its out (5 float32 elements). Each faulting
call ends its guard process, so both include forking the next one.

    python benchmarks/bench_guard_attribution.py [--calls 5] [--repeats 5] [--json PATH]
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

import torch  # noqa: E402
import etops  # noqa: E402

SOURCE = r"""
Tensor& before_out(KernelRuntimeContext& ctx, const Tensor& x, int64_t at, Tensor& out) {
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < out.numel(); i++) o[i] = x.const_data_ptr<float>()[i];
  volatile float* p = o + at;
  *p = 7.0f;
  return out;
}
"""
SCHEMA = "before.out(Tensor x, int at, *, Tensor(a!) out) -> Tensor(a!)"


def run(calls: int = 5, repeats: int = 5) -> dict:
    kernel = etops.register_kernel("benchattr::before.out", SOURCE, schema=SCHEMA).kernel
    x = torch.ones(5)
    pc = time.perf_counter

    def faulting(at, expected_offset):
        def timed(n):
            t0 = pc()
            for _ in range(n):
                try:
                    etops.guard.call(kernel, x, at, out=torch.empty(5))
                except etops.KernelCrashed as err:
                    assert (err.argument, err.offset) == ("out", expected_offset), str(err)
                else:
                    raise AssertionError("the kernel did not fault")
            return pc() - t0
        return timed

    add = etops.registry().aten.add.out

    def clean(n):
        t0 = pc()
        for _ in range(n):
            etops.guard.call(add, x, x, out=torch.empty(5))
        return pc() - t0

    candidates = {"fault within a page (no attribution run)": faulting(-1, 3),
                  "fault 120 MB away (one attribution run)": faulting(-30_000_000, 119_999_999),
                  "clean guarded call after a fault (guard process forked)": None}
    samples = {k: [] for k in candidates}
    for r in range(repeats):
        order = list(candidates)[:2] if r % 2 == 0 else list(candidates)[1::-1]
        for name in order:
            samples[name].append(candidates[name](calls) / calls * 1000.0)  # ms
        t = 0.0
        for _ in range(calls):  # a fault, then a clean call that forks the next guard process
            try:
                etops.guard.call(kernel, x, -1, out=torch.empty(5))
            except etops.KernelCrashed:
                pass
            t += clean(1)
        samples["clean guarded call after a fault (guard process forked)"].append(t / calls * 1000.0)
    return {"name": "guard_attribution", "calls_per_sample": calls, "repeats": repeats,
            "ms_per_call": {k: _common.summary(v) for k, v in samples.items()}}


def report(res: dict) -> str:
    lines = [f"Guarded calls that fault, ms per call ({res['calls_per_sample']} calls x {res['repeats']} "
             "interleaved repeats)", ""]
    return "\n".join(lines + _common.ms_table(res["ms_per_call"], digits=1))


def main():
    _common.standalone_main(__doc__, {"calls": 5, "repeats": 5}, run, report)


if __name__ == "__main__":
    main()
