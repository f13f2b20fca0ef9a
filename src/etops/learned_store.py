"""What a process learned that the next one may reuse, kept on disk: a value per
key in one file of its own under the cache folder (cache_files.cache_root(),
``learned/``), written whole (a temporary file renamed over the old one).

Every file is keyed by its kind, the caller's key and the environment
(``environment()``: torch's and executorch's versions, etops' version and a hash
of etops' installed sources), so a change of any of them finds no file and the
value is computed again; the full key is written in the file and compared on
reading, with the payload's length and checksum. A file that fails any of that
(stale, corrupt, cut short, not unpickling) is never trusted: it is removed, the
caller computes again, and the reason goes to the ``etops.learned`` logger at
debug level. The folder holds at most ``limit_bytes()`` (``ETOPS_LEARNED_LIMIT_MB``,
default 1024 MB): after each write the files used longest ago (a read counts as a
use) go first.

Values are pickled; torch's operator overloads (which do not pickle) are written by
name and found again in torch.ops, and plain CPU tensors as their storage's raw
bytes and their view (``_Pickler``: torch's own pickling refuses complex32 and reads
each storage back through torch.load, most of a warm ``etops dev``'s reading). Core module: imports the standard library,
torch, etops._native's build info and cache_files only.
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import logging
import os
import pickle
import threading
import zlib
from pathlib import Path
from typing import Any

import torch

from .cache_files import cache_root

#: bumped when the file layout changes
FORMAT = 1
#: the folder's size limit (MB) unless ETOPS_LEARNED_LIMIT_MB sets it
DEFAULT_LIMIT_MB = 1024
_MAGIC = b"etops-learned\n"

logger = logging.getLogger("etops.learned")

_environment: tuple | None = None
_lock = threading.Lock()


def source_hash() -> str:
    """A hash of etops' installed files (its Python modules and the native
    extension), so that a changed etops never reads what another one learned."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file() or path.suffix not in (".py", ".so", ".yaml", ".json"):
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


def environment() -> tuple:
    """(torch version, executorch version, etops version, etops source hash),
    worked out once per process."""
    global _environment
    if _environment is None:
        from . import __version__
        from ._native import build_info

        _environment = (torch.__version__, build_info.EXECUTORCH_VERSION, __version__, source_hash())
    return _environment


def canonical(value) -> Any:
    """`value` as a key whose repr is the same in every process: sets sorted,
    dtypes, overloads and other objects by their text."""
    if isinstance(value, (str, int, float, bool, type(None), bytes)):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return ("set",) + tuple(sorted((canonical(v) for v in value), key=repr))
    if isinstance(value, dict):
        return ("dict",) + tuple(sorted(((canonical(k), canonical(v)) for k, v in value.items()), key=repr))
    return str(value)


def megabytes_from_env(variable: str, default_mb: int) -> int:
    """A size limit in bytes: the environment `variable` (a non-negative number of
    megabytes; ValueError naming it otherwise), or `default_mb` when it is unset."""
    asked = os.environ.get(variable)
    if not asked:
        return default_mb << 20
    try:
        mb = float(asked)
    except ValueError:
        mb = -1.0
    if not mb >= 0:
        raise ValueError(f"{variable} must be a non-negative number of megabytes, got {asked!r}")
    return int(mb * (1 << 20))


def limit_bytes() -> int:
    """The folder's size limit: ETOPS_LEARNED_LIMIT_MB (a non-negative number) or DEFAULT_LIMIT_MB."""
    return megabytes_from_env("ETOPS_LEARNED_LIMIT_MB", DEFAULT_LIMIT_MB)


def log_to_stderr() -> None:
    """The ``etops.learned`` logger's debug messages on stderr (``--debug``)."""
    if not logger.handlers:
        logger.addHandler(logging.StreamHandler())
    logger.setLevel(logging.DEBUG)


def folder() -> Path:
    """Where the files live."""
    return cache_root() / "learned"


def _overload(namespace: str, name: str, overload: str):
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


def _storage(data: bytes) -> torch.UntypedStorage:
    """A CPU storage (resizable, writable) holding the bytes `data`."""
    made = torch.empty(len(data), dtype=torch.uint8)
    if data:
        ctypes.memmove(made.data_ptr(), data, len(data))
    return made.untyped_storage()


def _tensor(storage, dtype, offset: int, size: tuple, stride: tuple, conj: bool, neg: bool) -> torch.Tensor:
    """The tensor of `dtype` viewing `storage` at `offset` with `size` and `stride`,
    with torch's lazy conjugate and negative bits as given (as values.exact_clone keeps them)."""
    out = torch.empty(0, dtype=dtype)
    out.set_(storage, offset, size, stride)
    if conj:
        out = out.conj()
    if neg:
        out = torch._neg_view(out)
    return out


class _StorageBytes:
    """One storage's bytes, written once per file however many tensors view it (the
    pickler's memo keeps one object per storage, so they share one storage again)."""

    def __init__(self, storage) -> None:
        self.storage = storage

    def __reduce__(self):
        n = self.storage.nbytes()
        return _storage, (ctypes.string_at(self.storage.data_ptr(), n) if n else b"",)


def _plain(t: torch.Tensor) -> bool:
    """Whether `t` is a dense CPU tensor of torch.Tensor itself with nothing but its
    storage, view and lazy bits to keep (written as raw bytes; anything else pickles as torch does)."""
    return (type(t) is torch.Tensor and t.layout == torch.strided and t.device.type == "cpu" and not t.requires_grad
            and not t.is_quantized and not t.is_nested and not any(getattr(t, "names", ())) and not t.__dict__)


