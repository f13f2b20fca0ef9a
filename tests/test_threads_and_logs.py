"""Kernels called from many threads (the GIL is released inside big kernels), the
ExecuTorch log routing, and the abort notice."""

import logging
import subprocess
import sys
import threading

import torch

import etops


def test_eight_threads_get_correct_results():
    op = etops.registry().aten.add.out
    errors = []

    def work(seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        a = torch.randn(256, 256, generator=g)  # big enough that the GIL is released
        b = torch.randn(256, 256, generator=g)
        out = torch.empty(256, 256)
        for _ in range(50):
            op(a, b, alpha=seed, out=out)
            if not torch.allclose(out, torch.add(a, b, alpha=seed), rtol=1e-5, atol=1e-5):
                errors.append(seed)
                return
        small = torch.full((3,), float(seed))
        for _ in range(200):  # small calls keep the GIL
            if not torch.equal(op(small, small), small * 2):
                errors.append(-seed)
                return

    threads = [threading.Thread(target=work, args=(i + 1,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_kernel_failure_log_goes_into_the_error_not_stderr(capfd):
    reg = etops.registry()
    try:
        reg.aten.cat.out([torch.ones(2, 3, dtype=torch.uint16), torch.ones(3, 3, dtype=torch.uint16)], 0, out=torch.empty(5, 3, dtype=torch.uint16))
    except etops.KernelError as exc:
        assert exc.op == "aten::cat.out"
        assert exc.error_name == "InvalidArgument"
        assert "Unhandled dtype UInt16" in exc.log
    else:
        raise AssertionError("cat of uint16 tensors must fail in ExecuTorch")
    assert "Unhandled dtype UInt16" not in capfd.readouterr().err


def test_messages_outside_calls_go_to_logging(caplog):
    from etops import _logs

    with caplog.at_level(logging.DEBUG, logger="etops.executorch"):
        _logs.flush("aten::add.out", "a message the kernel logged")
    assert any("a message the kernel logged" in r.getMessage() for r in caplog.records)


def test_abort_names_the_situation():
    code = (
        "import ctypes, etops\n"
        "lib = etops._native.LIBRARIES['libexecutorch.so']\n"
        "getattr(lib, '_ZN10executorch7runtime9pal_abortEv')()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "etops: ExecuTorch aborted the process" in proc.stderr
