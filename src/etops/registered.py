"""What ExecuTorch's registry holds for one operator: its registered kernels
(kernel key, decoded key, library, address), where each comes from (KernelOrigin),
and ExecuTorch's rule for selecting one (``select_kernel``). Core module: imports
the C extension and the standard library only."""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import NamedTuple

from . import _native, dtypes


@dataclass(frozen=True)
class RegisteredKernel:
    """One entry of ExecuTorch's registry for an operator."""

    key: str | None  #: ExecuTorch's kernel key string; None for the fallback kernel
    tensors: tuple[tuple[str, tuple[int, ...]], ...] | None  #: (dtype, dim order) per tensor argument
    library: str  #: the shared library whose code this kernel is
    address: int

    def describe(self) -> str:
        if self.tensors is None:
            return "fallback"
        return ", ".join(f"{dtype} dim_order={list(order)}" for dtype, order in self.tensors)


def decode_key(key: str | None):
    """'v1/6;0,1|4;0' -> (('float32', (0, 1)), ('int64', (0,))); None for a fallback."""
    if key is None:
        return None
    _, _, body = key.partition("/")
    tensors = []
    for part in filter(None, body.split("|")):
        dtype, _, order = part.partition(";")
        tensors.append((dtypes.dtype_name(int(dtype)), tuple(int(d) for d in order.split(",") if d != "")))
    return tuple(tensors)


@dataclass
class KernelOrigin:
    """Where one registered kernel of an operator comes from."""

    key: str | None
    kind: str  #: 'built-in', 'library', 'custom', 'python', 'pointer', 'symbol'
    library: str
    source_hash: str | None = None
    build_dir: str | None = None
    overridden: bool = False  #: an etops.override is installed on this entry
    overrides: tuple = ()  #: kinds of the overrides applied, oldest first

    def describe(self) -> str:
        text = f"{self.key or 'fallback'}: {self.kind}"
        if self.source_hash:
            text += f" (source {self.source_hash[:12]}, built in {self.build_dir})"
        elif self.library:
            text += f" ({self.library})"
        if self.overridden:
            text += f", overridden by {' then '.join(self.overrides)}"
        return text


def builtin_origins(name: str) -> list[KernelOrigin]:
    """The origins of `name`'s kernels when no extension registered any: built-in
    (the executorch wheel's libraries) or from another library."""
    et_dir = os.path.dirname(_native.executorch_lib_dir())
    out = []
    for n, key, address in _native.registered_kernels():
        if n == name:
            library = library_of(address)
            out.append(KernelOrigin(key, "built-in" if library.startswith(et_dir) else "library", library))
    return out


class Selection(NamedTuple):
    """Which kernel ExecuTorch's selection picks for a kernel key: ``how`` is
    "exact" (a kernel registered for exactly that key), "fallback" (the kernel
    registered without a key) or "missing" (neither: the call cannot run)."""

    how: str
    kernel: "RegisteredKernel | None"


def select_kernel(registered: list[RegisteredKernel], key: str) -> Selection:
    """ExecuTorch's rule (``get_op_function_from_registry``): the kernel registered
    for exactly `key`, else the fallback kernel, else none."""
    for k in registered:
        if k.key == key:
            return Selection("exact", k)
    for k in registered:
        if k.key is None:
            return Selection("fallback", k)
    return Selection("missing", None)


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


_libdl = ctypes.CDLL(None)
_libdl.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]


def library_of(address: int) -> str:
    """Path of the shared library that holds the code at `address`."""
    info = _DlInfo()
    if _libdl.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) and info.dli_fname:
        return info.dli_fname.decode()
    return "<unknown>"
