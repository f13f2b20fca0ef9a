#!/usr/bin/env bash
# etops' aarch64 wheel cross-compiled on the x86_64 host for the lane's root (root.sh's
# step 3, docs/aarch64.md "etops in the root"): the same scikit-build-core build as
# `pip install .`, run by a host Python, with Debian's aarch64 cross compilers (GCC
# 12.2, the root's own version) and the root as the sysroot
# (tests/aarch64/aarch64-linux-gnu.cmake). Under emulation the same build took 9
# minutes of the cold lane; here every compiler runs natively.
#
# What the build asks Python is answered for the root, not the host: the extension
# suffix and include folder come from the root's python3 (in_root.sh), and the
# CMakeLists' queries (where executorch and torch are, their versions) run the host
# Python with the root's site-packages first on its path (find_spec and
# importlib.metadata read files; nothing aarch64 is imported).
#
# Usage: tests/aarch64/cross_build.sh ROOT_DIR HOST_PYTHON OUT_DIR   (as root)
# Writes one etops-*-linux_aarch64.whl into OUT_DIR (emptied first) and prints its path.
set -euo pipefail
root="$(cd "${1:?usage: cross_build.sh ROOT_DIR HOST_PYTHON OUT_DIR}" && pwd)"
host_python="${2:?the host Python that makes the venv of the build tools}"
out="${3:?the folder for the wheel}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
here="$src/tests/aarch64"
exec 3>&1 1>&2  # everything but the last line (the wheel) on stderr
for compiler in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++; do
  command -v "$compiler" > /dev/null || { echo "cross_build.sh: $compiler missing (Debian's gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu; root.sh installs them)"; exit 2; }
done

# the build tools on the host: the same requirements as the root's venv holds
tools="$src/build/aarch64-cross-tools"
[ -x "$tools/bin/cmake" ] || { rm -rf "$tools" && "$host_python" -m venv "$tools" \
  && "$tools/bin/python" -m pip install -q 'scikit-build-core>=0.10' cmake ninja; }

# the root's Python: its extension suffix and include folder (paths inside the root)
read -r ext_suffix include < <("$here/in_root.sh" "$root" /opt/etops-venv/bin/python -c \
  'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"), sysconfig.get_paths()["include"])')
case "$ext_suffix" in
  .cpython-*-aarch64-linux-gnu.so) ;;
  *) echo "cross_build.sh: the root's python reports extension suffix '$ext_suffix', not an aarch64 CPython's"; exit 2 ;;
esac
site="$root/opt/etops-venv/lib/python3.11/site-packages"
[ -d "$site/executorch" ] || { echo "cross_build.sh: no executorch in $site"; exit 2; }

# the Python the CMakeLists asks where executorch and torch are: the host's, reading the root's
build="$src/build/cross-aarch64"
mkdir -p "$build"
# CMake's cache names the root's paths (executorch's config): a new root starts it afresh
[ "$(cat "$build/root" 2> /dev/null)" = "$root" ] || { rm -rf "$build/cmake" && echo "$root" > "$build/root"; }
printf '#!/bin/sh\nPYTHONPATH=%s exec %s "$@"\n' "$site" "$tools/bin/python" > "$build/python-reading-the-root"
chmod +x "$build/python-reading-the-root"

rm -rf "$out" && mkdir -p "$out"
ETOPS_AARCH64_ROOT="$root" CMAKE_TOOLCHAIN_FILE="$here/aarch64-linux-gnu.cmake" \
  _PYTHON_HOST_PLATFORM=linux-aarch64 SETUPTOOLS_EXT_SUFFIX="$ext_suffix" \
  "$tools/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$out" \
  -C build-dir="$build/cmake" -C cmake.python-hints=false \
  -C cmake.define.Python_EXECUTABLE="$build/python-reading-the-root" \
  -C cmake.define.Python_INCLUDE_DIR="$root$include" \
  "$src"
wheel="$(ls "$out"/etops-*-linux_aarch64.whl)"
# the extension named for the root's CPython, as a native build names it
case "$("$tools/bin/python" -m zipfile -l "$wheel")" in
  *"etops/_native/_core$ext_suffix "*) ;;
  *) echo "cross_build.sh: $wheel holds no etops/_native/_core$ext_suffix"; exit 1 ;;
esac
echo "$wheel" >&3
