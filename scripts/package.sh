#!/usr/bin/env bash
# Packages every crate the workspace publishes as crates.io would receive it, and verifies each
# package by building it from its .crate alone (cargo 1.9x packages the workspace together, so
# unpublished path dependencies resolve to their fresh packages). Nothing is uploaded.
# Extra arguments go to cargo (`--allow-dirty` for a work tree with uncommitted changes).
# docs/PUBLISHING.md has the names, the metadata and the release steps.
set -euo pipefail
cd "$(dirname "$0")/.."
# The verify build runs in a target directory of its own, made anew: cargo takes a registry
# crate of a given version as immutable, and the workspace's crates reach each other's verify
# builds through a local registry of the packages just made, always as version 0.1.0 until a
# release. A kept target/ (CI's cargo cache) therefore linked rzmq-capi against the rzmq-core
# an earlier run compiled. The unpacked sources in cargo's registry cache go for the same reason.
VERIFY_DIR=target/package-verify
rm -rf target/package "$VERIFY_DIR"
for crate in rzmq-core rzmq-rdma rzmq-capi rzmq-ibverbs-soft rzmq-tokio; do
    rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$crate"-[0-9]*
done
cargo package --workspace --exclude rzmq-tests --exclude rzmq-benches --target-dir "$VERIFY_DIR" "$@"
# What a build from crates.io needs and the repository keeps elsewhere: zmq.h lives in include/
# at the root and reaches rzmq-capi's package through the rzmq-capi/include link.
cargo package --list -p rzmq-capi "$@" | grep -qx include/zmq.h ||
    { echo "package: rzmq-capi's package lacks include/zmq.h" >&2; exit 1; }
# The MPL-2.0 text travels with each crate (LICENSE at the root, linked from each crate).
for crate in rzmq-core rzmq-rdma rzmq-ibverbs-soft rzmq-capi rzmq-tokio; do
    cargo package --list -p "$crate" "$@" | grep -qx LICENSE ||
        { echo "package: $crate's package lacks LICENSE" >&2; exit 1; }
done
# The packages stay (target/package/*.crate); the verify build's dependencies do not, so the
# cargo cache holds one dev build, not two.
rm -rf target/package
mv "$VERIFY_DIR/package" target/package
rm -rf "$VERIFY_DIR"
echo "package: every published crate packaged and verified (target/package/*.crate)"
