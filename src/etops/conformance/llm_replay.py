"""Record and replay of the kernel calls upstream's LLM Python tests make through
``llm_upstream.routed``: on the base's run, every routed call (its inputs, what it
gave back) is recorded (``Recorder``, written to a folder: ``save`` / ``load``); on an
edit, the calls are first replayed on the edit's kernels (``replay``), and when
every one gives back exactly what it gave the base, the tests' statuses are the
base's.

Why that stands for running the tests (the determinism argument): a test sees a
routed kernel only through its calls, and a call is observable only through what it
gives back (the returned value, the bytes of every tensor argument's storage after
it: what the kernel wrote, and the exception it raised, type and text). A test's
run is the test's code (fixed: the same files, the same torch) interleaved with those
calls. Replaying call i on the edit, on the inputs the base's run passed, with the
same thread count, and getting bitwise what the base's call gave back, means that
the edit's run, up to call i, makes the same call i (its inputs were computed by the
same code from the same earlier results), and so on by induction to the end: the
edit's run makes the same calls, gets the same results and ends with the same
statuses. Random draws are no exception: the replay uses the inputs the base's run
drew (an unseeded test is judged as if it drew the same). What breaks it, and the
rule for each:

- a kernel whose results are not a function of its inputs (threads racing, memory
  it reads uninitialized): the base's recording is replayed on the base right after
  it is made (``replay`` again, the "second run"); a call the base does not repeat
  bitwise makes the recording not replayable (``Recording.replayable`` False, why):
  the edit then always runs the real tests;
- the thread count: recorded per call (ExecuTorch's threadpool, which the tests
  reset) and set again before the call is replayed;
- a kernel reached other than through the routed torch ops (a program run by
  ExecuTorch's runtime): not seen by the recorder, so a test file importing the
  runtime or the program loaders (``reaches_kernels_unrouted``) is never replayed;
- what a kernel writes outside its arguments' storages (a memory error) is not
  observable here: the judge's guarded cases and the C++ tests catch those;
- a recording larger than its limit (``limit_bytes``): not replayable (real tests).

Any difference (an output, a written argument, an exception, a call that fails to
build its inputs) stops the replay at that call: the caller runs the real tests,
whose statuses are then the verdict. Imports torch, numpy, the standard library and
learned_store (its size limit from the environment).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
from pathlib import Path

import numpy as np
import torch

from ..learned_store import megabytes_from_env

#: storages are written in blocks of this many bytes; all-zero blocks are not written
BLOCK = 1 << 20
#: a recording's data may take this many MB unless ETOPS_REPLAY_LIMIT_MB says (0: never record)
DEFAULT_LIMIT_MB = 2048
#: the modules through which a test may reach kernels without the routed torch ops
UNROUTED_MODULES = ("executorch.runtime", "executorch.extension.pybindings")
#: what the tests may import from those (the threadpool's controls: no kernel call)
UNROUTED_ALLOWED = frozenset({"_unsafe_reset_threadpool", "_threadpool_get_thread_count"})


def limit_bytes() -> int:
    """The limit of one recording's data: ETOPS_REPLAY_LIMIT_MB (a non-negative number) or DEFAULT_LIMIT_MB."""
    return megabytes_from_env("ETOPS_REPLAY_LIMIT_MB", DEFAULT_LIMIT_MB)


@dataclasses.dataclass(frozen=True)
class TensorArg:
    """A tensor argument: a view of storage `slot` of its call."""

    slot: int
    dtype: str
    size: tuple
    stride: tuple
    offset: int


@dataclasses.dataclass
class Call:
    """One routed call: the kernel, "functional" or "out", its arguments (TensorArg in
    place of tensors), its storages before it (``("data", nbytes, offset, blocks)``:
    written in the data file, ``blocks`` the indices of the non-zero BLOCKs, None for
    all; ``("after", call, slot)``: bitwise the state that call's slot was left in),
    the thread count, the test making it and its outcome (``outcome_of``)."""

    kernel: str
    variant: str
    args: tuple
    kwargs: dict
    storages: list
    threads: int | None
    test: str
    outcome: tuple = ()


