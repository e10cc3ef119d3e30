# Sourced by .ci/run: the build directories that do not change with the commit, kept outside the
# clone so that a clean clone's CI starts warm (docs/TESTING.md, "Caches"). Each is a directory
# under $RZMQ_CACHE_DIR (default ~/.cache/rzmq/ci) that the clone's path links to, keyed by what
# it depends on and checked before use by scripts/cache.py: a key that misses (or an entry whose
# maker did not finish) starts empty, a corrupt entry is reported loudly and rebuilt. Entries are
# sealed again when CI passes; the tools in them (cargo, pip) decide what to rebuild inside.
#
#   cargo      target/        the stable toolchain's builds: third-party crates, build-script
#                             outputs (rdma-core's C build), and the workspace's own crates
#                             (rebuilt when the clone is new: cargo sees newer sources)
#   fuzz       fuzz/target/   cargo fuzz's builds (nightly)
# The real environments and models (python/tests/real/env.sh, make_tiny_model.py) and the stock
# reference runs are cached by their own scripts under ~/.cache/rzmq, keyed and checked the same
# way. Python venvs inside the clone (compat/build, python/build) are not: a venv records its own
# path, and pip's wheel cache already makes them quick to remake.
#
# RZMQ_CI_CACHE=0 turns the links off (everything is built inside the clone, as on a machine that
# never ran CI).

CI_CACHE_ROOT=${RZMQ_CACHE_DIR:-$HOME/.cache/rzmq/ci}
CI_CACHE_ENTRIES=()

# ci_cache_key NAME: the key of an entry.
ci_cache_key() {
  case "$1" in
    cargo) python3 scripts/cache.py key --cmd "rustc -vV" --file Cargo.lock ;;
    fuzz) python3 scripts/cache.py key --file fuzz/Cargo.lock ;;
  esac
}

# ci_cache_link NAME PATH: checks the entry NAME and links the clone's PATH to it.
ci_cache_link() {
  local name=$1 path=$2 key dir rc
  key=$(ci_cache_key "$name") && [ -n "$key" ] || { echo "[ci-cache] no key for $name" >&2; return 1; }
  dir="$CI_CACHE_ROOT/$name"
  mkdir -p "$CI_CACHE_ROOT"
  rc=0
  python3 scripts/cache.py check "$dir" "$key" || rc=$?
  if [ "$rc" = 2 ]; then
    echo "[ci-cache] $name: the cached entry is CORRUPT (above); discarding it and rebuilding" >&2
  fi
  if [ "$rc" != 0 ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
  fi
  # In use from now on: unsealed until CI passes (a run that stops half way leaves it unsealed,
  # which the next run treats as a miss).
  python3 scripts/cache.py unseal "$dir"
  if [ -e "$path" ] && [ ! -L "$path" ]; then
    echo "[ci-cache] $path exists in the clone: left as it is, entry $name not used" >&2
    return 0
  fi
  rm -f "$path"
  mkdir -p "$(dirname "$path")"
  ln -s "$dir" "$path"
  CI_CACHE_ENTRIES+=("$name:$key")
  echo "[ci-cache] $path -> $dir ($([ "$rc" = 0 ] && echo hit || echo "rebuilt"))"
}

ci_cache_open() {
  [ "${RZMQ_CI_CACHE:-1}" = 0 ] && { echo "[ci-cache] off (RZMQ_CI_CACHE=0)"; return 0; }
  ci_cache_link cargo target
  ci_cache_link fuzz fuzz/target
}

# ci_cache_seal: after CI passed, seals every entry this run used.
ci_cache_seal() {
  local e
  for e in "${CI_CACHE_ENTRIES[@]}"; do
    python3 scripts/cache.py seal "$CI_CACHE_ROOT/${e%%:*}" "${e#*:}"
  done
}
