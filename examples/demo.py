"""etops demo: the registered ExecuTorch kernels as a table, then a handful of them
run on torch tensors next to ATen.  Run with `make demo`."""

import collections
import time

import torch

import etops

reg = etops.registry()

# 1. What the runtime has.
by_namespace = collections.defaultdict(list)
for name in sorted(reg.operator_names):
    by_namespace[name.split("::")[0]].append(name)
print(f"{'namespace':<22}{'kernels':>8}  examples")
for ns, names in sorted(by_namespace.items()):
    print(f"{ns:<22}{len(names):>8}  {', '.join(n.split('::')[1] for n in names[:4])}, ...")
print(f"{'total':<22}{sum(map(len, by_namespace.values())):>8}\n")

# 2. A few kernels against ATen.
torch.manual_seed(0)
x = torch.randn(64, 128)
w = torch.randn(32, 128)
img = torch.randn(2, 3, 16, 16)
cases = [
    ("aten::add.out", lambda op: op(x, x, alpha=0.5), lambda: torch.add(x, x, alpha=0.5)),
    ("aten::mm.out", lambda op: op(x, w.t().contiguous()), lambda: torch.mm(x, w.t())),
    ("aten::_softmax.out", lambda op: op(x, 1, False), lambda: torch.softmax(x, 1)),
    ("aten::gelu.out", lambda op: op(x, approximate="tanh"), lambda: torch.nn.functional.gelu(x, approximate="tanh")),
    ("aten::max_pool2d_with_indices.out", lambda op: op(img, [2, 2], [2, 2])[0], lambda: torch.nn.functional.max_pool2d(img, 2)),
    ("aten::native_layer_norm.out", lambda op: op(x, [128], None, None, 1e-5)[0], lambda: torch.nn.functional.layer_norm(x, [128])),
    ("aten::cat.out", lambda op: op([x, x], 0), lambda: torch.cat([x, x], 0)),
    ("aten::nonzero.out", lambda op: op(x > 1), lambda: torch.nonzero(x > 1)),
]
print(f"{'kernel':<36}{'shape':<16}{'max abs diff':>14}{'ET us':>10}{'ATen us':>10}")
for name, run_et, run_aten in cases:
    op = reg.get_kernel(name)
    got, want = run_et(op), run_aten()
    diff = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0

    def per_call(fn, n=200):
        fn()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t) / n * 1e6

    print(f"{name:<36}{str(list(got.shape)):<16}{diff:>14.2e}{per_call(lambda: run_et(op)):>10.1f}{per_call(run_aten):>10.1f}")
print("\n(times include allocating the outputs; see benchmarks/ for real measurements)")
