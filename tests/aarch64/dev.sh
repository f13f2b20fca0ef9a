#!/usr/bin/env bash
# make dev-aarch64 DEV="PATH... [etops dev options]" (docs/aarch64.md, docs/dev.md):
# `etops dev` on Linux aarch64 from an x86_64 machine, inside the lane's arm64 root
# under qemu-user (root.sh: made or reused, etops of this tree built in it). The
# kernel files' ARM-only code (#if defined(__aarch64__), NEON intrinsics, at::vec's
# NEON Vectorized) is compiled by the root's g++ against the aarch64 executorch and
# judged there, against ATen and against the file at git HEAD, as on an ARM machine.
#
# Every argument naming an existing file or folder, or a file in an existing folder
# (--json, --markdown, --report-dir), has its folder bind-mounted at the same path in
# the root (the git top level of a checkout, so that dev finds its HEAD, its headers
# and its YAML), and so has the current folder: paths mean the same inside and out.
# etops' build cache is the root's (/root/etops-cache): a second run rebuilds nothing
# unchanged.
#
# Usage: tests/aarch64/dev.sh HOST_PYTHON TORCH_PIN EXECUTORCH_PIN [etops dev ARGS...]  (as root)
set -euo pipefail
host_python="${1:?usage: dev.sh HOST_PYTHON TORCH_PIN EXECUTORCH_PIN [ARGS...]}"
torch_pin="${2:?torch pin}"
executorch_pin="${3:?executorch pin}"
shift 3
src="$(cd "$(dirname "$0")/../.." && pwd)"
[ $# -gt 0 ] || { echo "dev-aarch64: give the kernel files and etops dev's options: make dev-aarch64 DEV=\"PATH... [OPTIONS]\""; exit 2; }
root="$("$src/tests/aarch64/root.sh" "$host_python" "$torch_pin" "$executorch_pin" | tail -1)"

# the folder of `path` to mount: its git top level, else the folder itself (a file's: its parent)
mounted() {
  local folder="$1"
  [ -d "$folder" ] || folder="$(dirname "$folder")"
  folder="$(cd "$folder" && pwd -P)"
  git -C "$folder" rev-parse --show-toplevel 2> /dev/null || echo "$folder"
}
binds="$(mounted "$PWD")"
for arg in "$@"; do
  case "$arg" in -*) continue ;; esac
  if [ -e "$arg" ] || { [ "$arg" != "${arg%/*}" ] && [ -d "$(dirname "$arg")" ]; }; then
    binds="$binds
$(mounted "$arg")"
  fi
done
binds="$(printf '%s\n' "$binds" | sort -u)"
while IFS= read -r folder; do  # never over the root's own system folders
  case "$folder" in
    / | /usr | /usr/* | /etc | /etc/* | /bin | /bin/* | /lib | /lib/* | /opt | /opt/* | /proc | /proc/* | /sys | /sys/* | /dev | /dev/* | /root | /var | /var/*)
      echo "dev-aarch64: will not mount $folder over the root's own (run it from a folder of your own)"; exit 2 ;;
  esac
done <<< "$binds"
ETOPS_BIND="$binds" ETOPS_CWD="$(pwd -P)" exec "$src/tests/aarch64/in_root.sh" "$root" etops dev "$@"
