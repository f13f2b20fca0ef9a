#!/usr/bin/env bash
# The aarch64 lane's host side and root (make aarch64-root; tests/aarch64/lane.sh
# runs it first): Debian's qemu-user-static, binfmt-support, debootstrap and (on
# x86_64) the aarch64 cross compilers installed when missing, qemu-aarch64 registered in binfmt_misc with the F flag, and the arm64
# root (make_root.sh) under build/, cached under a hash of its recipe and the pins: a
# changed recipe or pin builds a new one, older ones are removed; then etops of this
# tree built and installed in it (skipped when these sources are). Needs no venv of
# this tree (HOST_PYTHON only makes the venvs of uv and of the cross build's tools),
# so .ci/run can start it in the background while the x86_64 suite runs. Its last line is the root's path.
#
# Usage: tests/aarch64/root.sh HOST_PYTHON TORCH_PIN EXECUTORCH_PIN     (as root)
set -euo pipefail
host_python="${1:?usage: root.sh HOST_PYTHON TORCH_PIN EXECUTORCH_PIN}"
torch_pin="${2:?torch pin}"
executorch_pin="${3:?executorch pin}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
started=$(date +%s)
stamp() { echo "aarch64-root: $1 ($(( $(date +%s) - started )) s)"; }
exec 3>&1 1>&2  # everything but the last line (the path) on stderr

[ "$(id -u)" = 0 ] || { echo "aarch64-root: needs root (debootstrap, chroot, binfmt_misc)"; exit 2; }
[ "$(uname -m)" = x86_64 ] || [ "$(uname -m)" = aarch64 ] || { echo "aarch64-root: runs on an x86_64 (or aarch64) Linux host, not $(uname -m)"; exit 2; }

# 1. host tools
missing=""
tools="qemu-aarch64-static:qemu-user-static update-binfmts:binfmt-support debootstrap:debootstrap unshare:util-linux"
# on x86_64, Debian's aarch64 cross compilers build etops for the root (step 3)
[ "$(uname -m)" = aarch64 ] || tools="$tools aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu aarch64-linux-gnu-g++:g++-aarch64-linux-gnu"
for tool in $tools; do
  command -v "${tool%%:*}" > /dev/null || missing="$missing ${tool##*:}"
done
if [ -n "$missing" ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing > /dev/null
fi
if [ "$(uname -m)" != aarch64 ]; then
  binfmt=/proc/sys/fs/binfmt_misc
  [ -e "$binfmt/register" ] || mount -t binfmt_misc binfmt_misc "$binfmt"
  [ -e "$binfmt/qemu-aarch64" ] || update-binfmts --enable qemu-aarch64 2> /dev/null || true
  if [ ! -e "$binfmt/qemu-aarch64" ]; then  # no binfmt-support service: register by hand
    echo ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64-static:PF' > "$binfmt/register"
  fi
  grep -q '^enabled' "$binfmt/qemu-aarch64" || echo 1 > "$binfmt/qemu-aarch64"
  # F: the emulator is opened now, so a chroot without it runs arm64 binaries, and
  # so do the compilers and worker processes etops starts in there
  grep -q '^flags: .*F' "$binfmt/qemu-aarch64" || {
    echo "aarch64-root: qemu-aarch64 is registered in binfmt_misc without the F flag:"; cat "$binfmt/qemu-aarch64"
    echo "remove it (echo -1 > $binfmt/qemu-aarch64) and run again"; exit 2; }
fi
stamp "host tools and binfmt_misc ready"

# 2. the root, keyed on its recipe
key="$(cat "$src/tests/aarch64/make_root.sh" | { cat; echo "$torch_pin $executorch_pin"; } | sha256sum | cut -c1-16)"
root="$src/build/aarch64-root-$key"
if [ ! -d "$root" ]; then
  for old in "$src"/build/aarch64-root-*; do
    [ -e "$old" ] && [ "$old" != "$root.partial" ] && rm -rf "$old"
  done
  "$src/tests/aarch64/make_root.sh" "$root" "$torch_pin" "$executorch_pin" "$host_python"
  stamp "root built: $root"
else
  stamp "root cached: $root"
fi

# 3. etops of this tree built and installed in the root, skipped when the root holds
# the build of these very sources. On an x86_64 host the wheel is cross-compiled
# natively (cross_build.sh: Debian's aarch64 GCC 12, the root as sysroot; under
# emulation the build took 9 minutes of the cold lane) and pip installs it in the
# root; on an aarch64 host, or with ETOPS_AARCH64_BUILD=native, pip builds it in the
# root (the build folder this tree's build/cp311-cp311-linux_aarch64).
sources="$(cd "$src" && find src cmake CMakeLists.txt pyproject.toml -type f ! -name '*.pyc' ! -name '*.so' \
  ! -name build_info.py -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
case "${ETOPS_AARCH64_BUILD:-cross}" in
  cross|native) ;;
  *) echo "aarch64-root: ETOPS_AARCH64_BUILD is 'cross' (the default) or 'native', not '$ETOPS_AARCH64_BUILD'"; exit 2 ;;
esac
if [ "$(cat "$root/opt/etops-venv/etops-sources" 2>/dev/null)" != "$sources" ]; then
  if [ "$(uname -m)" = aarch64 ] || [ "${ETOPS_AARCH64_BUILD:-cross}" = native ]; then
    ETOPS_SOURCE="$src" "$src/tests/aarch64/in_root.sh" "$root" /bin/sh -ec '
      cd /src && python -m pip install -q --no-build-isolation --no-deps .'
    stamp "etops built (natively, under emulation) and installed in the root"
  else
    wheel="$("$src/tests/aarch64/cross_build.sh" "$root" "$host_python" "$src/build/cross-aarch64/dist" | tail -1)"
    stamp "etops cross-compiled: $wheel"
    ETOPS_SOURCE="$src" "$src/tests/aarch64/in_root.sh" "$root" /bin/sh -ec '
      python -m pip install -q --no-deps --force-reinstall "/src/${1#"$2"/}"' sh "$wheel" "$src"
    stamp "etops installed in the root"
  fi
  echo "$sources" > "$root/opt/etops-venv/etops-sources"
else
  stamp "etops of these sources already installed in the root"
fi
echo "$root" >&3
