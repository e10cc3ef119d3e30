#!/usr/bin/env bash
# Installs what rzmq needs on a fresh Debian machine: the reference libzmq (interop tests),
# a C toolchain and pkg-config (C ABI tests), cmake and libclang (rdma-mummy-sys), python3 + pip,
# iproute2 (network namespaces for the RDMA tests), libibverbs1 (Mooncake, a peer the real vllm-omni
# runs measure against; with no RDMA device it lists none, as before).
set -euo pipefail
need=()
for p in libzmq3-dev pkg-config cmake libclang-dev python3-pip python3-venv gcc g++ make iproute2 libibverbs1; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
command -v cargo >/dev/null || { echo "cargo (Rust toolchain) is required: https://rustup.rs" >&2; exit 1; }
echo "setup: dependencies present"
