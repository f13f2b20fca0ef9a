"""benchmarks/compare_platforms.py: two platforms' `etops check --json` compared case
by case; a case failing on one platform only is listed with the other as the one
agreeing with the reference."""

from __future__ import annotations

import importlib.util
import pathlib

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "compare_platforms.py"
_spec = importlib.util.spec_from_file_location("compare_platforms", _PATH)
compare_platforms = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_platforms)


def _report(cases: list[dict], passes: int) -> dict:
    counts = {"pass": passes, "mismatch": len(cases)}
    return {"totals": {"cases": passes + len(cases)}, "seconds": 1.0, "mismatches": cases,
            "kernels": [{"kernel": "aten::gelu.out", "by_dtype": {"float32": {"counts": counts}}}]}


def _case(sample: int, error: float) -> dict:
    return {"kernel": "aten::gelu.out", "dtype": "float32", "opinfo": "nn.functional.gelu", "sample": sample,
            "call": "gelu", "status": "mismatch", "max_abs_error": error, "message": "values differ"}


def test_a_case_failing_on_one_platform_only_is_listed_with_the_other_agreeing():
    text = compare_platforms.compare(_report([_case(3, 0.5)], 9), _report([], 10), ("x86_64", "aarch64"))
    assert "| aten::gelu.out | float32 | nn.functional.gelu #3 | mismatch (max abs error 0.5): values differ | pass | aarch64 |" in text
    assert "| aten::gelu.out | float32 | 10 | 9 | 10 | 10 **differs** |" in text


def test_cases_failing_the_same_way_are_not_differences():
    same = [_case(1, 0.25)]
    text = compare_platforms.compare(_report(same, 9), _report(same, 9), ("x86_64", "aarch64"))
    assert "None: every case passes or fails the same way" in text and "Cases failing the same way on both: 1." in text
