"""A custom ExecuTorch kernel from a Python string, end to end:

    source string -> etops.custom_op (torch op + ExecuTorch kernel, compiled in ~1 s,
    cached) -> torch.export -> to_edge -> to_executorch -> .pte -> executorch.runtime
    runs the program on the kernel just registered: no CMake, no codegen, no runtime
    rebuild. Then the kernel is changed and the loop goes again.

Run: PYTHONPATH=src .venv/bin/python examples/custom_kernel_pte.py
"""

from __future__ import annotations

import os
import tempfile
import time

import torch

import etops

SOURCE = r"""
Tensor& scaled_add_out(KernelRuntimeContext& ctx, const Tensor& a, const Tensor& b,
                       double alpha, Tensor& out) {
  ET_KERNEL_CHECK(ctx, a.scalar_type() == ScalarType::Float && a.numel() == b.numel() &&
                  out.numel() == a.numel(), InvalidArgument, out);
  const float* x = a.const_data_ptr<float>();
  const float* y = b.const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < out.numel(); i++) o[i] = x[i] + static_cast<float>(alpha) * y[i];
  return out;
}
"""


class Model(torch.nn.Module):
    def forward(self, x, y):
        return torch.ops.mylib.scaled_add(torch.relu(x), y, 0.5) * 2


def export_pte(model, inputs) -> bytes:
    from executorch.exir import to_edge

    exported = torch.export.export(model, inputs)
    return to_edge(exported).to_executorch().buffer


def run_pte(buffer: bytes, inputs):
    from executorch.runtime import Runtime

    with tempfile.NamedTemporaryFile(suffix=".pte", delete=False) as f:
        f.write(buffer)
    try:
        method = Runtime.get().load_program(f.name).load_method("forward")
        return method.execute(list(inputs))[0]
    finally:
        os.unlink(f.name)


def main() -> None:
    t = time.perf_counter()
    op = etops.custom_op("mylib::scaled_add(Tensor a, Tensor b, float alpha) -> Tensor", SOURCE, function="scaled_add_out")
    print(f"custom_op registered in {time.perf_counter() - t:.2f} s ({'compiled' if op.handle.origin['compiled'] else 'from the cache'}):")
    print(" ", op.out.origins[0].describe())

    inputs = (torch.randn(2, 3), torch.randn(2, 3))
    model = Model()
    pte = export_pte(model, inputs)
    got = run_pte(pte, inputs)
    want = model(*inputs)  # eager: torch.ops.mylib.scaled_add runs the same kernel through etops
    reference = (torch.relu(inputs[0]) + 0.5 * inputs[1]) * 2
    print(".pte result:   ", got.flatten().tolist())
    print("eager PyTorch: ", want.flatten().tolist())
    print("plain torch:   ", reference.flatten().tolist())
    assert torch.allclose(got, reference) and torch.allclose(want, reference)

    # Change the kernel and go again: same op, new source, the next .pte load sees it.
    t = time.perf_counter()
    etops.custom_op("mylib::scaled_add(Tensor a, Tensor b, float alpha) -> Tensor",
                    SOURCE.replace("x[i] +", "x[i] - "), function="scaled_add_out")
    print(f"kernel replaced in {time.perf_counter() - t:.2f} s")
    got = run_pte(pte, inputs)
    print(".pte result:   ", got.flatten().tolist())
    assert torch.allclose(got, (torch.relu(inputs[0]) - 0.5 * inputs[1]) * 2)
    print("ok")


if __name__ == "__main__":
    main()
