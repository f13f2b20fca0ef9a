"""Benchmarks of ExecuTorch kernels against ATen, and ExecuTorch's threadpool size.

    import etops
    r = etops.bench("aten::add.out", sizes=["16", "4k", "1M"], dtypes=["float32"])
    print(r)                 # the table; r.rows has every figure
    r.plot("add.png")

    etops.set_num_threads(2)  # ExecuTorch's threadpool
    etops.bench_all(budget=60).markdown()

    # each delegate of a lowered program: the backend vs the same subgraph on
    # ExecuTorch's kernels and on ATen (etops.bench.delegates)
    etops.bench_delegate(edge_program_manager, example_inputs)

Inputs come from PyTorch's OpInfo samples (``etops.bench.inputs``), scaled to the
sizes asked for (``etops.bench.sampling``); ``inputs=`` gives your own. Timing:
``etops.bench.core``; the machine's facts beside a figure: ``etops.bench.host``.
Nothing heavy is imported until a benchmark runs.

May import: the core, etops.edge / etops.delegate (delegate benchmarks) and
etops.checkout (its load, for --load in the workers of ``bench --all``); nothing
imports it but etops.dev (its timing), the CLI and the package's lazy names.
"""

from __future__ import annotations

import os
import platform
import time

from .host import machine
from .sampling import base_sample, parse_dtype, sized  # noqa: F401 - the benchmarks' API too
from .threads import default_num_threads, get_num_threads, set_num_threads

__all__ = ["BenchResult", "DelegateBenchResult", "bench", "bench_all", "bench_delegate", "default_num_threads", "get_num_threads", "machine", "set_num_threads"]


def __getattr__(name):
    if name == "BenchResult":
        from .result import BenchResult

        return BenchResult
    if name == "DelegateBenchResult":
        from .delegates import DelegateBenchResult

        return DelegateBenchResult
    raise AttributeError(name)


def _kernel(name_or_kernel):
    from ..registry import registry

    if isinstance(name_or_kernel, str):
        return registry().get_kernel(name_or_kernel)
    return name_or_kernel


def _user_sample(kernel, inputs, size, dtype):
    from .inputs import Sample

    if callable(inputs):
        got = inputs(size, dtype)
    else:
        got = inputs
    if isinstance(got, tuple) and len(got) == 2 and isinstance(got[1], dict):
        args, kwargs = got
    else:
        args, kwargs = tuple(got) if isinstance(got, (list, tuple)) else (got,), {}
    return Sample(kernel.name, tuple(args), dict(kwargs), "given inputs")


def bench(kernels, sizes=None, dtypes=None, *, inputs=None, repeats: int = 11, warmup: int = 2, target: float = 0.005,
          threads: int | None = None, progress=None):
    """Times ExecuTorch kernels (through etops) against ATen's out variants.

    ``kernels``: a name (``"aten::add.out"``), kernel object, or a list of them.
    ``sizes``: element counts (ints or ``"4k"``, ``"1M"``) of the largest input;
    default: OpInfo's sample as it is. ``dtypes``: default float32 where OpInfo has it.
    ``inputs``: your own ``(args, kwargs)``, or ``f(size, dtype) -> (args, kwargs)``.
    ``repeats`` rounds are kept after ``warmup`` ones; each timed loop lasts about
    ``target`` seconds. ``threads``: torch's intra-op threads and ExecuTorch's pool
    are both set to it for the run (default: one thread each, so that a verdict
    does not flip with the machine's load).
    ``progress(done, total, label)`` is called along the way.

    Returns a BenchResult."""
    from . import core, inputs as _inputs
    from .result import BenchResult

    names = [kernels] if isinstance(kernels, str) or not isinstance(kernels, (list, tuple)) else list(kernels)
    objs = [_kernel(k) for k in names]
    size_list = [None] if not sizes else [s if isinstance(s, int) else _inputs.parse_size(str(s)) for s in sizes]
    dtype_list = [None] if not dtypes else [parse_dtype(d) for d in dtypes]
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be at least 1 and warmup at least 0")
    rows = []
    total = len(objs) * len(size_list) * len(dtype_list)
    done = 0
    with core.thread_counts(threads) as used:
        for kernel in objs:
            if not kernel.callable:
                raise ValueError(f"{kernel.name} cannot be called: {kernel._plan_error}")
            for dtype in dtype_list:
                base = None if inputs is not None else base_sample(kernel, dtype)
                for size in size_list:
                    label = _inputs.format_size(size) if size is not None else None
                    if progress:
                        progress(done, total, f"{kernel.name} {str(dtype or '').replace('torch.', '')} {label or ''}".strip())
                    if inputs is not None:
                        sample = _user_sample(kernel, inputs, size, dtype)
                    elif base is None:
                        sample = None
                        err = f"no OpInfo sample calls {kernel.name}'s functional op" + (f" at {dtype}" if dtype else "") + "; pass inputs="
                    else:
                        sample = sized(kernel, base, size)
                        err = f"no input of {label} elements derived from {base.source} works on both sides"
                    if sample is None:
                        rows.append({"kernel": kernel.name, "dtype": str(dtype).replace("torch.", "") if dtype else "-",
                                     "size": size or 0, "size_label": label or "-", "error": err})
                    else:
                        rows.append(core.run_one(kernel, sample, label, repeats=repeats, warmup=warmup, target=target))
                    done += 1
        if progress:
            progress(done, total, "done")
    return BenchResult(rows, dict(used), machine(), {"repeats": repeats, "warmup": warmup, "target": target})


def bench_all(budget: float = 120.0, size="16k", dtype="float32", *, kernels=None, threads: int | None = None,
              isolate: bool = True, progress=None):
    """Every registered aten kernel (or ``kernels``) against ATen on a representative
    input (OpInfo's first matching sample, scaled to ``size`` elements; ``size=None``
    keeps the sample's own), within about ``budget`` seconds in all. ``isolate``
    runs the kernels in a child process (restarted should a kernel abort it).
    Returns a BenchResult; ``ranked()`` orders it slowest ratio first."""
    from .runall import run_all

    return run_all(budget=budget, size=size, dtype=dtype, kernels=kernels, threads=threads, isolate=isolate, progress=progress)


def bench_delegate(program, inputs=None, *, method: str = "forward", label: str | None = None, partitioner=None,
                   repeats: int = 11, warmup: int = 2, target: float = 0.005, threads: int | None = None, seed: int = 0,
                   progress=None):
    """Every delegate of a lowered program timed three ways, interleaved: the
    delegate (its backend, e.g. XNNPACK, through ``etops.delegate``), the same
    subgraph on ExecuTorch's kernels (``etops.edge``) and on ATen.

    ``program``: an EdgeProgramManager / ExportedProgram with delegate calls and
    ``inputs`` its example inputs (each delegate's inputs are captured by running it
    once on ATen); one LoweredBackendModule with its inputs (or none: random inputs
    from its specs); or an ``nn.Module`` with example inputs, exported and lowered
    with ``partitioner`` (default XnnpackPartitioner). Other options as ``bench``.
    Returns a DelegateBenchResult: one row per delegate call (see
    ``etops.bench.delegates``)."""
    from .delegates import bench_delegate as run

    return run(program, inputs, method=method, label=label, partitioner=partitioner, repeats=repeats, warmup=warmup,
               target=target, threads=threads, seed=seed, progress=progress)
