"""A delegate's handle lives exactly as long as its Python object: the backend's
destroy runs when it is collected (cycles included), a failed init leaves nothing,
compile specs and named data reach the backend, and a .pte run by
executorch.runtime sees the same backend registry."""

from __future__ import annotations

import gc
import os
import resource

import pytest
import torch

from delegate_helpers import LinearRelu, XnnpackLowered, lower_to_test_backend, build_test_backend

import etops


@pytest.fixture(scope="module")
def backend():
    return build_test_backend()


def expected(x):
    bias = torch.tensor([0.5, -0.5]).repeat(x.numel() // 2)
    return x * 2.0 + 0.25 + bias.reshape(x.shape)


def test_compile_specs_and_named_data_reach_the_backend(backend):
    run = etops.delegate.load(lower_to_test_backend(offset=0.25))
    x = torch.randn(2, 3)
    torch.testing.assert_close(run(x), expected(x))


def test_destroy_runs_when_the_object_is_collected(backend):
    lw = lower_to_test_backend()
    inits, destroys = backend.etops_test_backend_inits(), backend.etops_test_backend_destroys()
    run = etops.delegate.load(lw)
    assert backend.etops_test_backend_inits() == inits + 1
    run(torch.randn(2, 3))
    assert backend.etops_test_backend_destroys() == destroys
    del run
    assert backend.etops_test_backend_destroys() == destroys + 1


def test_destroy_runs_for_a_handle_in_a_reference_cycle(backend):
    lw = lower_to_test_backend()
    destroys = backend.etops_test_backend_destroys()
    cycle = [etops.delegate.load(lw)]
    cycle.append(cycle)
    del cycle
    gc.collect()
    assert backend.etops_test_backend_destroys() == destroys + 1


def test_failed_init_leaves_no_handle(backend):
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    lw = lower_to_test_backend()
    rejected = LoweredBackendModule(lw.original_module, lw.backend_id, b"REJECT", lw.compile_specs, lw.named_data_store_output)
    stats = etops._native._core.delegate_stats()
    destroys = backend.etops_test_backend_destroys()
    for _ in range(20):
        with pytest.raises(etops.DelegateError):
            etops.delegate.load(rejected)
    assert etops._native._core.delegate_stats() == stats
    assert backend.etops_test_backend_destroys() == destroys


def test_pte_with_the_test_backend_shares_the_registry(backend):
    from executorch.exir import to_edge
    from executorch.runtime import Runtime

    lw = lower_to_test_backend()

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lowered = lw

        def forward(self, x):
            return self.lowered(x)

    x = torch.randn(2, 3)
    program = to_edge(torch.export.export(Wrapper(), (x,))).to_executorch()
    executes = backend.etops_test_backend_executes()
    (pte_out,) = Runtime.get().load_program(program.buffer).load_method("forward").execute([x])
    assert backend.etops_test_backend_executes() == executes + 1
    assert torch.equal(etops.delegate.load(lw)(x), pte_out)
    torch.testing.assert_close(pte_out, expected(x))


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")


@pytest.mark.skipif(UNDER_ASAN, reason="ASan keeps freed memory in quarantine: RSS says nothing there")
def test_xnnpack_load_and_destroy_cycles_do_not_grow_memory():
    torch.manual_seed(0)
    lowered = XnnpackLowered(LinearRelu(), (torch.randn(4, 16),))
    _, lw, node = lowered.calls[0]
    (x,) = lowered.call_inputs[node.name]
    for _ in range(50):  # warm-up: allocator pools, XNNPACK's caches
        etops.delegate.load(lw)(x)
    before = rss_kib()
    for _ in range(500):
        etops.delegate.load(lw)(x)
    grown = rss_kib() - before
    assert grown < 1024, f"500 XNNPACK init/execute/destroy cycles grew the resident set by {grown} KiB"


def test_eight_threads_calling_one_delegate_run_one_at_a_time(backend):
    """Inputs big enough that the GIL is released around execute: etops runs one
    handle's executes one at a time (as a Method would), each on its own tensors."""
    import threading

    run = etops.delegate.load(lower_to_test_backend(shape=(256, 256)))
    inputs = [torch.randn(256, 256) for _ in range(8)]
    overlaps = backend.etops_test_backend_overlaps()
    failures = []

    def worker(x):
        for _ in range(20):
            if not torch.equal(run(x), expected(x)):
                failures.append(x)

    threads = [threading.Thread(target=worker, args=(x,)) for x in inputs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert backend.etops_test_backend_overlaps() == overlaps


@pytest.fixture
def linear_lowered():
    torch.manual_seed(0)
    lowered = XnnpackLowered(LinearRelu(), (torch.randn(4, 16),))
    _, lw, node = lowered.calls[0]
    return lw, lowered.call_inputs[node.name][0], lowered.pte_outputs[0]


@pytest.fixture
def restore_threads():
    from etops.bench import threads

    n = threads.get_num_threads()
    yield 1 if n != 1 else 2
    threads.set_num_threads(n)


def test_threadpool_resize_makes_a_delegate_load_again(linear_lowered, restore_threads):
    """XNNPACK keeps the pool it was initialised with; etops.set_num_threads frees it."""
    lw, x, pte_out = linear_lowered
    run, cached = etops.delegate.load(lw), etops.delegate.loaded(lw)
    etops.set_num_threads(restore_threads)
    with pytest.raises(etops.DelegateError, match="threadpool was resized since this delegate was initialised"):
        run(x)
    fresh = etops.delegate.loaded(lw)
    assert fresh is not cached and torch.equal(fresh(x), pte_out)
    assert torch.equal(etops.delegate.load(lw)(x), pte_out)


def test_threadpool_replaced_behind_etops_is_refused_by_the_bridge(linear_lowered, restore_threads):
    """A reset etops did not make (executorch's own _unsafe_reset_threadpool)."""
    from etops.bench import threads

    lw, x, _ = linear_lowered
    run = etops.delegate.load(lw)
    _, _, reset = threads._lib()
    assert reset(threads._pool(), restore_threads)
    with pytest.raises(etops.DelegateError, match="InvalidState.*threadpool was resized"):
        run(x)
