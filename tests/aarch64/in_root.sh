#!/usr/bin/env bash
# Runs a command inside the aarch64 root (as root): in a private mount namespace (the
# mounts vanish with it, whatever happens) with /proc, /dev, /sys, /tmp and, when
# ETOPS_SOURCE is set, that directory at /src. qemu-user runs every arm64 process
# through binfmt_misc (flag F: the emulator is opened at registration, so the root
# needs no copy of it and the compilers and workers etops starts run too).
#
# On an x86_64 host /proc/cpuinfo is the host's (qemu-user 7.2 does not emulate it for
# aarch64): torch's cpuinfo finds no ARM processor in it and crashes at import. An
# arm64 one (two Neoverse N1 cores, the features qemu's default CPU has) is mounted
# over it.
#
# ETOPS_BIND (folders, one a line): each bind-mounted at its own path in the root
# (make dev-aarch64: the checkout, the output folders); ETOPS_CWD: the folder the
# command starts in (default /).
#
# Usage: tests/aarch64/in_root.sh ROOT_DIR COMMAND [ARG...]
set -euo pipefail
root="$(cd "${1:?usage: in_root.sh ROOT_DIR COMMAND...}" && pwd)"
shift
exec unshare --mount --propagation private /bin/sh -ec '
  root="$1"; shift
  mount -t proc proc "$root/proc"
  if [ "$(uname -m)" != aarch64 ]; then
    for n in 0 1; do printf "processor\t: %s\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n" $n; done > "$root/run/etops-cpuinfo"
    mount --bind "$root/run/etops-cpuinfo" "$root/proc/cpuinfo"
  fi
  mount --rbind /dev "$root/dev"
  mount -t sysfs sysfs "$root/sys"
  mount -t tmpfs tmpfs "$root/tmp"
  if [ -n "${ETOPS_SOURCE:-}" ]; then mkdir -p "$root/src" && mount --bind "$ETOPS_SOURCE" "$root/src"; fi
  printf "%s\n" "${ETOPS_BIND:-}" | while IFS= read -r folder; do
    [ -z "$folder" ] || { mkdir -p "$root$folder" && mount --bind "$folder" "$root$folder"; }
  done
  exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/opt/etops-venv/bin:/usr/bin:/bin LANG=C.UTF-8 \
    ETOPS_CACHE_DIR=/root/etops-cache /bin/sh -c '"'"'cd "$0" && exec "$@"'"'"' "${ETOPS_CWD:-/}" "$@"' sh "$root" "$@"
