"""C++ literals that denote exactly the values of a torch tensor or a Python
number, as ExecuTorch's gtests write them (complex elements as
``executorch::aten::complex<float>(re, im)``): ``ScalarType::<Name>`` names, numbers
in decimal where the decimal is the value itself (``1.5``, ``-0.0``, ``1e+08``),
hexadecimal floating literals where a decimal would round (``0x1.ae147ae147ae1p-2``
for 0.42, trailing zeros of the fraction left out: ``0x1.99999ap-4f``), the limits of ``<limits>`` for infinities, NaN and the lowest int64.

Every literal parses back to the same value (``parse_float`` is the inverse used
by the tests). Imports torch only.
"""

from __future__ import annotations

import math
from decimal import Decimal

import torch

from ..errors import NotWritable

#: torch dtype -> ExecuTorch's ScalarType enumerator (the TensorFactory template argument)
SCALAR_TYPE = {
    torch.uint8: "Byte", torch.int8: "Char", torch.int16: "Short", torch.int32: "Int", torch.int64: "Long",
    torch.float16: "Half", torch.float32: "Float", torch.float64: "Double", torch.bool: "Bool",
    torch.bfloat16: "BFloat16", torch.uint16: "UInt16", torch.uint32: "UInt32", torch.uint64: "UInt64",
    torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble",
}
#: a complex dtype -> the C++ type of its parts
_COMPLEX_PART = {torch.complex64: "float", torch.complex128: "double"}
#: the C++ type a floating literal of each dtype is written in (half types: float, which holds them exactly)
_FLOAT_CTYPE = {torch.float64: "double", torch.float32: "float", torch.float16: "float", torch.bfloat16: "float"}
_INT_CTYPE = {torch.uint8: "uint8_t", torch.int8: "int8_t", torch.int16: "int16_t", torch.int32: "int32_t",
              torch.int64: "int64_t", torch.uint16: "uint16_t", torch.uint32: "uint32_t", torch.uint64: "uint64_t"}


def scalar_type(dtype: torch.dtype) -> str:
    """``ScalarType::Double`` for torch.float64, and so on; NotWritable for a
    dtype ExecuTorch's TensorFactory has no literal form of here."""
    if dtype not in SCALAR_TYPE:
        raise NotWritable(f"no TensorFactory literal for dtype {str(dtype)[6:]}")
    return f"ScalarType::{SCALAR_TYPE[dtype]}"


def float_literal(value: float, ctype: str = "double") -> str:
    """An exact C++ literal of `value` (a float already representable in `ctype`,
    "double" or "float"): decimal when the shortest decimal equals the value,
    else hexadecimal; ``std::numeric_limits<ctype>`` for inf and NaN."""
    suffix = "f" if ctype == "float" else ""
    if math.isnan(value):
        return f"std::numeric_limits<{ctype}>::quiet_NaN()"
    if math.isinf(value):
        return f"{'-' if value < 0 else ''}std::numeric_limits<{ctype}>::infinity()"
    text = repr(float(value))
    if Decimal(text) == Decimal(float(value)) and len(text) <= 24:
        if "e" not in text and "." not in text:
            text += ".0"
        return text + suffix
    mantissa, _, exponent = float(value).hex().partition("p")
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    return f"{mantissa}p{exponent}{suffix}"


def parse_float(literal: str) -> float:
    """The value a literal of ``float_literal`` denotes (the tests' round trip)."""
    text = literal.strip()
    if "quiet_NaN" in text:
        return math.nan
    if "infinity" in text:
        return -math.inf if text.startswith("-") else math.inf
    if text.endswith("f") and not text.lower().startswith(("0x", "-0x")):
        text = text[:-1]
    elif text.lower().startswith(("0x", "-0x")) and text.endswith("f"):
        text = text[:-1]
    return float.fromhex(text) if "x" in text.lower() else float(text)


def int_literal(value: int, dtype: torch.dtype = torch.int64) -> str:
    """An integer literal of `value` for `dtype` (the lowest int64 as
    ``std::numeric_limits<int64_t>::min()``, which has no literal)."""
    value = int(value)
    if dtype == torch.int64 and value == -(1 << 63):
        return "std::numeric_limits<int64_t>::min()"
    if dtype == torch.uint64 and value >= 1 << 63:
        return f"{value}ULL"
    return str(value)


def number(value, dtype: torch.dtype) -> str:
    """One element of a tensor of `dtype` as a C++ literal."""
    if dtype == torch.bool:
        return "true" if bool(value) else "false"
    if dtype in _FLOAT_CTYPE:
        return float_literal(float(value), _FLOAT_CTYPE[dtype])
    if dtype in _INT_CTYPE:
        return int_literal(int(value), dtype)
    if dtype in _COMPLEX_PART:
        part = _COMPLEX_PART[dtype]
        z = complex(value)
        return f"executorch::aten::complex<{part}>({float_literal(z.real, part)}, {float_literal(z.imag, part)})"
    raise NotWritable(f"no literal for an element of dtype {str(dtype)[6:]}")


def elements(t: torch.Tensor) -> list[str]:
    """The literals of `t`'s elements in row-major order (its logical order,
    whatever its strides)."""
    scalar_type(t.dtype)
    flat = t.detach().contiguous().reshape(-1)
    if t.dtype in (torch.float16, torch.bfloat16):
        flat = flat.to(torch.float32)
    return [number(v, t.dtype) for v in flat.tolist()]


def scalar(value) -> str:
    """A Python number as the literal of an ExecuTorch ``Scalar`` (bool, int64 or
    double) or a plain C++ argument of that type."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return int_literal(value)
    if isinstance(value, float):
        return float_literal(value)
    raise NotWritable(f"no literal for the scalar {value!r} ({type(value).__name__})")
