"""ExecuTorch's threadpool size, through the wheel's libexecutorch_threadpool.so.

The optimized and quantized kernel libraries run their parallel loops on the one
process-wide pool that ``executorch::extension::threadpool::get_threadpool()``
returns (sized to the logical cores at first use). This module calls that
function and the pool's ``get_thread_count()`` / ``_unsafe_reset_threadpool(n)``
through ctypes, the two calls executorch's pybindings expose as
``_threadpool_get_thread_count`` and ``_unsafe_reset_threadpool`` (without
importing executorch.runtime). Resetting replaces the pool: do it while no
kernel runs on another thread. Delegates keep the pool they were initialised with
(XNNPACK does): etops.delegate refuses to run one across a reset (load it again;
``etops.delegate.loaded`` does so by itself).
"""

from __future__ import annotations

import ctypes
import threading

from .. import _native
from ..errors import EtopsError

_LIB = _native.shared_library_name("executorch_threadpool")
_GET_THREADPOOL = "_ZN10executorch9extension10threadpool14get_threadpoolEv"
_GET_COUNT = "_ZNK10executorch9extension10threadpool10ThreadPool16get_thread_countEv"
_RESET = "_ZN10executorch9extension10threadpool10ThreadPool24_unsafe_reset_threadpoolEj"

_lock = threading.Lock()
_functions = None
_default: int | None = None


def _lib():
    global _functions
    if _functions is None:
        lib = _native.LIBRARIES.get(_LIB)
        if lib is None:
            raise EtopsError(f"the executorch wheel has no {_LIB}: its kernels run single-threaded")
        get_pool = getattr(lib, _GET_THREADPOOL)
        get_pool.restype = ctypes.c_void_p
        get_pool.argtypes = []
        count = getattr(lib, _GET_COUNT)
        count.restype = ctypes.c_size_t
        count.argtypes = [ctypes.c_void_p]
        reset = getattr(lib, _RESET)
        reset.restype = ctypes.c_bool
        reset.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
        _functions = (get_pool, count, reset)
    return _functions


def _pool():
    get_pool, _, _ = _lib()
    pool = get_pool()
    if not pool:
        raise EtopsError("ExecuTorch's threadpool could not be created (cpuinfo failed to initialise)")
    return pool


def get_num_threads() -> int:
    """The number of threads of ExecuTorch's threadpool (the kernels' parallel loops)."""
    global _default
    with _lock:
        _, count, _ = _lib()
        value = int(count(_pool()))
        if _default is None:
            _default = value
        return value


def default_num_threads() -> int:
    """The size ExecuTorch gave its pool (the logical cores), before any reset."""
    value = get_num_threads()
    return _default if _default is not None else value


def set_num_threads(n: int) -> int:
    """Resizes ExecuTorch's threadpool to `n` threads (for this process) and returns
    the new size. Not safe while kernels run on other threads."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"set_num_threads() takes an int, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"the threadpool needs at least 1 thread, got {n}")
    get_num_threads()  # records the default first
    with _lock:
        _, count, reset = _lib()
        pool = _pool()
        before = int(count(pool))
        if not reset(pool, n):
            raise EtopsError(f"ExecuTorch refused to resize its threadpool to {n} threads")
        after = int(count(pool))
        if after != before:
            _native._core.threadpool_replaced()  # delegates initialised before now refuse to run
        return after
