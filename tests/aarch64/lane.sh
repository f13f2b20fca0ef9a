#!/usr/bin/env bash
# make test-aarch64 (docs/aarch64.md): etops built and tested on Linux aarch64 under
# qemu-user emulation, on an x86_64 Debian machine, as root.
#   1. the host's tools from Debian (qemu-user-static, binfmt-support, debootstrap)
#      and qemu-aarch64 registered in binfmt_misc with the F flag;
#   2. the arm64 root (make_root.sh) under build/, cached under a hash of its recipe
#      and the pins: a changed recipe or pin builds a new one, older ones are removed;
#   3. on the host (x86_64, HOST_PYTHON's etops): the reference registry and the
#      reference `etops check --json` of the lane's kernels (lane_check.py's, the same);
#   4. in the root: `pip install .` of this tree (built natively under emulation),
#      then the lane's tests (tests/aarch64/lane_*.py) in one pytest process, which
#      writes build/aarch64/check-aarch64.json;
#   5. the two check reports compared (benchmarks/compare_platforms.py) into
#      build/aarch64/differences.md.
#
# Usage: tests/aarch64/lane.sh HOST_PYTHON TORCH_PIN EXECUTORCH_PIN
set -euo pipefail
host_python="$(realpath "${1:?usage: lane.sh HOST_PYTHON TORCH_PIN EXECUTORCH_PIN}")"
torch_pin="${2:?torch pin}"
executorch_pin="${3:?executorch pin}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
out="$src/build/aarch64"
started=$(date +%s)
stamp() { echo "test-aarch64: $1 ($(( $(date +%s) - started )) s)"; }

[ "$(id -u)" = 0 ] || { echo "test-aarch64: needs root (debootstrap, chroot, binfmt_misc)"; exit 2; }
[ "$(uname -m)" = x86_64 ] || [ "$(uname -m)" = aarch64 ] || { echo "test-aarch64: runs on an x86_64 (or aarch64) Linux host, not $(uname -m)"; exit 2; }

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
    echo "test-aarch64: qemu-aarch64 is registered in binfmt_misc without the F flag:"; cat "$binfmt/qemu-aarch64"
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

# 3. the x86_64 references
rm -rf "$out" && mkdir -p "$out"
"$host_python" -m etops list --json > "$out/registry-x86_64.json"
"$host_python" "$src/tests/aarch64/lane_check.py" "$out/check-x86_64.json" > "$out/check-x86_64.log" 2>&1 \
  || { cat "$out/check-x86_64.log"; echo "test-aarch64: etops check on x86_64 failed"; exit 1; }
stamp "x86_64 references written"

# 4. in the root: build, install, test
ETOPS_SOURCE="$src" "$src/tests/aarch64/in_root.sh" "$root" /bin/sh -ec '
  cd /src
  python -m pip install -q --no-build-isolation --no-deps .
  cd /tmp   # away from the source tree: only the installed etops is importable
  ETOPS_LANE_OUT=/src/build/aarch64 python -m pytest -q -p no:cacheprovider -o python_files="lane_*.py" \
    --rootdir /src/tests/aarch64 --confcutdir /src/tests/aarch64 /src/tests/aarch64'
stamp "aarch64 lane tests passed"

# 5. the differences between the platforms
"$host_python" "$src/benchmarks/compare_platforms.py" "$out/check-x86_64.json" "$out/check-aarch64.json" > "$out/differences.md"
head -40 "$out/differences.md"
stamp "done"
