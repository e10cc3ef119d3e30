#!/usr/bin/env bash
# Tests of the checked caches (scripts/cache.py, scripts/ci-cache.sh, python/tests/real/refcache.py)
# on scratch entries: a sealed entry is a hit, another key or an unsealed entry a miss, and a
# corrupted entry is reported as CORRUPT and rebuilt. Run by .ci/run before it links its caches.
set -euo pipefail
cd "$(dirname "$0")/.."
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "cache-test: FAILED: $*" >&2; exit 1; }
check() { local rc=0; python3 scripts/cache.py check "$@" 2>"$T/err" || rc=$?; echo "$rc"; }

# An entry: two files and a link.
mkdir -p "$T/e/sub"
echo one > "$T/e/a"
head -c 100000 /dev/urandom > "$T/e/sub/b"
ln -s a "$T/e/link"
[ "$(check "$T/e" k1)" = 1 ] || fail "an unsealed entry is not a miss"
python3 scripts/cache.py seal "$T/e" k1 2>/dev/null
[ "$(check "$T/e" k1)" = 0 ] || fail "a sealed entry is not a hit"
[ "$(check "$T/e" k2)" = 1 ] || fail "an entry of another key is not a miss"
mkdir -p "$T/e/__pycache__" && echo x > "$T/e/__pycache__/m.pyc"
[ "$(check "$T/e" k1)" = 0 ] || fail "bytecode written after sealing counts as a change"
changed=$(python3 scripts/cache.py corrupt "$T/e")
[ "$(check "$T/e" k1)" = 2 ] || fail "a flipped byte in $changed is not CORRUPT"
grep -q "CORRUPT" "$T/err" && grep -q "$changed" "$T/err" || fail "the corrupt file is not named: $(cat "$T/err")"
python3 scripts/cache.py seal "$T/e" k1 2>/dev/null
echo extra > "$T/e/new"
[ "$(check "$T/e" k1)" = 2 ] || fail "an unexpected file is not CORRUPT"
rm "$T/e/new" "$T/e/a"
[ "$(check "$T/e" k1)" = 2 ] || fail "a missing file is not CORRUPT"

# Excluded paths: rewritten on purpose by the entry's user, not checked.
python3 scripts/cache.py seal "$T/e" k3 --exclude 'sub/*' 2>/dev/null
echo rewritten > "$T/e/sub/b"
[ "$(check "$T/e" k3)" = 0 ] || fail "a change under an excluded glob counts"
echo changed > "$T/e/link2"
[ "$(check "$T/e" k3)" = 2 ] || fail "a change outside the excluded glob is not CORRUPT"

# ci-cache.sh: a sealed entry is linked as it is; a corrupted one is discarded and starts empty.
mkdir -p "$T/clone/scripts" && cp scripts/cache.py scripts/ci-cache.sh "$T/clone/scripts/"
cp Cargo.lock "$T/clone/"
(
  cd "$T/clone"
  export RZMQ_CACHE_DIR="$T/ci" RZMQ_CI_CACHE=1
  source scripts/ci-cache.sh
  ci_cache_link cargo target >/dev/null 2>&1
  [ -L target ] || fail "target/ is not linked to the cache"
  echo built > target/artifact
  ci_cache_seal 2>/dev/null
  rm target
  CI_CACHE_ENTRIES=()
  ci_cache_link cargo target > "$T/out" 2>&1
  grep -q "hit" "$T/out" && [ -f target/artifact ] || fail "a sealed cargo entry was not reused: $(cat "$T/out")"
  ci_cache_seal 2>/dev/null
  rm target
  echo garbage > "$T/ci/cargo/artifact"
  CI_CACHE_ENTRIES=()
  ci_cache_link cargo target > "$T/out" 2>&1
  grep -q "CORRUPT" "$T/out" && grep -q "rebuilt" "$T/out" || fail "a corrupt cargo entry was not reported and rebuilt: $(cat "$T/out")"
  [ ! -e target/artifact ] || fail "a corrupt cargo entry was reused"
)

# refcache.py: a stored reference is restored; a corrupted one is reported and not restored.
mkdir -p "$T/ref"
echo '{"tokens": [1, 2, 3]}' > "$T/ref/outputs.json"
RZMQ_REF_CACHE_DIR="$T/refs" python3 - "$T" <<'EOF' || fail "refcache"
import os, sys
sys.path.insert(0, "python/tests/real")
import refcache
t = sys.argv[1]
k = refcache.key(["a", "--requests 4"], ["Cargo.lock"], [os.path.join(t, "ref")])
assert k == refcache.key(["a", "--requests 4"], ["Cargo.lock"], [os.path.join(t, "ref")]), "key not stable"
assert k != refcache.key(["a", "--requests 5"], ["Cargo.lock"], [os.path.join(t, "ref")]), "key ignores its texts"
assert not refcache.restore("a", k, os.path.join(t, "restored")), "a miss restored something"
refcache.store("a", k, os.path.join(t, "ref"))
assert refcache.restore("a", k, os.path.join(t, "restored")), "a stored reference was not restored"
assert open(os.path.join(t, "restored", "outputs.json")).read() == open(os.path.join(t, "ref", "outputs.json")).read()
with open(os.path.join(refcache.entry("a", k), "outputs.json"), "w") as f:
    f.write('{"tokens": [1, 2, 4]}')
assert not refcache.restore("a", k, os.path.join(t, "restored2")), "a corrupt reference was restored"
assert not os.path.exists(refcache.entry("a", k)), "a corrupt reference was kept"
EOF
echo "cache-test: hit, miss (key, unsealed), corrupt (changed, extra, missing files) detected and rebuilt, excluded paths"
