#!/usr/bin/env bash
# The habits CI enforces before the tests: formatting, clippy with warnings as errors on every
# target, and documentation that builds without warnings (broken or private intra-doc links).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
echo "lint: fmt, clippy and rustdoc clean"
