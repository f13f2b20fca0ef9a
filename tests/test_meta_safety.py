"""Sizing outs and asking torch's checks run torch on meta tensors; a library's
native composite kernel behind the meta key (the LLM library's
``preprocess::tile_crop``) would run on their absent data. etops never calls it so:
the call raises a clear error naming the outs, the process lives."""

from __future__ import annotations

import pytest

from fresh_python import run_python

LLM = pytest.importorskip("executorch.extension.llm.custom_ops", reason="the executorch wheel's LLM custom-ops package")


def test_an_allocating_call_torch_cannot_size_on_meta_raises_and_the_process_lives():
    """(In a fresh interpreter: loading the LLM library registers kernels.)"""
    proc = run_python("""
        import torch, etops
        from etops.llm_library import load_llm_custom_ops
        from etops.meta_safety import runs_on_meta
        from etops.schemas import NAMESPACE_MODULES
        load_llm_custom_ops()
        for module in NAMESPACE_MODULES["quantized_decomposed"]:  # its ops for torch (the LLM library imports none)
            __import__(module)
        assert runs_on_meta(torch.ops.aten.add.out)  # a Meta kernel
        assert runs_on_meta(torch.ops.llama.custom_sdpa.default)  # a Python Meta kernel
        assert runs_on_meta(torch.ops.quantized_decomposed.embedding_byte.default)  # a Python composite kernel
        assert runs_on_meta(torch.ops.llama.fallback.default)  # decomposes
        assert not runs_on_meta(torch.ops.preprocess.tile_crop.default)  # the library's C++ wrapper of the kernel
        assert not runs_on_meta(torch.ops.preprocess.tile_crop.out)
        op = etops.get_kernel("preprocess::tile_crop.out")
        image = torch.randn(3, 8, 8)
        try:
            op(image, 4)
        except etops.SchemaError as exc:
            print("refused:", exc)
        out = torch.empty(4, 3, 4, 4)
        op(image, 4, out=out)  # with its out given, the kernel runs
        expected = image.reshape(3, 2, 4, 2, 4).permute(1, 3, 0, 2, 4).reshape(4, 3, 4, 4)
        print("equal:", torch.equal(out, expected))
    """)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # main: killed by SIGSEGV sizing the out
    assert "refused: preprocess::tile_crop.out: etops cannot infer the out shapes" in proc.stdout
    assert "pass the outs" in proc.stdout and "equal: True" in proc.stdout
