#!/usr/bin/env bash
# The wheel travels: etops built and installed into a fresh virtual environment, and
# there the README's python blocks, `etops list`, `etops threads`, `etops check` on a
# few kernels and custom kernels built from source strings run.
#
# Usage: tests/packaging/wheel_travel.sh WORK_DIR [PIN...]     (pip's cache is reused)
#   no PIN (make test-wheel): `pip wheel .` with pip's default build isolation (the
#     newest torch and executorch in etops' ranges), the wheel installed with its
#     dependencies from the package index.
#   PINs, e.g. torch==2.13.0 executorch==1.5.0 (make test-compat): the venv gets those
#     first, etops is built there with --no-build-isolation (as a user with their own
#     ExecuTorch builds it) and installed with its dependencies, which must keep the
#     pinned executorch. With ETOPS_REFERENCE_REGISTRY (`etops list --json` of another
#     verified version) the registries are compared kernel by kernel.
set -euo pipefail
work="${1:?usage: wheel_travel.sh WORK_DIR [PIN...]}"
shift
src="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$work" && mkdir -p "$work/wheels"
venv_python="$work/venv/bin/python"
python3 -m venv "$work/venv"
"$venv_python" -m pip install -q --upgrade pip
if [ $# -eq 0 ]; then
  python3 -m venv "$work/build-venv"
  "$work/build-venv/bin/python" -m pip install -q --upgrade pip
  "$work/build-venv/bin/python" -m pip wheel -q --no-deps -w "$work/wheels" "$src"
  "$venv_python" -m pip install -q "$work"/wheels/etops-*.whl
else
  "$venv_python" -m pip install -q "$@" "scikit-build-core>=0.10" ninja cmake
  before="$("$venv_python" -m pip freeze | grep -i '^executorch==')"
  "$venv_python" -m pip install -q --no-build-isolation -C build-dir="$work/cmake-build" "$src"
  after="$("$venv_python" -m pip freeze | grep -i '^executorch==')"
  [ "$before" = "$after" ] || { echo "installing etops replaced $before with $after"; exit 1; }
  echo "built and installed against $after"
fi
cd "$work"   # away from the source tree: only the installed etops is importable
"$venv_python" - "$src" <<'PY'
import pathlib, sys
sys.path.insert(0, f"{sys.argv[1]}/tests/docs")
from docs_pages import run_page
run_page(pathlib.Path(sys.argv[1]) / "README.md")
print("README python blocks ok")
PY
"$work/venv/bin/etops" --version
"$work/venv/bin/etops" list > "$work/list.txt" && head -5 "$work/list.txt"
"$work/venv/bin/etops" list --json > "$work/list.json"
if [ -n "${ETOPS_REFERENCE_REGISTRY:-}" ]; then
  "$venv_python" "$src/tests/packaging/registry_compare.py" "$work/list.json" "$ETOPS_REFERENCE_REGISTRY"
fi
"$work/venv/bin/etops" threads --json
# A few kernels against ATen: elementwise (optimized), a reduction, a quantized one.
# The travel checks that the sweep runs in the installed wheel, not what it finds:
# exit 1 means findings (these kernels have known ones), anything else but 0 fails;
# then every kernel must be reached with cases run and no error of etops' own.
status=0
"$work/venv/bin/etops" check --no-progress --report-dir "$work/check" --json "$work/check.json" \
  aten::add.out aten::sum.IntList_out quantized_decomposed::quantize_per_tensor.out || status=$?
if [ "$status" -gt 1 ]; then echo "etops check failed (exit $status)"; exit 1; fi
"$venv_python" - "$work/check.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
totals, coverage = report["totals"], report["coverage"]
problems = [f"{key}: {value}" for key, value in (
    ("kernels not reached", coverage["unreached"]), ("errors", totals["error"]),
    ("samples failed", report["samples_failed"]), ("task errors", report["task_errors"])) if value]
if totals["cases"] == 0:
    problems.append("no case ran")
if problems:
    sys.exit("etops check in the wheel: " + "; ".join(problems))
print(f"etops check: {coverage['reached']} kernels reached, {totals['cases']} cases")
PY
# A kernel compiled from a source string (a fresh cache: headers and libraries come
# from the installed executorch), registered, run eagerly and in a .pte.
ETOPS_CACHE_DIR="$work/cache" "$venv_python" "$src/examples/custom_kernel_pte.py"
# The API the verified versions differ in (get_thread_count, 1.5.1's header only).
ETOPS_CACHE_DIR="$work/cache" "$venv_python" "$src/tests/packaging/thread_count_kernel.py"
echo "wheel travel: ok"
