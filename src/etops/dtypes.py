"""Numbering shared by torch and ExecuTorch: dtypes, memory formats, layouts, devices.

ExecuTorch numbers ScalarType exactly as c10 does; this module is the one table
that maps torch objects to those numbers and back."""

from __future__ import annotations

import torch

#: torch dtype -> ExecuTorch ScalarType number (only the ones ExecuTorch has).
ET_SCALAR_TYPE: dict[torch.dtype, int] = {
    torch.uint8: 0,
    torch.int8: 1,
    torch.int16: 2,
    torch.int32: 3,
    torch.int64: 4,
    torch.float16: 5,
    torch.float32: 6,
    torch.float64: 7,
    torch.complex32: 8,
    torch.complex64: 9,
    torch.complex128: 10,
    torch.bool: 11,
    torch.qint8: 12,
    torch.quint8: 13,
    torch.qint32: 14,
    torch.bfloat16: 15,
    torch.quint4x2: 16,
    torch.quint2x4: 17,
    torch.bits1x8: 18,
    torch.bits2x4: 19,
    torch.bits4x2: 20,
    torch.bits8: 21,
    torch.bits16: 22,
    torch.float8_e5m2: 23,
    torch.float8_e4m3fn: 24,
    torch.float8_e5m2fnuz: 25,
    torch.float8_e4m3fnuz: 26,
    torch.uint16: 27,
    torch.uint32: 28,
    torch.uint64: 29,
}

#: ExecuTorch ScalarType number -> torch dtype.
TORCH_DTYPE: dict[int, torch.dtype] = {v: k for k, v in ET_SCALAR_TYPE.items()}

#: torch memory format -> ExecuTorch MemoryFormat (ExecuTorch has only these two).
ET_MEMORY_FORMAT: dict[object, int] = {torch.contiguous_format: 0, torch.preserve_format: 1}

#: torch layout -> ExecuTorch Layout.
ET_LAYOUT: dict[object, int] = {torch.strided: 0}

#: device -> ExecuTorch DeviceType (kernels run on CPU only).
ET_DEVICE: dict[object, int] = {torch.device("cpu"): 0, "cpu": 0}


def dtype_name(et_scalar_type: int) -> str:
    """'float32' for 6, and so on; 'ScalarType(N)' for numbers torch does not know."""
    dtype = TORCH_DTYPE.get(et_scalar_type)
    return str(dtype).replace("torch.", "") if dtype is not None else f"ScalarType({et_scalar_type})"
