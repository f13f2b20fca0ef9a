#!/usr/bin/env bash
# The wheel travels: build etops' wheel with pip's default build isolation, install
# it (with the pinned torch and executorch from the package index) into a fresh
# virtual environment, and there run the README snippet, `etops list`, a custom
# kernel built from a source string and `etops check` on one kernel.
# Usage: tests/packaging/wheel_travel.sh WORK_DIR   (pip's cache is reused)
set -euo pipefail
work="${1:?usage: wheel_travel.sh WORK_DIR}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$work" && mkdir -p "$work/wheels"
python3 -m venv "$work/build-venv"
"$work/build-venv/bin/python" -m pip install -q --upgrade pip
"$work/build-venv/bin/python" -m pip wheel -q --no-deps -w "$work/wheels" "$src"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip
"$work/venv/bin/python" -m pip install -q "$work"/wheels/etops-*.whl
cd "$work"   # away from the source tree: only the installed wheel is importable
"$work/venv/bin/python" - <<'PY'
import torch
import etops
from executorch.runtime import Runtime

reg = Runtime.get().operator_registry
a, b = torch.ones(2, 2), torch.ones(2, 2)
c = torch.empty_like(a)
reg.aten.add.out(a, b, out=c)
assert torch.equal(c, torch.full((2, 2), 2.0)), c
print("snippet ok")
PY
"$work/venv/bin/etops" list > "$work/list.txt" && head -5 "$work/list.txt"
"$work/venv/bin/etops" check aten::add.out
# A kernel compiled from a source string (a fresh cache: headers and libraries come
# from the installed executorch), registered, run eagerly and in a .pte.
ETOPS_CACHE_DIR="$work/cache" "$work/venv/bin/python" "$src/examples/custom_kernel_pte.py"
echo "wheel travel: ok"