@dataclasses.dataclass
class Recording:
    """The calls of one run of the tests, in order; ``replayable`` False (and ``why``)
    when a replay cannot stand for the tests."""

    calls: list
    replayable: bool = True
    why: str = ""


@dataclasses.dataclass
class Replayed:
    """What a replay found: ``equal`` (every call gave back what it gave the base),
    the calls replayed and, when not equal, the first differing call and why."""

    equal: bool
    calls: int
    first_difference: str = ""
    seconds: float = 0.0


def _bytes(storage) -> np.ndarray:
    """A storage's bytes as a uint8 array (no copy)."""
    n = storage.nbytes()
    if n == 0:
        return np.zeros(0, np.uint8)
    return torch.empty(0, dtype=torch.uint8).set_(storage, 0, (n,), (1,)).numpy()


def _digest(storage) -> bytes:
    return hashlib.sha256(_bytes(storage).data).digest()


def _threads() -> int | None:
    """ExecuTorch's threadpool size, from the pybindings' extension module (what
    portable_lib re-exports, without its import of executorch.exir: seconds in every
    forked run); None without the pybindings."""
    try:
        from executorch.extension.pybindings._C import _threadpool_get_thread_count

        return int(_threadpool_get_thread_count())
    except Exception:  # noqa: BLE001 - no pybindings: no threadpool to record
        return None


def _set_threads(count: int | None) -> None:
    if count is None or count == _threads():
        return
    from executorch.extension.pybindings._C import _unsafe_reset_threadpool

    _unsafe_reset_threadpool(count)


def _map(value, tensor):
    """`value` with each tensor (in lists and tuples too) replaced by tensor(t)."""
    if isinstance(value, torch.Tensor):
        return tensor(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map(v, tensor) for v in value)
    return value


def _tensors(value) -> list:
    found: list = []

    def keep(t):
        found.append(t)
        return t

    _map(value, keep)
    return found


def _returned(value, storages: list):
    """What a call gave back, as a comparable value: a tensor by its dtype, sizes,
    strides, offset and the argument storage it shares (its slot) or its own bytes' digest."""
    def tensor(t):
        st = t.untyped_storage()
        slot = next((i for i, s in enumerate(storages) if s.data_ptr() == st.data_ptr() and st.nbytes()), None)
        return ("tensor", str(t.dtype), tuple(t.shape), tuple(t.stride()), t.storage_offset(), slot,
                None if slot is not None else _digest(st))

    return _map(value, tensor)


def outcome_of(storages: list, returned=None, raised: BaseException | None = None) -> tuple:
    """A call's outcome: ("returned", digests of its argument storages after it, _returned)
    or ("raised", type, text, digests)."""
    after = tuple(_digest(s) for s in storages)
    if raised is not None:
        return ("raised", f"{type(raised).__module__}.{type(raised).__qualname__}", str(raised), after)
    return ("returned", after, _returned(returned, storages))


