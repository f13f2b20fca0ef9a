#!/usr/bin/env bash
# Runs a command inside the aarch64 root (as root): in a private mount namespace (the
# mounts vanish with it, whatever happens) with /proc, /dev, /sys, /tmp and, when
# ETOPS_SOURCE is set, that directory at /src. qemu-user runs every arm64 process
# through binfmt_misc (flag F: the emulator is opened at registration, so the root
# needs no copy of it and the compilers and workers etops starts run too).
#
# Usage: tests/aarch64/in_root.sh ROOT_DIR COMMAND [ARG...]
set -euo pipefail
root="$(cd "${1:?usage: in_root.sh ROOT_DIR COMMAND...}" && pwd)"
shift
exec unshare --mount --propagation private /bin/sh -ec '
  root="$1"; shift
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount -t sysfs sysfs "$root/sys"
  mount -t tmpfs tmpfs "$root/tmp"
  if [ -n "${ETOPS_SOURCE:-}" ]; then mkdir -p "$root/src" && mount --bind "$ETOPS_SOURCE" "$root/src"; fi
  exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/opt/etops-venv/bin:/usr/bin:/bin LANG=C.UTF-8 \
    ETOPS_CACHE_DIR=/root/etops-cache "$@"' sh "$root" "$@"
