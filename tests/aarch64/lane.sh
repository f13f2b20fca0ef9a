#!/usr/bin/env bash
# make test-aarch64 (docs/aarch64.md): etops built and tested on Linux aarch64 under
# qemu-user emulation, on an x86_64 Debian machine, as root.
#   1, 2. root.sh (make aarch64-root, which .ci/run starts in the background first):
#      the host's tools from Debian (qemu-user-static, binfmt-support, debootstrap,
#      the aarch64 cross compilers), qemu-aarch64 registered in binfmt_misc with the
#      F flag, the arm64 root (make_root.sh) under build/, cached under a hash of its
#      recipe and the pins, and etops of this tree in it (cross-compiled on the host
#      by cross_build.sh and pip-installed there, skipped when these sources are);
#   3. on the host (x86_64, HOST_PYTHON's etops): the reference registry, and the
#      reference `etops check --json` of the lane's kernels (lane_check.py's, the same)
#      in the background while step 4 runs, then required to judge the same kernels;
#   4. in the root: the lane's tests (tests/aarch64/lane_*.py) in one pytest
#      process, which writes build/aarch64/check-aarch64.json, and beside it the x86_64
#      suite's core files (core_suite.txt) in another;
#   5. the two check reports compared (benchmarks/compare_platforms.py) into
#      build/aarch64/differences.md.
#
# Usage: tests/aarch64/lane.sh HOST_PYTHON TORCH_PIN EXECUTORCH_PIN
set -euo pipefail
host_python="${1:?usage: lane.sh HOST_PYTHON TORCH_PIN EXECUTORCH_PIN}"
# absolute, but not resolved: realpath would follow a venv's python symlink out of the venv
host_python="$(cd "$(dirname "$host_python")" && pwd)/$(basename "$host_python")"
torch_pin="${2:?torch pin}"
executorch_pin="${3:?executorch pin}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
out="$src/build/aarch64"
started=$(date +%s)
stamp() { echo "test-aarch64: $1 ($(( $(date +%s) - started )) s)"; }

[ "$(id -u)" = 0 ] || { echo "test-aarch64: needs root (debootstrap, chroot, binfmt_misc)"; exit 2; }
# 1, 2. host tools, binfmt_misc, the root (cached), etops of this tree in it
root="$("$src/tests/aarch64/root.sh" "$host_python" "$torch_pin" "$executorch_pin" | tail -1)"
stamp "root ready: $root"

# 3. the x86_64 references: the registry now (the root's registry test reads it), the
# check in the background while the root's tests run (most of their time is one
# emulated thread: the other core is free)
rm -rf "$out" && mkdir -p "$out"
"$host_python" -m etops list --json > "$out/registry-x86_64.json"
"$host_python" "$src/tests/aarch64/lane_check.py" "$out/check-x86_64.json" > "$out/check-x86_64.log" 2>&1 &
x86_64_check=$!
trap 'kill $x86_64_check 2> /dev/null || true' EXIT
stamp "x86_64 registry written, its check started"

# 4. in the root (etops of this tree installed there by root.sh): the core's test files
# of the x86_64 suite (core_suite.txt) in a process of their own beside the lane's tests
core_files="$(grep -v '^#' "$src/tests/aarch64/core_suite.txt" | grep -v '^- ' | grep . | sed 's|^|/src/tests/|' | tr '\n' ' ')"
ETOPS_SOURCE="$src" "$src/tests/aarch64/in_root.sh" "$root" /bin/sh -ec "
  cd /tmp
  python -m pytest -q -p no:cacheprovider --rootdir /src/tests $core_files" > "$out/core-suite.log" 2>&1 &
core_suite=$!
trap 'kill $x86_64_check $core_suite 2> /dev/null || true' EXIT
ETOPS_SOURCE="$src" "$src/tests/aarch64/in_root.sh" "$root" /bin/sh -ec '
  cd /tmp   # away from the source tree: only the installed etops is importable
  ETOPS_LANE_OUT=/src/build/aarch64 python -m pytest -q -p no:cacheprovider -o python_files="lane_*.py" \
    --rootdir /src/tests/aarch64 --confcutdir /src/tests/aarch64 /src/tests/aarch64'
stamp "aarch64 lane tests passed"
wait "$core_suite" || { cat "$out/core-suite.log"; echo "test-aarch64: the core's test files failed on aarch64"; exit 1; }
tail -1 "$out/core-suite.log"
stamp "the core's test files passed on aarch64 (core_suite.txt)"
wait "$x86_64_check" || { cat "$out/check-x86_64.log"; echo "test-aarch64: etops check on x86_64 failed"; exit 1; }
"$host_python" "$src/tests/aarch64/lane_check.py" --same-kernels "$out/check-x86_64.json" "$out/check-aarch64.json"
stamp "x86_64 check done, the same kernels judged on both"

# 5. the differences between the platforms
"$host_python" "$src/benchmarks/compare_platforms.py" "$out/check-x86_64.json" "$out/check-aarch64.json" > "$out/differences.md"
head -40 "$out/differences.md"
stamp "done"
