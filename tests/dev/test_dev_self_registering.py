"""etops dev on a kernel file that registers its kernels itself (the LLM custom
ops' op_sdpa.cpp, op_fallback.cpp, ...): refused before any build, exit 2, naming
the registrations, instead of a build whose load aborts the process when a YAML
is given for it."""

from __future__ import annotations

import subprocess
import sys

from etops.checkout.self_registering import refusal, static_registrations

#: the shapes of upstream's registrations (op_fallback.cpp's macro, op_sdpa.cpp's boxed kernel)
SOURCE = '''
Tensor& fallback_out(KernelRuntimeContext& ctx, const Tensor& in, Tensor& out) { return out; }
EXECUTORCH_LIBRARY(
    llama,
    "fallback.out",
    torch::executor::native::fallback_out);
const auto gated_delta_rule_out_registration =
    executorch::runtime::register_kernel(executorch::runtime::Kernel(
        "llama::gated_delta_rule.out",
        gated_delta_rule_out_boxed));
'''


def test_static_registrations_are_read_from_the_source():
    assert static_registrations(SOURCE) == [("llama::fallback.out", 3), ("llama::gated_delta_rule.out", 8)]
    assert static_registrations("Tensor& add_out(KernelRuntimeContext& ctx) { return out; }") == []
    assert refusal("op_add.cpp", "Tensor& add_out(KernelRuntimeContext& ctx);") is None
    assert "llama::fallback.out (line 3)" in refusal("op_fallback.cpp", SOURCE)


def test_etops_dev_refuses_a_self_registering_file(tmp_path):
    folder = tmp_path / "extension" / "llm" / "custom_ops"
    folder.mkdir(parents=True)
    (folder / "op_fallback.cpp").write_text(SOURCE)
    yaml = tmp_path / "custom_ops.yaml"
    yaml.write_text("- func: llama::fallback.out(Tensor input, *, Tensor(a!) output) -> Tensor(a!)\n  kernels:\n"
                    "    - arg_meta: null\n      kernel_name: torch::executor::native::fallback_out\n")
    proc = subprocess.run([sys.executable, "-m", "etops", "dev", str(folder / "op_fallback.cpp"), "--yaml", str(yaml)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "registers its kernels itself" in proc.stdout + proc.stderr
    assert "aborted" not in proc.stdout + proc.stderr
