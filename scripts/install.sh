#!/usr/bin/env bash
# Builds rzmq's libzmq (release) and installs it as a drop-in libzmq 4.3.5 under PREFIX:
#
#   PREFIX/lib/libzmq.so.5          the shared library (soname libzmq.so.5)
#   PREFIX/lib/libzmq.so            -> libzmq.so.5 (for -lzmq)
#   PREFIX/lib/libzmq.a             the static library
#   PREFIX/lib/pkgconfig/libzmq.pc  pkg-config metadata (Version 4.3.5)
#   PREFIX/include/zmq.h, zmq_utils.h
#
# Then `ZMQ_PREFIX=PREFIX pip install pyzmq --no-binary pyzmq` and
# `PKG_CONFIG_PATH=PREFIX/lib/pkgconfig cc prog.c $(pkg-config --cflags --libs libzmq)` work.
#
# Usage: scripts/install.sh PREFIX
# Environment: CARGO (default cargo), CARGO_TARGET_DIR (default <repo>/target),
#              RZMQ_SKIP_BUILD=1 to install an existing release build.
set -euo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 PREFIX" >&2
    exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$1"
PREFIX=$(cd "$1" && pwd)
CARGO=${CARGO:-cargo}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
case "$TARGET_DIR" in
    /*) ;;
    *) TARGET_DIR="$ROOT/$TARGET_DIR" ;;
esac
OUT="$TARGET_DIR/release"

if [ "${RZMQ_SKIP_BUILD:-0}" != 1 ]; then
    (cd "$ROOT" && "$CARGO" build --release -p rzmq-capi)
fi

for f in libzmq.so libzmq.a; do
    if [ ! -f "$OUT/$f" ]; then
        echo "install.sh: $OUT/$f is missing (build failed?)" >&2
        exit 1
    fi
done

install -d "$PREFIX/lib/pkgconfig" "$PREFIX/include"
install -m 0755 "$OUT/libzmq.so" "$PREFIX/lib/libzmq.so.5"
ln -sfn libzmq.so.5 "$PREFIX/lib/libzmq.so"
install -m 0644 "$OUT/libzmq.a" "$PREFIX/lib/libzmq.a"
install -m 0644 "$ROOT/include/zmq.h" "$ROOT/include/zmq_utils.h" "$PREFIX/include/"

# Libs.private: what the Rust standard library in libzmq.a needs from the system when linking
# statically (`pkg-config --static`).
cat > "$PREFIX/lib/pkgconfig/libzmq.pc" <<PC
prefix=$PREFIX
exec_prefix=\${prefix}
libdir=\${exec_prefix}/lib
includedir=\${prefix}/include

Name: libzmq
Description: ZeroMQ (rzmq, a Rust implementation compatible with libzmq 4.3.5)
URL: https://zeromq.org/
Version: 4.3.5
Libs: -L\${libdir} -lzmq
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
Cflags: -I\${includedir}
PC

echo "installed rzmq libzmq 4.3.5 into $PREFIX"