class _Pickler(pickle.Pickler):
    """Overloads by name; plain tensors as their storage's raw bytes and their view
    (every dtype, complex32 included, which torch's own pickling refuses; and far
    quicker to read than torch's one serialized storage per tensor)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._storages: dict = {}  # (data pointer, bytes) -> its _StorageBytes, for storages with data

    def reducer_override(self, obj):
        if isinstance(obj, torch._ops.OpOverload):
            namespace, _, name = obj._schema.name.partition("::")
            return _overload, (namespace, name, obj._overloadname)
        if isinstance(obj, torch.Tensor) and _plain(obj):
            storage = obj.untyped_storage()
            n = storage.nbytes()
            held = self._storages.setdefault((storage.data_ptr(), n), _StorageBytes(storage)) if n \
                else _StorageBytes(storage)
            return _tensor, (held, obj.dtype, obj.storage_offset(), tuple(obj.size()), tuple(obj.stride()),
                             obj.is_conj(), obj.is_neg())
        return NotImplemented


def _dumps(value) -> bytes:
    out = io.BytesIO()
    _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return out.getvalue()


class Store:
    """The files of one kind of value (``kind``: a word, part of every key and
    file name). ``loaded`` / ``rejected`` / ``saved`` count this process' reads that
    gave a value, files not trusted, and writes."""

    def __init__(self, kind: str) -> None:
        if not kind.replace("-", "").isalnum():
            raise ValueError(f"Store: argument 'kind' must be letters, digits and dashes, got {kind!r}")
        self.kind = kind
        self.loaded = self.rejected = self.saved = 0

    def _full_key(self, key) -> str:
        return repr((FORMAT, self.kind, environment(), canonical(key)))

    def path(self, key) -> Path:
        """The file of `key` (whether or not it exists)."""
        return folder() / f"{self.kind}-{hashlib.sha256(self._full_key(key).encode()).hexdigest()[:32]}.pkl"

    def load(self, key) -> Any:
        """The value saved under `key` in this environment, or None (no file, or
        one not trusted: removed, and said at debug level)."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        why = None
        try:
            value, why = self._verified(data, self._full_key(key))
        except Exception as exc:  # noqa: BLE001 - whatever a damaged pickle raises
            value, why = None, f"does not unpickle ({type(exc).__name__}: {exc})"
        if why is not None:
            self.rejected += 1
            logger.debug("%s: %s; computed again", path, why)
            _remove(path)
            return None
        self.loaded += 1
        try:
            os.utime(path)  # used now: evicted last
        except OSError:
            pass
        return value

    @staticmethod
    def _verified(data: bytes, full_key: str) -> tuple:
        """(the value, None) of a file's bytes, or (None, why it is not trusted)."""
        if not data.startswith(_MAGIC):
            return None, "not an etops learned file"
        at = len(_MAGIC)
        end = data.find(b"\n", at)
        if end < 0:
            return None, "its header is cut short"
        header = data[at:end].split(b" ")
        if len(header) != 3 or not all(h.isdigit() for h in header):
            return None, "its header is damaged"
        key_length, length, checksum = (int(h) for h in header)
        key_bytes = data[end + 1:end + 1 + key_length]
        payload = data[end + 1 + key_length:]
        if key_bytes != full_key.encode():
            return None, "it was written for another key or environment (stale)"
        if len(payload) != length:
            return None, f"its payload has {len(payload)} bytes, not {length} (cut short)"
        if zlib.crc32(payload) != checksum:
            return None, "its payload's checksum differs (corrupt)"
        return pickle.loads(payload), None

    def save(self, key, value) -> bool:
        """Writes `value` under `key` (best effort: a value that does not pickle, a
        full disk or a read-only folder leaves it unwritten, said at debug level),
        then evicts files over the limit; whether it was written."""
        path = self.path(key)
        try:
            payload = _dumps(value)
        except Exception as exc:  # noqa: BLE001 - a value holding something that does not pickle
            logger.debug("%s: not written, the value does not pickle (%s: %s)", path, type(exc).__name__, exc)
            return False
        key_bytes = self._full_key(key).encode()
        head = _MAGIC + f"{len(key_bytes)} {len(payload)} {zlib.crc32(payload)}\n".encode()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            with open(tmp, "wb") as f:
                f.write(head + key_bytes)
                f.write(payload)
            os.replace(tmp, path)
        except OSError as exc:
            logger.debug("%s: not written (%s)", path, exc)
            return False
        self.saved += 1
        evict(limit_bytes())
        return True


def evict(limit: int) -> list[Path]:
    """Removes the files used longest ago until the folder holds at most `limit`
    bytes; the files removed."""
    with _lock:
        entries = []
        try:
            with os.scandir(folder()) as it:
                for e in it:
                    if e.name.endswith(".pkl"):
                        try:
                            st = e.stat()
                        except OSError:
                            continue
                        entries.append((st.st_mtime_ns, e.name, st.st_size))
        except OSError:
            return []
        total = sum(size for _, _, size in entries)
        removed = []
        for _, name, size in sorted(entries):
            if total <= limit:
                break
            path = folder() / name
            if _remove(path):
                logger.debug("%s: evicted (the folder was over %d bytes)", path, limit)
                removed.append(path)
            total -= size
        return removed


def _remove(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except OSError:
        return False


__all__ = ["DEFAULT_LIMIT_MB", "FORMAT", "Store", "canonical", "environment", "evict", "folder", "limit_bytes",
           "log_to_stderr", "source_hash"]
