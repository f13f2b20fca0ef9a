"""The issue text beside a generated test, as a maintainer reads it: the title, the
kernel and the file and line defining it in the checkout, what the kernel computes
against what the reference gives (and the effective precision where the verdict was
in ulps), the versions, a one-line ``etops`` reproducer, the fix in words where the
cause is known, and the test itself.

Pure text from structured values. May import: torch, etops.upstream (spec, literals).
"""

from __future__ import annotations

import platform

import torch

from .spec import FAILURE, TestSpec

#: the fix, in words, of a verdict's reason ("computes float64 in float32")
_FIX_BY_REASON = ("The accumulator (or intermediate) type is float32 for float64 inputs: compute in the input's "
                  "type (`double` for `ScalarType::Double`), e.g. pick the accumulation type from the input's "
                  "CTYPE rather than a fixed `float`.")
_FIX_BY_SHIPPED = {
    "abort": "The kernel aborts the process (ET_CHECK / an assert) on arguments its schema allows: check them with "
             "`ET_KERNEL_CHECK` and fail the context (`Error::InvalidArgument`) instead, or handle the case.",
    "crash": "The kernel ends the process with a signal on arguments its schema allows: validate them first and "
             "fail the context instead.",
    "refusal": "The kernel fails the context on inputs ATen accepts: handle them (or document the restriction in "
               "the kernel's YAML / supported features).",
}


def title(spec: TestSpec, name: str) -> str:
    op = spec.kernel.split("::", 1)[-1]
    dtype = str(spec.dtype)[6:] if spec.dtype is not None else ""
    if spec.reason:
        return f"{op}: {spec.reason} ({dtype})"
    return {"abort": f"{op} aborts the process on a {dtype} input",
            "crash": f"{op} crashes on a {dtype} input",
            "refusal": f"{op} refuses a {dtype} input that ATen accepts"}.get(
        spec.shipped, f"{op} computes wrong values on a {dtype} input" if spec.category == "wrong"
        else f"{op}: {spec.category} on a {dtype} input")


def _tensor_text(t: torch.Tensor) -> str:
    if t.numel() <= 16:
        values = t.detach().reshape(-1).tolist()
        return f"{list(t.shape)} {str(t.dtype)[6:]} {values}"
    return f"{list(t.shape)} {str(t.dtype)[6:]} (first values {t.detach().reshape(-1)[:8].tolist()})"


def _figures(spec: TestSpec) -> list[str]:
    f = spec.figures
    lines = []
    if f.get("ulps") is not None:
        lines.append(f"- error: {f['ulps']:.3g} ulps of {str(spec.dtype)[6:]} at the output's scale against a "
                     f"{f.get('reference') or spec.reference} reference (ATen: {f.get('aten_ulps') or 0:.3g} ulps); "
                     "the bound of a rounding difference is 16 x ATen's + 1024 ulps")
        if spec.reason and " in " in spec.reason:
            narrow = spec.reason.rsplit(" in ", 1)[1]
            lines.append(f"- effective precision: that of {narrow} (the error is the size of {narrow}'s rounding)")
    if f.get("max_abs_error") is not None:
        lines.append(f"- max abs error {f['max_abs_error']:.3g}, max rel error {f.get('max_rel_error') or 0:.3g}")
    return lines


def issue_text(spec: TestSpec, name: str, test_text: str, *, where: str, test_file: str, versions: dict,
               computed: str | None, reproducer: str, summary: str) -> str:
    """The markdown of one finding's issue."""
    inputs = [f"- `{a.name}`: {_tensor_text(v) if isinstance(v, torch.Tensor) else repr(v)}"
              for a in spec.schema.arguments if a.name not in spec.outs for v in [spec.values.get(a.name)]]
    lines = [f"# {title(spec, name)}", "", f"`{spec.kernel}` — kernel `{where}`; test `{test_file}`.", "",
             summary, "", "## Smallest failing input", "", *inputs, ""]
    if spec.expect == FAILURE:
        lines += ["## Expected", "", f"ATen refuses these arguments; the kernel should fail the context "
                  f"(`ET_EXPECT_KERNEL_FAILURE`), not end the process. It does: **{spec.shipped}**.", ""]
    else:
        expected = [f"- `{o}`: {_tensor_text(spec.values[o])}" + (
            f" (rtol {spec.tolerance[i][0]:.3g}, atol {spec.tolerance[i][1]:.3g})" if spec.tolerance else " (exact)")
            for i, o in enumerate(spec.outs)]
        lines += ["## Computed and expected", "", f"Expected (the {spec.reference} reference), within:", *expected, ""]
        if computed:
            lines += [f"The shipped kernel: {computed}", ""]
        lines += _figures(spec) + ([""] if _figures(spec) else [])
    fix = _FIX_BY_REASON if spec.reason and " in " in spec.reason else _FIX_BY_SHIPPED.get(spec.shipped)
    if fix:
        lines += ["## Fix", "", fix, ""]
    env = ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + f", {platform.system()} {platform.machine()}"
    lines += ["## Versions", "", env, "", "## Reproduce", "", "```console", reproducer, "```", "",
              "## Test (fails now, passes with ATen's kernel)", "", "```cpp", test_text.rstrip(), "```", ""]
    return "\n".join(lines)
