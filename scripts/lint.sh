#!/usr/bin/env bash
# The habits CI enforces before the tests: formatting, clippy with warnings as errors on every
# target (the C ABI's DRAFT build too), and documentation that builds without warnings (broken
# or private intra-doc links).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The DRAFT build of the C ABI (its own items and tests, `--features draft`) the same way.
cargo clippy -p rzmq-capi --features draft --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
echo "lint: fmt, clippy and rustdoc clean"
