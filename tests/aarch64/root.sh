#!/usr/bin/env bash
# The aarch64 lane's host side and root (make aarch64-root; tests/aarch64/lane.sh
# runs it first): Debian's qemu-user-static, binfmt-support and debootstrap installed
# when missing, qemu-aarch64 registered in binfmt_misc with the F flag, and the arm64
# root (make_root.sh) under build/, cached under a hash of its recipe and the pins: a
# changed recipe or pin builds a new one, older ones are removed; then etops of this
# tree built and installed in it (skipped when these sources are). Needs no venv of
# this tree (HOST_PYTHON only installs uv), so .ci/run starts it in the background
# while the x86_64 suite runs. Its last line is the root's path.
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
for tool in qemu-aarch64-static:qemu-user-static update-binfmts:binfmt-support debootstrap:debootstrap unshare:util-linux; do
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

# 3. etops of this tree built and installed in the root (natively, under emulation;
# the build folder is this tree's build/cp311-cp311-linux_aarch64), skipped when the
# root holds the build of these very sources
sources="$(cd "$src" && find src cmake CMakeLists.txt pyproject.toml -type f ! -name '*.pyc' ! -name '*.so' \
  ! -name build_info.py -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
if [ "$(cat "$root/opt/etops-venv/etops-sources" 2>/dev/null)" != "$sources" ]; then
  ETOPS_SOURCE="$src" "$src/tests/aarch64/in_root.sh" "$root" /bin/sh -ec '
    cd /src && python -m pip install -q --no-build-isolation --no-deps .'
  echo "$sources" > "$root/opt/etops-venv/etops-sources"
  stamp "etops built and installed in the root"
else
  stamp "etops of these sources already installed in the root"
fi
echo "$root" >&3
