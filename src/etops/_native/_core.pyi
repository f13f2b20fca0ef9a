"""Type stub of etops' C extension ``etops._native._core`` (module.c, kernel_type.c,
custom.c, delegate.c, guard_signals.c, call_failure.c): what each function takes and returns."""

from collections.abc import Callable, Sequence
from typing import Any, Literal

MAX_DIM: int
MAX_ARGS: int
REG_CAPACITY: int
REG_FREE_NAME: str
POOL_ITEMS_SKIPPED: int  #: 1 where a fault in a threadpool item abandons the item only (x86-64)
FAILURE_KINDS: tuple[str, ...]  #: every CallFailure.kind, in the bridge's order

#: (ExecuTorch ScalarType code, dim order) of one tensor, as a kernel key lists it.
_TensorMeta = tuple[int, Sequence[int]]

class Kernel:
    """One operator (or delegate) as a callable: binds, converts and calls in C."""

    def __new__(
        cls,
        name: str,
        plan: Any,
        returns: Any,
        info: Any,
        slow_path: SlowPathTable,
        precheck: bool = ...,
        delegate: Any = ...,
        specs: Any = ...,
        validate: bool = ...,
        contiguous_only: bool = ...,
        warn_layout: Any = ...,
        index_ranges: tuple[tuple[int, int, int, int], ...] = ...,
    ) -> Kernel: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __getattr__(self, name: str) -> Any: ...  # everything else is its info's (KernelInfo, DelegateInfo)
    @property
    def name(self) -> str: ...
    @property
    def _info(self) -> Any: ...
    def _registry_state(self) -> tuple[int, bool, bool]: ...
    def _memo_state(self) -> int: ...
    def _memo_hits(self) -> int: ...

#: The SlowPathTable's entries (kernel_internal.h's SlowEntry), in C's order.
SLOW_PATH_ENTRIES: tuple[str, ...]

class SlowPathTable:
    """The slow path's hand-offs as the C call sees them (kernel_slow.c): one callable
    per entry, all required, keyword-only; each replaceable by assignment (callable)."""

    def __init__(
        self,
        *,
        allocate_and_call: Callable[..., Any],
        outs_to_remember: Callable[..., Any],
        precheck: Callable[..., Handled | None],
        validate: Callable[..., Handled | bool],
        explain_mismatch: Callable[..., None],
        footprint_refused: Callable[..., None],
        failed: Callable[..., Any],
        no_kernel: Callable[..., None],
        resized: Callable[..., None],
        guarded: Callable[..., Any],
        outs_allocated: Callable[..., bool],
        overlaps: Callable[..., Any],
        snapshot: Callable[[Any], Any],
    ) -> None: ...
    def __getattr__(self, name: str) -> Callable[..., Any]: ...
    def __setattr__(self, name: str, value: Callable[..., Any]) -> None: ...

class Handled:
    """A slow-path check made the call itself: `result` is what the call returns."""

    def __init__(self, result: Any) -> None: ...
    @property
    def result(self) -> Any: ...

class Fault(tuple[Any, ...]):
    """A synchronous fault trapped inside a kernel on the calling thread."""

    signal: int
    code: int  #: si_code
    address: int
    pc: int
    is_write: int  #: 1 write, 0 read, -1 unknown
    argument: str | None  #: the tensor argument whose guard page (a probe's) stopped it
    where: str | None
    offset: int | None
    site: str  #: "libc", "loader", "allocator": the process is tainted; "" the kernel's code
    outs_untouched: bool  #: the kernel wrote etops' copies of the outs (a probe)
    stack_overflow: bool  #: the address is the end of the thread's stack

class CallFailure(tuple[Any, ...]):
    """A failed kernel or backend call, as the bridge saw it (etops_bridge.h's etb_failure)."""

    kind: Literal["error", "resize_refused", "aborted", "exception", "crashed", "refused"]
    code: int  #: ExecuTorch Error code, or 0x1000 aborted, 0x1001 C++ exception, 0x1002 crashed
    name: str  #: its name: "InvalidArgument", ..., "Aborted", "CxxException", "Crashed"
    message: str  #: what the call logged, a line a message
    file: str  #: source file of the last error or fatal message logged, or ""
    line: int
    kernel: str
    fault: Fault | None  #: kind "crashed" only

class Delegate:
    """A backend handle initialised on a lowered module's processed blob."""

    @property
    def stale(self) -> bool: ...

def configure(
    tensor_type: type,
    densify: Callable[[Any], Any],
    copy_back: Callable[[Any, Any], None],
    flush_logs: Callable[[], None],
    empty_strided: Callable[..., Any] | None = None,
) -> None: ...
def set_layout_preserve(flag: bool) -> bool: ...
def registered_kernels() -> list[tuple[str, str | None, int]]: ...
def lookup(name: str, metas: Sequence[_TensorMeta], /) -> tuple[int, int]: ...
def make_key(metas: Sequence[_TensorMeta], /) -> str: ...
def tensor_meta(obj: object, op: str = ..., argument: str = ..., writable: bool = ..., /) -> tuple[int, tuple[int, ...], bool]: ...
def registry_generation() -> int: ...
def error_name(code: int, /) -> str: ...
def install_pal() -> bool: ...
def trap_faults() -> None: ...
def taint_state() -> tuple[str, str, int] | None: ...
def fault_site(pc: int, /) -> str: ...
def clear_taint() -> None: ...
def kernel_faulted(kernel: Kernel, /) -> bool: ...
def unarmed_dispatch(address: int, /) -> int: ...
def calibrate_grad_probe(plain: list[Any], grad: list[Any]) -> bool: ...
def calibrate_tensor_fields(samples: dict[str, Any]) -> bool: ...
def drain_logs() -> list[tuple[str, str, str, int, str]]: ...  # (level letter D/I/E/F, file, function, line, message)
def guard_signals(fd: int, /) -> None: ...
def trap_guarded_here(fd: int, /) -> None: ...
def a64_is_write(word: int, /) -> int: ...
def aarch64_direction(records: bytes, word: int, /) -> int: ...

# Registry edits (custom.c): status codes instead of aborts.
def reg_touch() -> None: ...
def reg_find(name: str, key: str | None, /) -> int: ...
def reg_add(name: str, key: str | None, fn: int, /) -> tuple[int, int]: ...
def reg_swap(index: int, expected: int, fn: int, /) -> int: ...
def reg_free(index: int, expected: int, /) -> int: ...
def reg_free_count() -> int: ...
def reg_missing_fn() -> int: ...
def _reg_hide_all() -> None: ...

# Delegates (delegate.c).
def backends() -> list[tuple[str, bool]]: ...
def delegate_init(
    backend: str,
    processed: Any,
    specs: list[tuple[str, Any]],
    named: list[tuple[str, Any, int]],
    method_name: str,
    /,
) -> Delegate | CallFailure: ...
def threadpool_replaced() -> None: ...
def delegate_stats() -> tuple[int, int]: ...
