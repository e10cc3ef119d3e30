#!/usr/bin/env bash
# Packages every crate the workspace publishes as crates.io would receive it, and verifies each
# package by building it from its .crate alone (cargo 1.9x packages the workspace together, so
# unpublished path dependencies resolve to their fresh packages). Nothing is uploaded.
# Extra arguments go to cargo (`--allow-dirty` for a work tree with uncommitted changes).
# docs/PUBLISHING.md has the names, the metadata and the release steps.
set -euo pipefail
cd "$(dirname "$0")/.."
# Packages of the same version from an earlier run are stale: cargo's verify build unpacks each
# sibling crate from its local overlay registry into $CARGO_HOME/registry/src once and reuses
# that source while the version is unchanged, so a second run on the same machine built
# rzmq-capi against the first run's rzmq-core. Only the workspace's own crates are removed.
rm -rf target/package
for crate in rzmq-core rzmq-rdma rzmq-capi rzmq-ibverbs-soft rzmq-tokio; do
    rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$crate"-[0-9]*
done
cargo package --workspace --exclude rzmq-tests --exclude rzmq-benches "$@"
# What a build from crates.io needs and the repository keeps elsewhere: zmq.h lives in include/
# at the root and reaches rzmq-capi's package through the rzmq-capi/include link.
cargo package --list -p rzmq-capi "$@" | grep -qx include/zmq.h ||
    { echo "package: rzmq-capi's package lacks include/zmq.h" >&2; exit 1; }
# The MPL-2.0 text travels with each crate (LICENSE at the root, linked from each crate).
for crate in rzmq-core rzmq-rdma rzmq-ibverbs-soft rzmq-capi rzmq-tokio; do
    cargo package --list -p "$crate" "$@" | grep -qx LICENSE ||
        { echo "package: $crate's package lacks LICENSE" >&2; exit 1; }
done
echo "package: every published crate packaged and verified (target/package/*.crate)"