class Recorder:
    """Records the routed calls of a run, for `folder`: ``call(kernel, variant, fn,
    args, kwargs)`` is what a routed torch op runs, `fn(*args, **kwargs)` recorded;
    the data goes to a folder of this process (``working``), which ``publish`` renames
    to `folder` whole (a reader never sees half a recording; of two processes
    recording the same, the first to publish stays). Past `limit` bytes of data it
    records no more: the recording is not replayable."""

    def __init__(self, folder, limit: int | None = None):
        self.folder = Path(folder)
        self.working = self.folder.with_name(f"{self.folder.name}.{os.getpid()}.tmp")
        self.working.mkdir(parents=True, exist_ok=True)
        self.limit = limit_bytes() if limit is None else limit
        self.recording = Recording([])
        self.test = ""
        self._data = open(self.working / "data.bin", "wb")
        self._written = 0
        self._after: dict = {}  # digest of a storage's state after a call -> (call, slot)
        self._seen: set = set()  # (address, size) of the storages earlier calls had

    def _state(self, storage) -> tuple:
        if (storage.data_ptr(), storage.nbytes()) in self._seen:  # a storage an earlier call had: maybe its state after
            known = self._after.get(_digest(storage))
            if known is not None:
                return ("after", *known)
        data = _bytes(storage)
        n = len(data)
        whole = (n // BLOCK) * BLOCK
        nonzero = np.flatnonzero(data[:whole].reshape(-1, BLOCK).any(axis=1)) if whole else np.zeros(0, np.int64)
        blocks = [int(b) for b in nonzero] + ([whole // BLOCK] if n > whole else [])
        offset = self._written
        everything = len(blocks) == -(-n // BLOCK)
        if everything:
            self._data.write(data.data)
            self._written += n
        else:
            for b in blocks:
                chunk = data[b * BLOCK:(b + 1) * BLOCK]
                self._data.write(chunk.data)
                self._written += len(chunk)
        return ("data", n, offset, None if everything else blocks)

    def call(self, kernel: str, variant: str, fn, args: tuple, kwargs: dict):
        if not self.recording.replayable:
            return fn(*args, **kwargs)
        storages: list = []

        def slot_of(t):
            st = t.untyped_storage()
            for i, s in enumerate(storages):
                if s.data_ptr() == st.data_ptr() and s.nbytes() == st.nbytes():
                    return i
            storages.append(st)
            return len(storages) - 1

        def arg(t):
            return TensorArg(slot_of(t), str(t.dtype).removeprefix("torch."), tuple(t.shape), tuple(t.stride()),
                             t.storage_offset())

        call = Call(kernel, variant, _map(tuple(args), arg), {k: _map(v, arg) for k, v in kwargs.items()}, [],
                    _threads(), self.test)
        call.storages = [self._state(s) for s in storages]
        self._seen.update((s.data_ptr(), s.nbytes()) for s in storages)
        if self._written > self.limit:
            self.recording.replayable = False
            self.recording.why = f"its inputs take more than {self.limit >> 20} MB (ETOPS_REPLAY_LIMIT_MB)"
            return fn(*args, **kwargs)
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:
            call.outcome = outcome_of(storages, raised=exc)
            self._recorded(call)
            raise
        call.outcome = outcome_of(storages, value)
        self._recorded(call)
        return value

    def _recorded(self, call: Call) -> None:
        index = len(self.recording.calls)
        self.recording.calls.append(call)
        for slot, digest in enumerate(call.outcome[1] if call.outcome[0] == "returned" else call.outcome[3]):
            self._after[digest] = (index, slot)

    def finish(self) -> Recording:
        """The recording, its data file closed (replayable from ``working`` now)."""
        self._data.close()
        return self.recording

    def publish(self) -> None:
        """Writes the recording next to its data and renames the folder to ``folder``."""
        import shutil

        self._data.close()
        (self.working / "calls.pkl").write_bytes(pickle.dumps(self.recording, protocol=pickle.HIGHEST_PROTOCOL))
        try:
            os.replace(self.working, self.folder)
        except OSError:  # another process published it first
            shutil.rmtree(self.working, ignore_errors=True)

    def discard(self) -> None:
        """Removes what was written (a run that did not end)."""
        import shutil

        self._data.close()
        shutil.rmtree(self.working, ignore_errors=True)


def load(folder) -> Recording | None:
    """The recording saved in `folder`, or None (none there, or unreadable)."""
    try:
        recording = pickle.loads((Path(folder) / "calls.pkl").read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError):
        return None
    return recording if isinstance(recording, Recording) else None


def _storage(state: tuple, data, kept: dict, again: bool):
    """A storage holding a recorded state (`data`: the data file, memory-mapped): a
    fresh one, or the replay's own storage left in that state by an earlier call (a
    copy when `again`: a later call reads that state too, and this call may write it)."""
    if state[0] == "after":
        kept_storage = kept[(state[1], state[2])]
        return kept_storage.clone() if again else kept_storage
    _, n, offset, blocks = state
    out = torch.zeros(n, dtype=torch.uint8)
    view = out.numpy()
    if blocks is None:
        view[:] = data[offset:offset + n]
    else:
        for b in blocks:
            size = min(BLOCK, n - b * BLOCK)
            view[b * BLOCK:b * BLOCK + size] = data[offset:offset + size]
            offset += size
    return out.untyped_storage()


def _later_uses(recording: Recording) -> dict:
    """(call, slot) -> the last call reading that state again."""
    last: dict = {}
    for i, call in enumerate(recording.calls):
        for state in call.storages:
            if state[0] == "after":
                last[(state[1], state[2])] = i
    return last


def replay(recording: Recording, folder, call_kernel) -> Replayed:
    """Replays `recording` (saved in `folder`) through `call_kernel(kernel, variant,
    args, kwargs)`: each call on fresh storages holding the recorded states, at its
    thread count, in order; stops at the first call whose outcome differs."""
    import time

    start = time.perf_counter()
    path = Path(folder) / "data.bin"
    data = np.memmap(path, dtype=np.uint8, mode="r") if path.exists() and path.stat().st_size else np.zeros(0, np.uint8)
    last, kept = _later_uses(recording), {}  # type: dict, dict
    for i, call in enumerate(recording.calls):
        where = f"call {i + 1} of {len(recording.calls)} ({call.kernel}, {call.test or 'outside a test'})"
        try:
            storages = [_storage(s, data, kept, s[0] == "after" and last.get((s[1], s[2]), -1) > i) for s in call.storages]
        except (KeyError, ValueError, IndexError) as exc:
            return Replayed(False, i, f"{where}: its inputs cannot be rebuilt ({exc})", time.perf_counter() - start)

        def tensor(a, storages=storages):
            return torch.empty(0, dtype=getattr(torch, a.dtype)).set_(storages[a.slot], a.offset, a.size, a.stride)

        def rebuilt(value):
            if isinstance(value, TensorArg):
                return tensor(value)
            if isinstance(value, (list, tuple)):
                return type(value)(rebuilt(v) for v in value)
            return value

        args, kwargs = rebuilt(call.args), {k: rebuilt(v) for k, v in call.kwargs.items()}
        _set_threads(call.threads)
        try:
            outcome = outcome_of(storages, call_kernel(call.kernel, call.variant, args, kwargs))
        except Exception as exc:  # noqa: BLE001 - the call's exception is part of its outcome
            outcome = outcome_of(storages, raised=exc)
        if outcome != call.outcome:
            return Replayed(False, i, f"{where}: {_difference(call.outcome, outcome)}", time.perf_counter() - start)
        for slot, st in enumerate(storages):
            if last.get((i, slot), -1) > i:
                kept[(i, slot)] = st
        for key in [k for k, until in last.items() if until == i and k in kept]:
            del kept[key]
    return Replayed(True, len(recording.calls), "", time.perf_counter() - start)


def _difference(recorded: tuple, now: tuple) -> str:
    """Which part of a call's outcome differs, in words."""
    if recorded[0] != now[0]:
        return f"the base's call {recorded[0]}, the replay's {now[0]}"
    if recorded[0] == "raised":
        return "another exception than the base's" if recorded[1:3] != now[1:3] else "other argument bytes after it"
    if recorded[1] != now[1]:
        slots = [i for i, (a, b) in enumerate(zip(recorded[1], now[1])) if a != b]
        return f"argument storage {', '.join(map(str, slots))} left with other bytes"
    return "another returned value"


def reaches_kernels_unrouted(source: str) -> bool:
    """Whether a test's Python `source` imports a way to run kernels other than the
    routed torch ops (ExecuTorch's runtime, the program loaders of the pybindings:
    UNROUTED_MODULES, beyond the threadpool's controls), read from its syntax tree."""
    import ast

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            if any(a.name.startswith(UNROUTED_MODULES) for a in node.names):
                return True
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(UNROUTED_MODULES):
            if any(a.name not in UNROUTED_ALLOWED for a in node.names):
                return True
    return False
