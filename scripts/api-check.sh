#!/usr/bin/env bash
# The semver check of the published crates' public API (docs/PUBLISHING.md): for each crate the
# workspace publishes, rustdoc's JSON gives its public items and their signatures
# (scripts/api_check.py), compared with api/<crate>.txt, the baseline of the version on its first
# line. A removed or changed item needs a breaking version bump, an addition a patch bump at
# least. Runs the checker's own test on a fixture first (scripts/api-check-test.sh).
#
#   scripts/api-check.sh            check every published crate (CI)
#   scripts/api-check.sh --bless    rewrite api/*.txt with the current API and versions
set -euo pipefail
cd "$(dirname "$0")/.."
BLESS=
case "${1:-}" in
--bless) BLESS=--bless ;;
"") bash scripts/api-check-test.sh ;;
*) echo "usage: $0 [--bless]" >&2; exit 2 ;;
esac
TARGET_DIR="$(cargo metadata --no-deps --format-version 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
# rustdoc's JSON output is unstable: RUSTC_BOOTSTRAP lets the stable toolchain write it. Given to
# rustdoc alone (through RUSTDOC), not to cargo: cargo fingerprints RUSTC_BOOTSTRAP, so exporting
# it would check every dependency again instead of reusing what lint.sh's `cargo doc` built.
mkdir -p "$TARGET_DIR"
printf '#!/bin/sh\nRUSTC_BOOTSTRAP=1 exec rustdoc "$@"\n' >"$TARGET_DIR/rustdoc-unstable"
chmod +x "$TARGET_DIR/rustdoc-unstable"
export RUSTDOC="$TARGET_DIR/rustdoc-unstable"
# "package lib-name" for every package without `publish = false`.
crates="$(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["publish"] is None:
        lib = [t["name"] for t in p["targets"] if set(t["kind"]) & {"lib", "rlib", "cdylib", "staticlib"}]
        print(p["name"], lib[0].replace("-", "_"))
')"
mkdir -p api
status=0
while read -r pkg lib; do
    # -A warnings: the JSON pass reports intra-doc links HTML docs do not; lint.sh checks docs.
    cargo rustdoc --quiet -p "$pkg" --lib -- -Z unstable-options --output-format json -A warnings
    python3 scripts/api_check.py check "$TARGET_DIR/doc/$lib.json" "api/$pkg.txt" $BLESS || status=1
done <<<"$crates"
exit $status
