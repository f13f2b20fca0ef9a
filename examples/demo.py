"""etops demo: the registered ExecuTorch kernels as a table, then a handful of them
run on torch tensors next to ATen, timed the way `etops bench` times (its very
routine: etops.bench).  Run with `make demo`."""

from __future__ import annotations

import collections

import torch

import etops
from etops.bench.result import fmt_ratio, fmt_time, row_verdict


def print_kernel_table(reg) -> None:
    """1. What the runtime has: kernels per namespace."""
    by_namespace = collections.defaultdict(list)
    for name in sorted(reg.operator_names):
        by_namespace[name.split("::")[0]].append(name)
    print(f"{'namespace':<22}{'kernels':>8}  examples")
    for ns, names in sorted(by_namespace.items()):
        print(f"{ns:<22}{len(names):>8}  {', '.join(n.split('::')[1] for n in names[:4])}, ...")
    print(f"{'total':<22}{sum(map(len, by_namespace.values())):>8}\n")


def cases() -> list:
    """(kernel name, args, kwargs, the same computed by torch, the result's item compared)."""
    torch.manual_seed(0)
    x = torch.randn(64, 128)
    w = torch.randn(32, 128)
    img = torch.randn(2, 3, 16, 16)
    F = torch.nn.functional
    return [
        ("aten::add.out", (x, x), {"alpha": 0.5}, lambda: torch.add(x, x, alpha=0.5), None),
        ("aten::mm.out", (x, w.t().contiguous()), {}, lambda: torch.mm(x, w.t()), None),
        ("aten::_softmax.out", (x, 1, False), {}, lambda: torch.softmax(x, 1), None),
        ("aten::gelu.out", (x,), {"approximate": "tanh"}, lambda: F.gelu(x, approximate="tanh"), None),
        ("aten::max_pool2d_with_indices.out", (img, [2, 2], [2, 2]), {}, lambda: F.max_pool2d(img, 2), 0),
        ("aten::native_layer_norm.out", (x, [128], None, None, 1e-5), {}, lambda: F.layer_norm(x, [128]), 0),
        ("aten::cat.out", ([x, x], 0), {}, lambda: torch.cat([x, x], 0), None),
        ("aten::nonzero.out", (x > 1,), {}, lambda: torch.nonzero(x > 1), None),
    ]


def time_against_aten(name: str, args: tuple, kwargs: dict, threads: int = 1) -> dict:
    """One bench row (etops.bench: interleaved rounds, both sides on `threads`
    threads, outs preallocated on both sides) for the kernel on these inputs."""
    (row,) = etops.bench(name, inputs=(args, kwargs), threads=threads).rows  # bench's own rounds and loops
    return row


def main(threads: int = 1) -> None:
    reg = etops.registry()
    print_kernel_table(reg)
    # 2. A few kernels against ATen.
    print(f"Compared: each ExecuTorch kernel called through etops against ATen's out= variant on the same inputs, "
          f"outs preallocated on both sides, {threads} thread{'s' if threads > 1 else ''} each, 11 interleaved rounds "
          f"(as `etops bench` times); ratio = ET / ATen per call, median ± half the interquartile range of the rounds.\n")
    print(f"{'kernel':<36}{'shape':<16}{'max abs diff':>14}{'ET':>11}{'ATen':>11}{'ET/ATen':>14}  verdict")
    for name, args, kwargs, run_aten, item in cases():
        got, want = reg.get_kernel(name)(*args, **kwargs), run_aten()
        got = got[item] if item is not None else got
        diff = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
        row = time_against_aten(name, args, kwargs, threads)
        if row.get("error"):
            print(f"{name:<36}{str(list(got.shape)):<16}{diff:>14.2e}  not timed: {row['error']}")
            continue
        print(f"{name:<36}{str(list(got.shape)):<16}{diff:>14.2e}{fmt_time(row['etops']['median']):>11}"
              f"{fmt_time(row['aten']['median']):>11}{fmt_ratio(row['ratio']):>14}  {row_verdict(row)}")
    print("\n(`etops bench NAME --sizes 16,4k,1M` times more sizes and the kernels alone; see benchmarks/)")


if __name__ == "__main__":
    main()
