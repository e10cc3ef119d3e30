#!/usr/bin/env bash
# The test of scripts/api-check.sh's checker (scripts/api_check.py) on a tiny fixture crate
# (scripts/api-check-fixture/, no dependencies, built in a temporary directory): an unchanged API
# passes, an addition passes with a patch bump and fails without one, a removal, a changed
# signature and a new variant of an exhaustive enum fail under a patch bump, a removal passes
# under a minor bump. Each case runs rustdoc on the fixture only (about a second).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CHECK="$ROOT/scripts/api_check.py"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export CARGO_TARGET_DIR="$WORK/target"
failures=0

# case NAME EXPECT(pass|fail) VERSION SED-EXPRESSION: edit a fresh copy, check against the baseline.
case_() {
    local name=$1 expect=$2 version=$3 edit=$4
    rm -rf "$WORK/crate" && cp -r "$ROOT/scripts/api-check-fixture" "$WORK/crate"
    sed -i "s/^version = .*/version = \"$version\"/" "$WORK/crate/Cargo.toml"
    sed -i "$edit" "$WORK/crate/src/lib.rs"
    (cd "$WORK/crate" && RUSTC_BOOTSTRAP=1 cargo rustdoc --quiet --lib -- \
        -Z unstable-options --output-format json)
    # Exit 1 is the checker's "not covered by the version"; anything else but 0 is an error.
    local got=pass rc=0
    python3 "$CHECK" check "$CARGO_TARGET_DIR/doc/api_fixture.json" "$WORK/base.txt" \
        >"$WORK/out" 2>&1 || rc=$?
    case $rc in 0) got=pass ;; 1) got=fail ;; *) got="error $rc" ;; esac
    if [[ $got == "$expect" ]]; then
        echo "api-check-test: ok: $name ($got)"
    else
        echo "api-check-test: FAILED: $name: expected $expect, got $got:" >&2
        cat "$WORK/out" >&2
        failures=$((failures + 1))
    fi
}

# The baseline: the fixture as committed, at 0.1.0.
cp -r "$ROOT/scripts/api-check-fixture" "$WORK/crate"
(cd "$WORK/crate" && RUSTC_BOOTSTRAP=1 cargo rustdoc --quiet --lib -- \
    -Z unstable-options --output-format json)
python3 "$CHECK" check "$CARGO_TARGET_DIR/doc/api_fixture.json" "$WORK/base.txt" --bless >/dev/null
rm -rf "$WORK/crate"
for item in $'fn api_fixture::kept\tfn(u32) -> u32' $'method api_fixture::Thing::new\t' \
    'variant api_fixture::Shape::Round' $'field api_fixture::Thing.size\tusize' \
    $'const api_fixture::inner::LIMIT\tu64' 'impl core::marker::Send for api_fixture::Thing'; do
    grep -qF -- "$item" "$WORK/base.txt" || { echo "api-check-test: FAILED: baseline lacks '$item'" >&2; failures=$((failures + 1)); }
done

case_ "unchanged" pass 0.1.0 's/^x$/x/'
case_ "addition without a bump" fail 0.1.0 's|^// MARK-ADD|/// New.\npub fn added() {}|'
case_ "addition with a patch bump" pass 0.1.1 's|^// MARK-ADD|/// New.\npub fn added() {}|'
case_ "removal with a patch bump" fail 0.1.1 '/MARK-REMOVE/d'
case_ "removal with a minor bump" pass 0.2.0 '/MARK-REMOVE/d'
case_ "changed signature with a patch bump" fail 0.1.1 's/pub fn kept(x: u32) -> u32/pub fn kept(x: u64) -> u64/'
case_ "new variant of an exhaustive enum with a patch bump" fail 0.1.1 's|    // MARK-VARIANT|    /// New.\n    Square,|'
case_ "private field made public with a patch bump" pass 0.1.1 's/    _private: (),/    \/\/\/ Now public.\n    pub extra: (),\n    _private: (),/'

if ((failures)); then
    echo "api-check-test: $failures case(s) failed" >&2
    exit 1
fi
echo "api-check-test: all cases behave"
