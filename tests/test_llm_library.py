"""Upstream's LLM custom-ops library loaded by etops (etops.llm_library): its
kernels, torch ops and meta kernels, without the imports of torch._inductor and
executorch.exir its module makes (seconds); its two Inductor lowerings registered
once torch._inductor.lowering is imported, as its own import would have left them.
In a fresh interpreter (the library stays loaded for the process)."""

from __future__ import annotations

import json

from fresh_python import run_python


def test_the_library_loads_without_inductor_or_exir_and_its_lowerings_come_with_inductor():
    proc = run_python("""
        import json, sys
        import torch
        import etops
        from etops.llm_library import LIBRARY, load_llm_custom_ops

        load_llm_custom_ops()
        out = {"loaded": {m: m in sys.modules for m in ("torch._inductor", "torch._inductor.lowering", "executorch.exir",
                                                          "executorch.extension.pybindings.portable_lib")}}
        library = sys.modules[LIBRARY]
        value, cache = torch.ones(1, 2, 2, 4), torch.zeros(1, 10, 2, 4)
        out["meta"] = list(torch.ops.llama.update_cache(value.to("meta"), cache.to("meta"), 4).shape)  # the module's meta kernel
        out["kernel"] = etops.registry().get_kernel("llama::update_cache.out").kernels[0].library
        import torch._inductor.lowering as lowering
        alias, cross = torch.ops.executorch.alias.default, torch.ops.executorch.update_cross_attn_cache.default
        registered = lambda op: getattr(lowering.lowerings.get(op), "__wrapped__", None)  # register_lowering's wrapper
        out["lowerings"] = [registered(alias) is library.lowering_custom_alias,
                            registered(cross) is library._update_cross_attn_cache_lowering,
                            library.L is lowering.lowerings, lowering.__loader__ is lowering.__spec__.loader,
                            type(lowering.__loader__).__name__]
        print(json.dumps(out))
    """)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["loaded"] == {"torch._inductor": False, "torch._inductor.lowering": False, "executorch.exir": False,
                             "executorch.extension.pybindings.portable_lib": False}
    assert out["meta"] == [1]
    assert out["kernel"].endswith("/libcustom_ops_aot_lib.so")  # the wheel's kernel, registered by the .so
    assert out["lowerings"] == [True, True, True, True, "SourceFileLoader"]  # the module's own loader again
