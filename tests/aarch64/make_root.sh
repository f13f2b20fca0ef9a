#!/usr/bin/env bash
# The aarch64 lane's root (make test-aarch64, docs/aarch64.md): an arm64 Debian 12 root
# made with debootstrap from Debian's archive, run through qemu-user (binfmt_misc), and
# in it a venv (/opt/etops-venv) holding the aarch64 wheels of the pinned torch and
# executorch from PyPI, the build tools and pytest. The Makefile caches the root under
# build/ keyed on a hash of this file and the pins: editing either rebuilds it.
#
# The wheels are resolved and unpacked natively on the host by uv (pinned below) for
# the aarch64 manylinux_2_28 platform, with the target's environment markers (pip's
# --platform evaluates markers as the host's: executorch's x86_64-only coremltools
# would come in, as a source build): 5 GB of torch and its NVIDIA libraries, which
# pip under emulation takes many minutes to unpack. Nothing is compiled for them.
# PyPI's aarch64 torch is its CUDA build, the only one there (the CPU-only wheels are
# on download.pytorch.org, another index): its libtorch_python.so needs libcudart,
# cuDNN and NCCL to load, so the NVIDIA wheels stay.
# They download while debootstrap runs (about a minute cold, against debootstrap's
# 12 emulated; docs/aarch64.md "The lane's wall time"), straight into the venv's
# site-packages, which debootstrap does not touch.
#
# Usage: tests/aarch64/make_root.sh ROOT_DIR TORCH_PIN EXECUTORCH_PIN HOST_PYTHON   (as root)
set -euo pipefail
root="${1:?usage: make_root.sh ROOT_DIR TORCH_PIN EXECUTORCH_PIN HOST_PYTHON}"
torch_pin="${2:?the torch pin, e.g. torch==2.13.0}"
executorch_pin="${3:?the executorch pin, e.g. executorch==1.5.1}"
host_python="${4:?a host Python with pip, to install uv with}"
uv_pin="uv==0.13.9"
case "$torch_pin$executorch_pin" in
  *==*==*) ;;
  *) echo "make_root.sh: the pins must be exact (torch==X executorch==Y), got '$torch_pin' '$executorch_pin'"; exit 2 ;;
esac
here="$(cd "$(dirname "$0")" && pwd)"
site="$root.partial/opt/etops-venv/lib/python3.11/site-packages"
tools="$(dirname "$root")/aarch64-uv"
[ -x "$tools/bin/uv" ] || { "$host_python" -m venv "$tools" && "$tools/bin/python" -m pip install -q "$uv_pin"; }
[ ! -e /etc/ssl/certs/ca-certificates.crt ] || export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
# ETOPS_ROOT_RESUME=1: a .partial root whose debootstrap finished is kept (development)
resume=""
[ "${ETOPS_ROOT_RESUME:-}" != 1 ] || [ ! -x "$root.partial/usr/bin/python3" ] || resume=1
[ -n "$resume" ] || { rm -rf "$root.partial" && mkdir -p "$root.partial"; }
# the wheels, in the background (their own log; the build waits for them below)
mkdir -p "$site"
"$tools/bin/uv" pip install -q --python-platform aarch64-manylinux_2_28 --python-version 3.11 --only-binary :all: \
  --index-url https://pypi.org/simple --target "$site" \
  "$torch_pin" "$executorch_pin" pip 'scikit-build-core>=0.10' ninja cmake pytest numpy \
  rich==15.0.0 matplotlib==3.11.2 hypothesis==6.170.17 > "$root.wheels.log" 2>&1 &
wheels=$!
trap 'kill $wheels 2> /dev/null || true' EXIT
if [ -z "$resume" ]; then
# Debian 12 (bookworm) arm64: python3.11 (the wheels' CPython), gcc/g++ for etops' own
# build and for the kernels it compiles at run time, git for etops dev's base.
debootstrap --arch=arm64 --variant=minbase \
  --include=python3,python3-venv,python3-dev,gcc,g++,make,libc6-dev,ca-certificates,git \
  bookworm "$root.partial" http://deb.debian.org/debian
fi
cp /etc/resolv.conf "$root.partial/etc/resolv.conf"
# pip there trusts what the host trusts (the host's CA bundle: a TLS-intercepting
# proxy's CA included), not only its own certifi bundle
cp /etc/ssl/certs/ca-certificates.crt "$root.partial/etc/etops-host-ca.crt"
printf '[global]\ncert = /etc/etops-host-ca.crt\n' > "$root.partial/etc/pip.conf"
wait "$wheels" || { cat "$root.wheels.log"; echo "make_root.sh: the wheels could not be installed"; exit 1; }
trap - EXIT
rm -f "$root.wheels.log"
# The venv without pip (ensurepip under emulation is slow) around the wheels' site-packages.
"$here/in_root.sh" "$root.partial" /usr/bin/python3 -m venv --without-pip /opt/etops-venv
# --target leaves the wheels' scripts in site-packages/bin: the venv's bin gets the
# native tools (ninja for etops' custom kernels, cmake for its build)
for tool in ninja cmake; do ln -sf ../lib/python3.11/site-packages/bin/$tool "$root.partial/opt/etops-venv/bin/$tool"; done
mv "$root.partial" "$root"
