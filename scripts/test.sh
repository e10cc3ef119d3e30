#!/usr/bin/env bash
# The project's test command: unit, property and integration tests of every crate (including
# interop against the reference libzmq), then the examples build.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUST_BACKTRACE=1
cargo build --release --workspace --examples
cargo test --workspace --release -- --test-threads=2
