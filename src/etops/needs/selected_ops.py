"""The selective-build input (``selected_operators.yaml``) for a program, in the
layout ExecuTorch's ``gen_oplist`` writes, with ``et_kernel_metadata`` listing per
operator:

- the kernel key of every call site, built as ExecuTorch's loader builds it (a
  TensorList argument is not part of the key, although gen_oplist puts one entry for
  it in its keys);
- dtype-only entries (``v1/<dtype>;``, the form gen_oplist itself writes for a dtype
  given on its command line) for dtypes a kernel can switch on that no tensor of the
  call has: the dtype of each Scalar argument (Int -> Long, Double -> Double, Bool ->
  Bool) and the dtype mixed-dtype inputs compute in (e.g. int16 for uint8 < int8).
  Without a known schema every Int, Double and Bool argument counts as a Scalar.

``gen_selected_op_variants`` turns the dtypes of these entries into
``selected_op_variants.h``: with the extra entries, dtype-selective builds keep the
scalar and compute dtypes the program uses."""

from __future__ import annotations

import torch

from .. import dtypes
from ..schemas import find_schema

#: the ScalarType of a Scalar argument of each serialized kind (as ExecuTorch reads it)
SCALAR_DTYPE = {"Int": 4, "Double": 7, "Bool": 11}


def _bound(site):
    """[(schema argument, Argument)] of a call site's arguments (its returns, the
    outs again, left out), or None when the schema is unknown or does not fit."""
    schema, _ = find_schema(site.operator)
    if schema is None or len(site.arguments) < len(schema.arguments):
        return None
    return list(zip(schema.arguments, site.arguments))


def _is_scalar(schema_arg, arg) -> bool:
    if arg.kind not in SCALAR_DTYPE:
        return False
    if schema_arg is None:
        return True
    t = schema_arg.real_type
    if t.kind() == "OptionalType":
        t = t.getElementType()
    return t.kind() == "NumberType"  # Scalar


def _compute_dtype(inputs: list[int], scalars: list) -> int | None:
    """ScalarType the inputs of a mixed-dtype call promote to (torch's rule for a
    tensor and a Python scalar), or None when nothing mixes."""
    if len(set(inputs)) < 2 and not (inputs and scalars):
        return None
    common = inputs[0]
    for d in inputs[1:]:
        common = dtypes.ET_SCALAR_TYPE[torch.promote_types(dtypes.TORCH_DTYPE[common], dtypes.TORCH_DTYPE[d])]
    for value in scalars:
        probe = torch.empty((1,), dtype=dtypes.TORCH_DTYPE[common], device="meta")
        common = dtypes.ET_SCALAR_TYPE[torch.result_type(probe, value)]
    return common


def extra_dtypes(site) -> list[int]:
    """ScalarTypes a kernel of `site` may switch on that no tensor of its key has."""
    have = {d for d, _ in site.tensors}
    extra: list[int] = []
    inputs, scalars = [], []
    bound = _bound(site)
    for schema_arg, arg in bound if bound is not None else [(None, a) for a in site.arguments]:
        if _is_scalar(schema_arg, arg):
            extra.append(SCALAR_DTYPE[arg.kind])
            scalars.append(arg.value)
        elif arg.kind == "Tensor" and schema_arg is not None and not schema_arg.is_out:
            inputs.append(arg.dtype)
    if inputs and all(d in dtypes.TORCH_DTYPE for d in inputs):
        try:
            common = _compute_dtype(inputs, scalars)
        except (RuntimeError, TypeError):  # a dtype torch does not promote (quantized, bits)
            common = None
        if common is not None:
            extra.append(common)
    return sorted({d for d in extra if d not in have})


def kernel_metadata(needs) -> dict[str, list[str]]:
    """operator -> its kernel keys and dtype-only entries, sorted."""
    out: dict[str, set[str]] = {}
    for need in needs.kernels:
        entries = out.setdefault(need.site.operator, set())
        entries.add(need.key if need.key is not None else "v1")  # gen_oplist's spelling of a call without tensors
        entries.update(f"v1/{d};" for d in extra_dtypes(need.site))
    return {op: sorted(keys) for op, keys in sorted(out.items())}


def selected_operators(needs) -> dict:
    """The content of selected_operators.yaml for `needs` (a Needs)."""
    operators = {
        op: {"debug_info": [needs.source], "include_all_overloads": False, "is_root_operator": True, "is_used_for_training": True}
        for op in sorted({n.site.operator for n in needs.kernels})
    }
    return {
        "build_features": [],
        "custom_classes": [],
        "et_kernel_metadata": kernel_metadata(needs),
        "include_all_non_op_selectives": False,
        "include_all_operators": False,
        "kernel_metadata": {},
        "operators": operators,
    }


def write_selected_operators(needs, path) -> None:
    import yaml

    with open(path, "w") as f:
        yaml.safe_dump(selected_operators(needs), f, default_flow_style=False)
