"""C++ literals of etops report upstream's tests: every value written is the value
(hexadecimal where a decimal would round), extremes included."""

from __future__ import annotations

import math
import struct

import pytest
import torch

from etops.upstream import literals

DOUBLES = [0.0, -0.0, 1.0, 0.5, -2.5, 1e8, 0.1, 0.42, 1 / 3, 1e300, -1e-300, 5e-324, 2.2250738585072014e-308,
           1.7976931348623157e308, -1.7976931348623157e308, 2.0 ** -1074 * 3, 123456789.125]


@pytest.mark.parametrize("value", DOUBLES)
def test_double_literals_round_trip_exactly(value):
    text = literals.float_literal(value)
    back = literals.parse_float(text)
    assert struct.pack("<d", back) == struct.pack("<d", value), (value, text)


def test_a_decimal_is_kept_only_where_it_is_the_value():
    assert literals.float_literal(1.5) == "1.5"
    assert literals.float_literal(1e8) == "100000000.0"
    assert literals.float_literal(-0.0) == "-0.0"
    assert literals.float_literal(0.1) == "0x1.999999999999ap-4"  # 0.1 would be rounded
    assert literals.float_literal(5e-324) == "0x0.0000000000001p-1022"
    assert literals.float_literal(2.0 ** -60) == "0x1p-60"  # trailing zeros of the fraction left out
    assert literals.float_literal(0.1, "float") != literals.float_literal(float(torch.tensor(0.1).item()), "float")
    assert literals.float_literal(float(torch.tensor(0.1).item()), "float") == "0x1.99999ap-4f"


def test_non_finite_values_use_numeric_limits():
    assert literals.float_literal(math.inf) == "std::numeric_limits<double>::infinity()"
    assert literals.float_literal(-math.inf, "float") == "-std::numeric_limits<float>::infinity()"
    assert literals.float_literal(math.nan) == "std::numeric_limits<double>::quiet_NaN()"
    assert math.isnan(literals.parse_float(literals.float_literal(math.nan)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_narrow_float_elements_round_trip(dtype):
    info = torch.finfo(dtype)
    t = torch.tensor([0.1, -0.0, info.max, -info.max, info.tiny, info.smallest_normal / 4, 3.14159, 65504.0 if dtype == torch.float16 else 1e30],
                     dtype=dtype)
    texts = literals.elements(t)
    assert all(x.endswith("f") or "numeric_limits<float>" in x for x in texts), texts
    back = torch.tensor([literals.parse_float(x) for x in texts], dtype=torch.float64).to(dtype)
    assert torch.equal(back.view(torch.int16 if t.element_size() == 2 else torch.int32),
                       t.view(torch.int16 if t.element_size() == 2 else torch.int32))


def test_integer_and_bool_elements():
    assert literals.elements(torch.tensor([-(1 << 63), (1 << 63) - 1, 0])) == [
        "std::numeric_limits<int64_t>::min()", "9223372036854775807", "0"]
    assert literals.elements(torch.tensor([255, 0], dtype=torch.uint8)) == ["255", "0"]
    assert literals.elements(torch.tensor([True, False])) == ["true", "false"]
    assert literals.elements(torch.tensor([[1.5, 2.0], [3.0, 4.0]]).t()) == ["1.5f", "3.0f", "2.0f", "4.0f"]  # logical order


def test_dtypes_without_a_literal_are_named():
    assert literals.scalar_type(torch.float64) == "ScalarType::Double"
    with pytest.raises(literals.NotWritable, match="complex32"):
        literals.elements(torch.tensor([1j], dtype=torch.complex32))


def test_complex_elements_are_written_by_parts():
    assert literals.elements(torch.tensor([1.5 - 0.1j], dtype=torch.complex128)) == [
        "executorch::aten::complex<double>(1.5, -0x1.999999999999ap-4)"]
    assert literals.elements(torch.tensor([complex(float("inf"), 2)], dtype=torch.complex64)) == [
        "executorch::aten::complex<float>(std::numeric_limits<float>::infinity(), 2.0f)"]
